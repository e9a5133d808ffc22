import dataclasses

import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.bst import BST

# The simulator's tokens are 3 fields x 8 = 24 wide; with position_dim 8 the width is 32.
SMALL = {"num_heads": 2, "num_layers": 1, "position_dim": 8, "ffn_dim": 8, "mlp_units": (8,)}


class BSTTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("bst", schema=self.simulator.schema, **dict(SMALL, ffn_dim=None, time_buckets=12))
        self.assertIsInstance(model, BST)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertIsNone(model.get_config()["ffn_dim"])
        self.assertEqual(model.get_layer("block_1").ffn_dim, 4 * 32)  # None: 4w

    def test_scores_depend_on_the_time_gaps(self):
        features, _ = self.simulator.sample(8)
        model = BST(self.simulator.schema, **SMALL)
        later = dict(features, hist_time=features["hist_time"] - 3600 * (features["hist_time"] > 0),
                     cand_time=features["cand_time"] + 86400)  # the same order, other gaps
        self.assertFalse(np.allclose(model.predict(later, verbose=0), model.predict(features, verbose=0)))

    def test_no_leakage(self):
        self.run_leakage_test("bst", **dict(SMALL, num_layers=2))

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"num_heads": 0}, "bst: num_heads is 0"),
            ({"num_layers": -1}, "bst: num_layers is -1"),
            ({"position_dim": 0}, "bst: position_dim is 0"),
            ({"time_buckets": 1}, "bst: time_buckets is 1; it must lie in 2..32"),
            ({"time_buckets": 40}, "bst: time_buckets is 40"),
            ({"ffn_dim": 0}, "bst: ffn_dim is 0"),
            ({"num_heads": 3, "position_dim": 4},
             r"bst: the token width \(sequence fields 24 \+ position_dim 4\) 28 is not divisible by num_heads 3"),
            ({"dropout": 1.5}, "bst: dropout is 1.5"),
            ({"mlp_units": (8, -1)}, "bst: mlp_units is -1"),
            ({"dice_momentum": None}, "bst: dice_momentum is None"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                BST(schema, **dict(SMALL, **bad))

    def test_needs_times(self):
        schema = dataclasses.replace(self.simulator.schema, time=False)
        with self.assertRaisesRegex(ZooError, "bst needs behaviour times"):
            BST(schema, **SMALL)
