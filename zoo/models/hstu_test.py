import dataclasses

import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.hstu import HSTU

SMALL = {"num_layers": 2, "num_heads": 2, "attention_dim": 4, "linear_dim": 4, "mlp_units": (8,)}


class HSTUTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("hstu", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, HSTU)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["linear_dim"], 4)

    def test_no_leakage(self):
        self.run_leakage_test("hstu", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"num_layers": 0}, "hstu: num_layers is 0"),
            ({"num_heads": -1}, "hstu: num_heads is -1"),
            ({"attention_dim": 2.5}, "hstu: attention_dim is 2.5"),
            ({"linear_dim": 0}, "hstu: linear_dim is 0"),
            ({"mlp_units": (8, 0)}, "hstu: mlp_units is 0"),
            ({"dice_momentum": 1.0}, "hstu: dice_momentum is 1.0"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                HSTU(schema, **dict(SMALL, **bad))

    def test_needs_times(self):
        schema = dataclasses.replace(self.simulator.schema, time=False)
        with self.assertRaisesRegex(ZooError, "hstu needs behaviour times"):
            HSTU(schema, **SMALL)
