import numpy as np

import zoo
import zoo.models.autoint  # noqa: F401  (registers "autoint")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"num_layers": 1, "num_heads": 2, "head_dim": 4}


class AutoIntTest(TestCase):
    def test_output_is_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8)
        model = zoo.get("autoint", schema=simulator.schema, mlp_units=(8,), **SMALL)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_layer("interacting_0").num_heads, 2)

    def test_default_output_is_logistic(self):
        """mlp_units=() is eq 9: one Dense(1) over the concatenated interacting outputs."""
        model = zoo.get("autoint", schema=small_simulator().schema, **SMALL)
        head = model.get_layer("mlp")
        self.assertEqual(head.units, ())
        self.assertEqual([w.shape for w in head.weights], [(11 * 2 * 4, 1), (1,)])  # F = 11 fields

    def test_no_leakage(self):
        self.run_leakage_test("autoint", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"num_layers": 0}, "num_layers is 0"),
            ({"num_heads": -1}, "num_heads is -1"),
            ({"head_dim": 2.5}, "head_dim is 2.5"),
            ({"mlp_units": 8}, "mlp_units is 8; it must be a list of integers >= 1"),
            ({"dice_momentum": 2}, "dice_momentum is 2"),
        ):
            with self.subTest(**kwargs), self.assertRaisesRegex(ZooError, f"autoint hyperparameters: {message}"):
                zoo.get("autoint", schema=schema, **kwargs)
