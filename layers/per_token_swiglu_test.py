import numpy as np

from tests.references import sigmoid
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.per_token_swiglu import PerTokenSwiGLU


def per_token_swiglu_reference(x, gate, up, down):
    """pSwiGLU(x_t) = W^down_t (Swish(W^gate_t x_t) * W^up_t x_t), one weight set per token t."""
    out = np.zeros(x.shape)
    for t in range(x.shape[1]):
        g = x[:, t] @ gate[t]
        out[:, t] = (g * sigmoid(g) * (x[:, t] @ up[t])) @ down[t]
    return out


class PerTokenSwiGLUTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
        self.run_layer_test(PerTokenSwiGLU, {"expansion": 2}, x, (2, 3, 4), expected_num_trainable_weights=3)

    def test_matches_equation(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, 3, 4)).astype("float32")
        layer = PerTokenSwiGLU(expansion=2)
        runner = LayerRunner(layer, x)
        weights = [rng.normal(size=s).astype("float32") for s in ((3, 4, 8), (3, 4, 8), (3, 8, 4))]
        layer.set_weights(weights)
        self.assertAllClose(runner(x), per_token_swiglu_reference(x.astype("float64"), *weights), atol=1e-4, rtol=1e-4)
        # each token's initial weights have the variance of one glorot-uniform D x kD matrix
        fresh = PerTokenSwiGLU(expansion=8)
        fresh(np.zeros((1, 16, 32), "float32"))
        self.assertAlmostEqual(float(np.var(to_numpy(fresh.gate_kernel))), 2 / (32 + 256), delta=2e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "expansion is 0"):
            PerTokenSwiGLU(expansion=0)
