import keras
import numpy as np

from tests.references import layer_norm
from tests.testing import TestCase, to_numpy
from zoo import ZooError
from zoo.layers.dga import DualGatedAttention
from zoo.layers.srn import SRN, switch_layer
from zoo.layers.swiglu import SwiGLU

X = np.random.RandomState(0).normal(size=(2, 3, 4)).astype("float32")
ATTENTION_KERNEL = np.random.RandomState(1).normal(size=(4, 4)).astype("float32")
FFN_KERNEL = np.random.RandomState(2).normal(size=(4, 4)).astype("float32")
GAMMA_1, BETA_1 = np.linspace(0.5, 1.5, 4).astype("float32"), np.linspace(-0.1, 0.1, 4).astype("float32")
GAMMA_2, BETA_2 = np.linspace(1.5, 0.5, 4).astype("float32"), np.linspace(0.2, -0.2, 4).astype("float32")


def srn_reference(x, alpha, post_norm):
    """ReST §2.1 with SubLayer_1 = x A, SubLayer_2 = x F (fixed linear maps) and one α for both paths."""
    paths = ((ATTENTION_KERNEL, GAMMA_1, BETA_1), (FFN_KERNEL, GAMMA_2, BETA_2))
    for kernel, gamma, beta in paths:
        if post_norm:  # x_{l+1} = LN(x_l + α_l SubLayer(x_l))
            x = layer_norm(x + alpha * (x @ kernel), gamma, beta)
        else:  # x_{l+1} = x_l + α_l SubLayer(LN(x_l))
            x = x + alpha * (layer_norm(x, gamma, beta) @ kernel)
    return x


def make_srn(post_norm):
    linear = lambda kernel: keras.layers.Dense(  # noqa: E731
        4, use_bias=False, kernel_initializer=keras.initializers.Constant(kernel)
    )
    layer = SRN(linear(ATTENTION_KERNEL), linear(FFN_KERNEL), post_norm=post_norm)
    layer.build(X.shape)
    layer.attention_norm.set_weights([GAMMA_1, BETA_1])
    layer.ffn_norm.set_weights([GAMMA_2, BETA_2])
    return layer


class SRNTest(TestCase):
    def test_layer_basics(self):
        for post_norm in (True, False):
            self.run_layer_test(
                SRN,
                {"attention": SwiGLU(8), "ffn": SwiGLU(6), "post_norm": post_norm},
                X,
                (2, 3, 4),
                expected_num_trainable_weights=1 + 4 + 3 + 3,  # α, two LayerNorms, two SwiGLUs
            )

    def test_post_norm_form_below_switch(self):
        layer = make_srn(post_norm=True)
        layer.alpha.assign(0.3)
        self.assertAllClose(layer(X), srn_reference(X, 0.3, post_norm=True), atol=1e-5)

    def test_pre_norm_form_above_switch(self):
        layer = make_srn(post_norm=False)
        layer.alpha.assign(0.3)
        self.assertAllClose(layer(X), srn_reference(X, 0.3, post_norm=False), atol=1e-5)

    def test_one_alpha_per_layer_starting_at_one_hundredth(self):
        layer = make_srn(post_norm=False)
        alphas = [w for w in layer.weights if w.path.endswith("alpha")]
        self.assertLen(alphas, 1)  # shared by the attention and FFN paths
        self.assertAllClose(layer.alpha, 0.01)
        self.assertAllClose(layer(X), srn_reference(X, 0.01, post_norm=False), atol=1e-5)

    def test_passes_keyword_arguments_to_the_attention(self):
        valid = np.array([[False, True, True], [True, True, True]])
        attention, ffn = DualGatedAttention(num_heads=2), SwiGLU(8)
        layer = SRN(attention, ffn, post_norm=False)
        out = layer(X, valid=valid)
        x = X + 0.01 * to_numpy(attention(layer.attention_norm(X), valid))
        self.assertAllClose(out, x + 0.01 * to_numpy(ffn(layer.ffn_norm(x))), atol=1e-6)

    def test_switch_layer_is_a_quarter_of_the_depth_rounded_half_up(self):
        depths = (1, 2, 4, 6, 8, 10, 14, 16, 32)
        self.assertEqual([switch_layer(d) for d in depths], [1, 1, 1, 2, 2, 3, 4, 4, 8])
        with self.assertRaisesRegex(ZooError, "SRN: the encoder depth is 0; it must be an integer >= 1"):
            switch_layer(0)
