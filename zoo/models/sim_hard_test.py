import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.sim_hard import SIMHard
from zoo.schema import Schema

SMALL = {"k": 4, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)}


class SIMHardTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("sim_hard", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, SIMHard)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))

    def test_only_the_candidates_category_counts(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("sim_hard", schema=self.simulator.schema, **SMALL)
        before = model.predict(features, verbose=0)
        other = {key: value.copy() for key, value in features.items()}
        elsewhere = other["hist_category"] != other["cand_category"]  # behaviours of other categories
        other["hist_item_id"][elsewhere & (other["hist_item_id"] > 0)] = 1
        self.assertAllClose(model.predict(other, verbose=0), before, atol=1e-6)

    def test_no_leakage(self):
        self.run_leakage_test("sim_hard", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema  # L = 8
        for bad, message in (
            ({"k": 20}, "sim_hard: k is 20 but the history holds only L = 8"),
            ({"k": -1}, "sim_hard: k is -1"),
            ({"num_heads": 0}, "sim_hard: num_heads is 0"),
            ({"attention_dim": 0}, "sim_hard: attention_dim is 0"),
            ({"time_embedding_dim": 1.5}, "sim_hard: time_embedding_dim is 1.5"),
            ({"dice_momentum": 2}, "sim_hard: dice_momentum is 2"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                SIMHard(schema, **dict(SMALL, **bad))

    def test_needs_a_category(self):
        schema = Schema(
            features=(Feature("item_id", "hist", 9), Feature("item_id", "cand", 9)), sequence_length=4, time=True
        )
        with self.assertRaisesRegex(ZooError, "sim_hard searches the candidate's category but the schema has no "
                                              "hist_category or cand_category"):
            SIMHard(schema, **SMALL)
