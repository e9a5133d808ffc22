import numpy as np

from tests.testing import TestCase
from zoo.recipes.baselines import PRIOR_ROWS, baseline_scores, compare, summary_line


def log(rng, n, users=6, items=5, start=0):
    return {"user": rng.integers(0, users, n), "item": rng.integers(0, items, n),
            "time": start + rng.integers(0, 40, n), "labels": rng.integers(0, 2, n).astype(np.float64)}


class BaselinesTest(TestCase):
    def test_each_baseline_against_a_reference_written_row_by_row(self):
        rng = np.random.default_rng(0)
        train, rows = log(rng, 120), log(rng, 50, start=30)  # the scored rows overlap the training times
        scores = baseline_scores(train, rows)
        g = train["labels"].mean()
        np.testing.assert_allclose(scores["global rate"], g)
        for i in range(50):
            same = train["item"] == rows["item"][i]
            expected = (train["labels"][same].sum() + PRIOR_ROWS * g) / (same.sum() + PRIOR_ROWS)
            self.assertAlmostEqual(scores["item rate"][i], expected)
            users = np.concatenate([train["user"], rows["user"]])
            times = np.concatenate([train["time"], rows["time"]])
            labels = np.concatenate([train["labels"], rows["labels"]])
            earlier = (users == rows["user"][i]) & (times < rows["time"][i])  # strictly earlier: never itself
            expected = (labels[earlier].sum() + PRIOR_ROWS * g) / (earlier.sum() + PRIOR_ROWS)
            self.assertAlmostEqual(scores["user running rate"][i], expected)
        # the combination is the logistic regression's maximum: its score equations hold
        x = np.column_stack([np.log(p / (1 - p)) for p in (scores["item rate"], scores["user running rate"])])
        design = np.column_stack([np.ones(50), x])
        np.testing.assert_allclose(design.T @ (scores["item + user"] - rows["labels"]), 0, atol=1e-4)

    def test_a_row_never_sees_its_own_label(self):
        train = {"user": np.array([1, 1]), "item": np.array([7, 7]), "time": np.array([5, 6]),
                 "labels": np.array([0.0, 1.0])}
        rows = {"user": np.array([1, 1]), "item": np.array([7, 8]), "time": np.array([6, 9]),
                "labels": np.array([1.0, 1.0])}
        scores = baseline_scores(train, rows)
        g = 0.5
        # row 0 at time 6 sees only the training row at time 5 (label 0), not the one at its own time
        self.assertAlmostEqual(scores["user running rate"][0], (0 + PRIOR_ROWS * g) / (1 + PRIOR_ROWS))
        self.assertAlmostEqual(scores["user running rate"][1], (2 + PRIOR_ROWS * g) / (3 + PRIOR_ROWS))
        self.assertAlmostEqual(scores["item rate"][1], g)  # an item unseen in training: the prior

    def test_without_time_or_ids_those_baselines_are_left_out(self):
        rng = np.random.default_rng(1)
        train, rows = log(rng, 40), log(rng, 20)
        for key in ("time", "user"):
            del train[key], rows[key]
        self.assertEqual(sorted(baseline_scores(train, rows)), ["global rate", "item rate"])

    def test_compare_flags_a_model_that_does_not_beat_the_best(self):
        rng = np.random.default_rng(2)
        train, rows = log(rng, 400, users=20, items=8), log(rng, 300, users=20, items=8, start=30)
        baselines = baseline_scores(train, rows)
        good = compare(rows["labels"], rows["labels"] * 0.6 + rng.random(300) * 0.4, baselines, resamples=300)
        self.assertTrue(good["beats"])
        self.assertIn("din beats the best", summary_line("din", good))
        poor = compare(rows["labels"], rng.random(300), baselines, resamples=300)
        self.assertEqual(poor["beats"], poor["bootstrap"]["ci95"][0] > 0)
        self.assertIn(f"({poor['best']})", summary_line("din", poor))
        names = [r["name"] for r in poor["rows"]]
        self.assertEqual(names, ["global rate", "item rate", "user running rate", "item + user"])
        self.assertAlmostEqual(poor["rows"][0]["auc"], 0.5)
