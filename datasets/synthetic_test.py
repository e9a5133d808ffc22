import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.datasets.synthetic import BehaviourSimulator


def auc(labels, scores):
    """Rank AUC (ties averaged), the NumPy reference."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(sorted_scores):
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    positives = labels == 1
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return (ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class BehaviourSimulatorTest(TestCase):
    def test_rows_follow_the_contract(self):
        simulator = small_simulator()
        features, labels = simulator.sample(50)
        simulator.schema.validate(features, labels)
        self.assertEqual(labels.shape, (50, 1))
        self.assertEqual(features["hist_time"].dtype, np.int64)

    def test_seeded(self):
        a, _ = small_simulator(seed=3).sample(20, seed=4)
        b, _ = small_simulator(seed=3).sample(20, seed=4)
        c, _ = small_simulator(seed=3).sample(20, seed=5)
        np.testing.assert_array_equal(a["hist_item_id"], b["hist_item_id"])
        self.assertFalse(np.array_equal(a["hist_item_id"], c["hist_item_id"]))

    def test_histories_are_left_padded_chronological_and_before_the_candidate(self):
        features, _ = small_simulator().sample(200)
        time, items = features["hist_time"], features["hist_item_id"]
        padding = items == 0
        self.assertTrue(np.all(time[padding] == 0))
        # Left padding: once a row has a real behaviour, every later slot is real.
        self.assertTrue(np.all(np.diff(padding.astype(int), axis=1) <= 0))
        real_time = np.where(padding, -1, time)
        self.assertTrue(np.all(np.diff(real_time, axis=1)[~padding[:, 1:]] > 0))
        self.assertTrue(np.all(real_time.max(axis=1) < features["cand_time"][:, 0]))  # no future behaviour

    def test_history_carries_signal_a_profile_only_model_lacks(self):
        simulator = BehaviourSimulator(seed=0)
        train, train_labels = simulator.sample(20_000, seed=1)
        test, test_labels, truth = simulator.sample(20_000, seed=2, return_probability=True)
        # Best profile-only predictor: the empirical CTR of each (profile, candidate category) cell.
        def cell(f):
            return (
                f["user_age"] * 1000 + f["user_gender"] * 100 + f["user_city"]
            ) * 1000 + f["cand_category"][:, 0]

        cells, y = cell(train), train_labels[:, 0]
        rate = {c: y[cells == c].mean() for c in np.unique(cells)}
        profile_scores = np.array([rate.get(c, y.mean()) for c in cell(test)])
        profile_auc = auc(test_labels[:, 0], profile_scores)
        truth_auc = auc(test_labels[:, 0], truth[:, 0])
        self.assertGreater(truth_auc - profile_auc, 0.08, (truth_auc, profile_auc))

    def test_dataset_yields_contract_batches(self):
        simulator = small_simulator()
        features, labels = next(iter(simulator.dataset(10, batch_size=4)))
        self.assertEqual(tuple(features["hist_item_id"].shape), (4, 8))
        self.assertEqual(features["hist_time"].dtype.name, "int64")
        self.assertEqual(tuple(labels.shape), (4, 1))
