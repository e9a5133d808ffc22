import itertools

import keras
import numpy as np

from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.recipes.metrics import auc, bootstrap_aucs, calibration, gauc, logloss, paired_bootstrap, rela_impr


def pairwise_auc(labels, scores):
    """AUC by its definition: P(score of a positive > score of a negative), ties count half."""
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


class MetricsTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.labels = rng.integers(0, 2, 60).astype(float)
        self.scores = np.round(rng.random(60) + 0.3 * self.labels, 1)  # rounding makes ties

    def test_auc_matches_the_pairwise_definition(self):
        self.assertAlmostEqual(auc(self.labels, self.scores), pairwise_auc(self.labels, self.scores), places=12)

    def test_auc_of_weighted_labels_with_ties_matches_the_double_sum(self):
        """A label in [0, 1] weighs its row as a positive (y) and as a negative (1 - y): the AUC is the double
        sum over every pair of rows (a row with itself included), ties counting half."""
        rng = np.random.default_rng(2)
        labels = rng.choice([0.0, 0.25, 1.0], size=80)
        scores = rng.integers(0, 7, size=80).astype(float)  # runs of ties, some of one row only
        greater = (scores[:, None] > scores[None, :]) + 0.5 * (scores[:, None] == scores[None, :])
        expected = (labels[:, None] * (1 - labels)[None, :] * greater).sum() / (labels.sum() * (1 - labels).sum())
        self.assertAlmostEqual(auc(labels, scores), expected, places=12)
        self.assertTrue(np.isnan(auc([], [])))
        with self.assertRaisesRegex(ZooError, "auc needs one score per label: 3 labels, 2 scores"):
            auc([0, 1, 1], [0.2, 0.4])

    def test_logloss_is_the_binary_cross_entropy_keras_reports(self):
        scores = np.clip(self.scores / 1.3, 0.0, 1.0)  # 0 and 1 included: the clip keeps it finite
        clipped = [min(max(s, 1e-7), 1 - 1e-7) for s in scores]
        expected = -np.mean([np.log(c) if y else np.log(1 - c) for y, c in zip(self.labels, clipped)])
        self.assertAlmostEqual(logloss(self.labels, scores), expected, places=10)
        metric = keras.metrics.BinaryCrossentropy()
        metric.update_state(self.labels[:, None], scores[:, None])
        self.assertAlmostEqual(logloss(self.labels, scores), float(metric.result()), places=5)

    def test_gauc_is_the_row_weighted_mean_of_per_user_aucs(self):
        users = np.repeat([1, 2, 3, 4], 15)
        users[-15:] = 4
        labels = self.labels.copy()
        labels[users == 4] = 1  # user 4 has one class only: left out
        expected_num, expected_den = 0.0, 0
        for u in (1, 2, 3):
            rows = users == u
            expected_num += rows.sum() * pairwise_auc(labels[rows], self.scores[rows])
            expected_den += rows.sum()
        self.assertAlmostEqual(gauc(users, labels, self.scores), expected_num / expected_den, places=12)
        with self.assertRaisesRegex(ZooError, "no user has both"):
            gauc(users, np.ones(60), self.scores)
        with self.assertRaisesRegex(ZooError, "gauc is undefined: no rows"):
            gauc([], [], [])

    def test_gauc_with_ties_and_interleaved_users_matches_the_per_user_definition(self):
        rng = np.random.default_rng(5)
        users = rng.choice(["u9", "a", "m3", "z", "b"], size=300)  # rows of a user scattered, text ids
        labels = (rng.random(300) < 0.4).astype(float)
        scores = rng.integers(0, 6, size=300) / 5.0  # many ties, within and across users
        labels[users == "z"] = 0.0  # one class: left out
        num = den = 0.0
        for u in np.unique(users):
            rows = users == u
            if 0 < labels[rows].sum() < rows.sum():
                num += rows.sum() * pairwise_auc(labels[rows], scores[rows])
                den += rows.sum()
        self.assertAlmostEqual(gauc(users, labels, scores), num / den, places=12)

    def test_rela_impr(self):
        self.assertAlmostEqual(rela_impr(0.75, 0.7), (0.25 / 0.2 - 1) * 100)
        with self.assertRaisesRegex(ZooError, "above 0.5"):
            rela_impr(0.7, 0.5)

    def test_paired_bootstrap_matches_a_loop_over_resamples(self):
        rng = np.random.default_rng(1)
        labels = rng.integers(0, 2, 40).astype(float)
        a = rng.random(40) + 0.5 * labels
        b = rng.random(40) + 0.1 * labels
        result = paired_bootstrap(labels, a, b, resamples=200, seed=3, chunk=64)
        # Reference: draw the same row indices (one resample at a time), use the definition on the drawn rows.
        rng = np.random.default_rng(3)
        differences = []
        for _ in range(200):
            index = rng.integers(0, 40, size=40, dtype=np.int64)
            y = labels[index]
            if 0 < y.sum() < len(y):
                differences.append(pairwise_auc(y, a[index]) - pairwise_auc(y, b[index]))
        differences = np.array(differences)
        self.assertAlmostEqual(result["mean"], differences.mean(), places=10)
        self.assertAlmostEqual(result["p_value"], np.mean(differences <= 0), places=10)
        self.assertAlmostEqual(result["ci95"][0], np.percentile(differences, 2.5), places=10)
        self.assertAlmostEqual(result["difference"], pairwise_auc(labels, a) - pairwise_auc(labels, b), places=12)

    def test_bootstrap_aucs_with_ties_match_the_definition_whatever_the_chunk(self):
        """Scores with many ties (a baseline's rates, a constant: counted per distinct score), without ties and
        with a few (counted per row, the shared scores set right), and a resample of one class: each AUC is
        pairwise_auc on the drawn rows (NaN for one class), and the chunking changes nothing."""
        rng = np.random.default_rng(5)
        labels = (rng.random(30) < 0.2).astype(float)
        few = rng.random(30) + 0.5 * labels
        few[[3, 9, 17]] = few[[4, 12, 20]]  # three scores shared by two rows each
        two = np.where(np.arange(30) % 3 == 1, 0.2, 0.1)  # two scores, the first and last rows alike
        scores = np.stack([np.round(rng.random(30), 1), np.full(30, 0.3), rng.random(30) + labels, few, two])
        aucs = bootstrap_aucs(labels, scores, resamples=50, seed=11, chunk=7)
        np.testing.assert_array_equal(aucs, bootstrap_aucs(labels, scores, resamples=50, seed=11))
        rng = np.random.default_rng(11)
        for r in range(50):
            index = rng.integers(0, 30, size=30, dtype=np.int64)
            y = labels[index]
            for m in range(5):
                expected = pairwise_auc(y, scores[m][index]) if 0 < y.sum() < len(y) else np.nan
                np.testing.assert_allclose(aucs[m, r], expected, rtol=1e-12, equal_nan=True)
        self.assertEqual(aucs[1][np.isfinite(aucs[1])].tolist(), [0.5] * int(np.isfinite(aucs[1]).sum()))

    def test_resamples_scored_once_serve_every_comparison(self):
        rng = np.random.default_rng(4)
        labels = rng.integers(0, 2, 60).astype(float)
        models = np.stack([rng.random(60) + w * labels for w in (0.1, 0.3, 0.5, 0.2)])  # 2 models x 2 seeds
        shared = bootstrap_aucs(labels, models, resamples=300, seed=7, chunk=128)
        self.assertEqual(shared.shape, (4, 300))
        a, b = models[[0, 1]], models[[2, 3]]
        direct = paired_bootstrap(labels, a, b, resamples=300, seed=7, chunk=128)
        reused = paired_bootstrap(labels, a, b, resamples=300, seed=7, chunk=128, aucs=(shared[[0, 1]], shared[[2, 3]]))
        self.assertEqual(direct, reused)
        with self.assertRaisesRegex(ZooError, "resampled AUCs do not match the scores"):
            paired_bootstrap(labels, a, b, aucs=(shared[[0]], shared[[2]]))

    def test_bootstrap_is_seeded_and_uses_ten_thousand_resamples_by_default(self):
        first = paired_bootstrap(self.labels, self.scores, self.scores[::-1])
        second = paired_bootstrap(self.labels, self.scores, self.scores[::-1])
        self.assertEqual(first, second)
        self.assertEqual(first["resamples"], 10_000)

    def test_calibration_matches_a_loop_over_quantile_bins(self):
        rng = np.random.default_rng(2)
        scores = np.round(rng.beta(1, 8, 500), 2)  # CTR-like, with ties across bin edges
        labels = (rng.random(500) < scores * 1.5).astype(float)
        found = calibration(labels, scores, bins=10)
        edges = np.percentile(scores, np.arange(0, 101, 10))
        total, per_bin = 0.0, []
        for k in range(10):
            upper = scores <= edges[k + 1] if k == 9 else scores < edges[k + 1]
            rows = (scores >= edges[k]) & upper
            if rows.any():
                per_bin.append(rows.sum())
                total += rows.sum() / 500 * abs(scores[rows].mean() - labels[rows].mean())
        self.assertAlmostEqual(found["ece"], total, places=12)
        self.assertEqual(found["per_bin"]["rows"], per_bin)
        self.assertEqual(sum(per_bin), 500)
        self.assertAlmostEqual(found["mean_pctr"], scores.mean(), places=12)
        self.assertAlmostEqual(found["observed_ctr"], labels.mean(), places=12)
        self.assertAlmostEqual(found["ratio"], scores.mean() / labels.mean(), places=12)
        self.assertEqual((found["bins"], found["binning"]), (10, "equal-frequency"))

    def test_calibration_by_hand(self):
        # Two bins of two rows: scores {0.1, 0.2} with labels {0, 1} and {0.6, 0.8} with {1, 1}.
        found = calibration([0, 1, 1, 1], [0.1, 0.2, 0.6, 0.8], bins=2)
        self.assertAlmostEqual(found["ece"], 0.5 * abs(0.15 - 0.5) + 0.5 * abs(0.7 - 1.0))
        self.assertIsNone(calibration([0, 0], [0.1, 0.2])["ratio"])
        self.assertEqual(calibration([0, 1], [0.3, 0.3], bins=4)["per_bin"]["rows"], [2])  # ties share a bin
        with self.assertRaisesRegex(ZooError, "one score per label"):
            calibration([0, 1], [0.5])
        with self.assertRaisesRegex(ZooError, "bins is 0"):
            calibration([0, 1], [0.5, 0.6], bins=0)
