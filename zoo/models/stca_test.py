import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.stca import STCA
from zoo.schema import Schema

SMALL = {"width": 8, "num_heads": 2, "num_layers": 2, "ffn_dim": 8, "mlp_units": (8,)}


class STCATest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("stca", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, STCA)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["num_layers"], 2)

    def test_no_leakage(self):
        self.run_leakage_test("stca", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"width": -8}, "stca: width is -8"),
            ({"num_heads": 0}, "stca: num_heads is 0"),
            ({"num_layers": 0}, "stca: num_layers is 0"),
            ({"ffn_dim": "64"}, "stca: ffn_dim is '64'"),
            ({"width": 9, "num_heads": 2}, "stca: width 9 is not divisible by num_heads 2"),
            ({"mlp_units": (0,)}, "stca: mlp_units is 0"),
            ({"dice_momentum": 2}, "stca: dice_momentum is 2"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                STCA(schema, **dict(SMALL, **bad))

    def test_needs_a_history(self):
        schema = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "stca needs at least one hist_ feature"):
            STCA(schema, **SMALL)
