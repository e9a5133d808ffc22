import numpy as np

from tests.references import PRE_NORM_WEIGHTS, deres_layer_branch
from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.layers.deres_transformer_layer import DeResTransformerLayer


def layer_with_random_weights(x, valid, seed=0, **kwargs):
    layer = DeResTransformerLayer(**kwargs)
    layer(x, valid=valid)
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        scale, centre = (0.1, 1.0) if "gamma" in w.path else (0.4, 0.0)
        w.assign((centre + scale * rng.normal(size=w.shape)).astype("float32"))
    return layer


class DeResTransformerLayerTest(TestCase):
    def test_layer_basics(self):
        x = np.random.rand(2, 5, 6).astype("float32")
        valid = np.array([[True] * 5, [False, True, True, True, True]])
        self.run_layer_test(
            DeResTransformerLayer, {"num_heads": 2, "key_dim": 4, "ffn_units": 12}, (x,), (2, 5, 6),
            call_kwargs={"valid": valid},
        )

    def test_matches_numpy_pre_norm_layer(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 5, 6)).astype("float32")
        valid = np.array([[True, True, True, True, True], [False, False, True, True, True]])
        layer = layer_with_random_weights(x, valid, num_heads=2, key_dim=3, ffn_units=8)
        self.assertEqual(len(layer.weights), len(PRE_NORM_WEIGHTS))
        self.assertAllClose(layer(x, valid=valid), deres_layer_branch(layer, x, valid), atol=1e-4)

    def test_padding_tokens_do_not_reach_valid_ones(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(1, 4, 6)).astype("float32")
        valid = np.array([[False, True, True, True]])
        layer = DeResTransformerLayer(num_heads=2, key_dim=3, ffn_units=8)
        changed = x.copy()
        changed[0, 0] += 5.0
        self.assertAllClose(layer(x, valid=valid)[:, 1:], layer(changed, valid=valid)[:, 1:], atol=1e-5)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "ffn_units is 0"):
            DeResTransformerLayer(num_heads=2, key_dim=3, ffn_units=0)
