import numpy as np

from tests.references import sigmoid
from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.layers.swiglu import SwiGLU


def swiglu_reference(x, w_gate, w_up, w_down):
    """(swish(x W1) ⊙ x W2) W3 (SUAN eq 16; ReST's W_1, W_3, W_2)."""
    a = x @ w_gate
    return (a * sigmoid(a) * (x @ w_up)) @ w_down


class SwiGLUTest(TestCase):
    def test_layer_basics(self):
        x = np.random.rand(2, 3, 4).astype("float32")
        self.run_layer_test(SwiGLU, {"hidden_dim": 6}, x, (2, 3, 4), expected_num_trainable_weights=3)
        self.run_layer_test(SwiGLU, {}, x, (2, 3, 4), expected_num_trainable_weights=3)

    def test_matches_the_swiglu_equation(self):
        rng = np.random.RandomState(0)
        x = rng.normal(size=(2, 3, 4)).astype("float32")
        for kwargs, hidden in (({}, 12), ({"hidden_dim": 6}, 6)):  # SUAN's 3d, ReST's ffn_dim
            weights = [rng.normal(size=s).astype("float32") for s in ((4, hidden), (4, hidden), (hidden, 4))]
            layer = SwiGLU(**kwargs)
            layer.build(x.shape)
            layer.set_weights(weights)
            self.assertAllClose(layer(x), swiglu_reference(x, *weights), atol=1e-4)

    def test_bad_widths_give_one_line(self):
        for kwargs in ({"hidden_dim": 0}, {"hidden_dim": 2.5}, {"expansion": -1}):
            with self.assertRaisesRegex(ZooError, "SwiGLU (hidden_dim|expansion) is"):
                SwiGLU(**kwargs)
