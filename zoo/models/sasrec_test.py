import numpy as np
from keras import ops

import zoo
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.sasrec import SASRec, last_visible
from zoo.schema import Schema

SMALL = {"width": 8, "num_heads": 2, "num_layers": 1, "mlp_units": (8,)}


class SASRecTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("sasrec", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, SASRec)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["width"], 8)

    def test_each_candidate_reads_its_newest_visible_behaviour(self):
        states = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
        visible = np.array(
            [[[False, True, True, False], [False, False, False, False]],
             [[True, True, True, True], [True, False, False, False]]]
        )
        got = to_numpy(last_visible(ops.convert_to_tensor(states), ops.convert_to_tensor(visible)))
        expected = np.stack([np.stack([states[0, 2], np.zeros(3)]), np.stack([states[1, 3], states[1, 0]])])
        self.assertAllClose(got, expected)

    def test_no_leakage(self):
        self.run_leakage_test("sasrec", **dict(SMALL, num_layers=2))

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"width": 0}, "sasrec: width is 0"),
            ({"num_heads": -1}, "sasrec: num_heads is -1"),
            ({"num_layers": 1.5}, "sasrec: num_layers is 1.5"),
            ({"width": 10, "num_heads": 4}, "sasrec: width 10 is not divisible by num_heads 4"),
            ({"dropout": -0.2}, "sasrec: dropout is -0.2"),
            ({"mlp_units": "64"}, "sasrec: mlp_units is '64'"),
            ({"dice_momentum": 1.0}, "sasrec: dice_momentum is 1.0"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                SASRec(schema, **dict(SMALL, **bad))

    def test_needs_a_history(self):
        schema = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "sasrec needs at least one hist_ feature"):
            SASRec(schema, **SMALL)
