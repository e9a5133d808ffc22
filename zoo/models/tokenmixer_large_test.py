import keras
import numpy as np

import zoo
import zoo.models.tokenmixer_large  # noqa: F401  (registers "tokenmixer_large")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"num_layers": 2, "width": 8, "num_heads": 2, "expansion": 1, "attention_units": (8,), "mlp_units": (8,)}


class TokenMixerLargeTest(TestCase):
    def test_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = zoo.get("tokenmixer_large", schema=simulator.schema, **{**SMALL, "num_layers": 3})
        # T = 1 global + 5 groups (candidate, history, user, context, numerics); L = 3, k = 2: only layer 2
        # takes an inter-layer residual (X_2 + X_0), the last layer none.
        blocks = [model.get_layer(f"block_{l}") for l in (1, 2, 3)]
        self.assertEqual(tuple(blocks[0].input.shape[1:]), (6, 8))
        probe = keras.Model(
            model.input, [model.output, blocks[0].input, blocks[1].input, blocks[1].output, blocks[2].input]
        )
        pctr, x0, x1, block_2, x2 = probe.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertAllClose(x2, block_2 + x0, atol=1e-5)  # X_2 = Block_2(X_1) + X_0
        self.assertFalse(np.allclose(x1, x0))

    def test_no_leakage(self):
        self.run_leakage_test("tokenmixer_large", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"width": 10, "num_heads": 4}, "width 10 is not divisible by num_heads 4"),
            ({"inter_residual_interval": 0}, "inter_residual_interval is 0"),
            ({"num_layers": 0}, "num_layers is 0"),
            ({"expansion": -2}, "expansion is -2"),
            ({"attention_units": (0,)}, r"tokenmixer_large hyperparameters: attention_units is 0 \(in \(0,\)\)"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                zoo.get("tokenmixer_large", schema=schema, **{**SMALL, **kwargs})
