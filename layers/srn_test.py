import keras
import numpy as np

from tests.references import layer_norm
from tests.testing import TestCase, to_numpy
from zoo.layers.swiglu import SwiGLU
from zoo.layers.srn import SRN


X = np.random.RandomState(0).normal(size=(2, 3, 4)).astype("float32")
KERNEL = np.random.RandomState(1).normal(size=(4, 4)).astype("float32")


def sublayer(x):  # SubLayer = a fixed linear map, x W
    return x @ KERNEL


def make_srn(post_norm):
    dense = keras.layers.Dense(4, use_bias=False, kernel_initializer=keras.initializers.Constant(KERNEL))
    layer = SRN(dense, post_norm=post_norm)
    layer.build(X.shape)
    gamma = np.linspace(0.5, 1.5, 4).astype("float32")
    beta = np.linspace(-0.1, 0.1, 4).astype("float32")
    layer.norm.set_weights([gamma, beta])
    return layer, gamma, beta


class SRNTest(TestCase):
    def test_layer_basics(self):
        for post_norm in (True, False):
            self.run_layer_test(SRN, {"sublayer": SwiGLU(8), "post_norm": post_norm}, X, (2, 3, 4))

    def test_post_norm_form_below_switch(self):
        layer, gamma, beta = make_srn(post_norm=True)
        layer.alpha.assign(0.3)
        expected = layer_norm(X + 0.3 * sublayer(X), gamma, beta)  # LN(x + α SubLayer(x))
        self.assertAllClose(layer(X), expected, atol=1e-5)

    def test_pre_norm_form_above_switch(self):
        layer, gamma, beta = make_srn(post_norm=False)
        layer.alpha.assign(0.3)
        expected = X + 0.3 * sublayer(layer_norm(X, gamma, beta))  # x + α SubLayer(LN(x))
        self.assertAllClose(layer(X), expected, atol=1e-5)

    def test_alpha_starts_at_one_hundredth(self):
        layer, gamma, beta = make_srn(post_norm=False)
        self.assertAllClose(layer.alpha, 0.01)
        self.assertAllClose(layer(X), X + 0.01 * sublayer(layer_norm(X, gamma, beta)), atol=1e-5)

    def test_passes_extra_arguments_to_the_sublayer(self):
        from zoo.layers.dga import DualGatedAttention

        valid = np.array([[False, True, True], [True, True, True]])
        attention = DualGatedAttention(num_heads=2)
        layer = SRN(attention, post_norm=False)
        out = layer(X, valid=valid)
        self.assertAllClose(out, X + 0.01 * to_numpy(attention(layer.norm(X), valid)), atol=1e-6)
