import numpy as np

import zoo
import zoo.models.unimixer  # noqa: F401  (registers "unimixer")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"num_layers": 1, "width": 8, "block_size": 4, "expansion": 1, "attention_units": (8,), "mlp_units": (8,)}


class UniMixerTest(TestCase):
    def test_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = zoo.get("unimixer", schema=simulator.schema, **SMALL)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        # T = 5 groups (candidate, history, user, context, numerics), T x D / B = 10 blocks of 4
        mixing = model.get_layer("block_1").mixing
        self.assertEqual((tuple(mixing.local_logits.shape), tuple(mixing.global_logits.shape)), ((10, 4, 4), (10, 10)))

    def test_no_leakage(self):
        self.run_leakage_test("unimixer", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"block_size": 3}, r"block_size 3 does not divide T x width = 5 x 8"),
            ({"temperature": 0.0}, "temperature is 0.0"),
            ({"sinkhorn_iterations": 0}, "sinkhorn_iterations is 0"),
            ({"width": -4}, "width is -4"),
            ({"mlp_units": (0,)}, r"unimixer hyperparameters: mlp_units is 0 \(in \(0,\)\)"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                zoo.get("unimixer", schema=schema, **{**SMALL, **kwargs})
