import numpy as np

from tests.testing import TestCase
from zoo.layers.rest_ffn import RestFFN


class RestFFNTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(RestFFN, {"hidden_dim": 6}, np.random.rand(2, 3, 4).astype("float32"), (2, 3, 4))

    def test_matches_swiglu_reference(self):
        rng = np.random.RandomState(0)
        x = rng.normal(size=(2, 3, 4)).astype("float32")
        w_1, w_3, w_2 = (rng.normal(size=s).astype("float32") for s in ((4, 6), (4, 6), (6, 4)))
        layer = RestFFN(6)
        layer.build(x.shape)
        layer.set_weights([w_1, w_3, w_2])
        a = x @ w_1
        expected = (a / (1.0 + np.exp(-a)) * (x @ w_3)) @ w_2  # (SiLU(x W_1) ⊙ x W_3) W_2
        self.assertAllClose(layer(x), expected, atol=1e-5)
