import numpy as np

import zoo
import zoo.models.mhc  # noqa: F401  (registers "mhc")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"num_layers": 1, "width": 8, "num_heads": 2, "expansion_rate": 2, "sinkhorn_iterations": 3}


class MHCTest(TestCase):
    def test_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = zoo.get("mhc", schema=simulator.schema, **SMALL)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        connector = model.get_layer("connector")
        self.assertLen(connector.sublayers, 1)
        # one hyper-connection per sublayer: n^3 d + 2 n^2 d + n^2 + 2n + 3 weights each
        plain = zoo.get("ctr_transformer", schema=simulator.schema, num_layers=1, width=8, num_heads=2)
        self.assertEqual(model.count_params() - plain.count_params(), 2 * (8 * 8 + 2 * 4 * 8 + 4 + 4 + 3))

    def test_no_leakage(self):
        self.run_leakage_test("mhc", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"width": 10, "num_heads": 4}, "width 10 is not divisible by num_heads 4"),
            ({"expansion_rate": 1}, "expansion_rate is 1"),
            ({"num_layers": 0}, "num_layers is 0"),
            ({"sinkhorn_iterations": 0}, "sinkhorn_iterations is 0"),
            ({"width": -8}, "width is -8"),
            ({"dropout": 1.5}, "dropout is 1.5"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                zoo.get("mhc", schema=schema, **{**SMALL, **kwargs})
