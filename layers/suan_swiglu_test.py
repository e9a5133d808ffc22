import numpy as np

from tests.testing import TestCase
from zoo.layers.suan_swiglu import SuanSwiGLU


class SuanSwiGLUTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(SuanSwiGLU, {}, np.random.rand(2, 3, 4).astype("float32"), (2, 3, 4))

    def test_matches_eq_16(self):
        rng = np.random.RandomState(0)
        x = rng.normal(size=(2, 3, 4)).astype("float32")
        w1, w2, w3 = (rng.normal(size=s).astype("float32") for s in [(4, 12), (4, 12), (12, 4)])
        layer = SuanSwiGLU()
        layer.build(x.shape)
        layer.set_weights([w1, w2, w3])
        a = x @ w1
        expected = (a / (1.0 + np.exp(-a)) * (x @ w2)) @ w3  # (swish(x W1) * x W2) W3
        self.assertAllClose(layer(x), expected, atol=1e-4)
