import keras
from keras import ops

from zoo.errors import ZooError


@keras.saving.register_keras_serializable(package="zoo")
class PerTokenSwiGLU(keras.layers.Layer):
    """The per-token SwiGLU feed-forward network of TokenMixer-Large (Jiang et al., 2026, §3.3.2) and
    UniMixer (Ha et al., 2026): every token position t has its own weights, no biases,

        pSwiGLU(x_t) = W^down_t (Swish(W^gate_t x_t) ⊙ W^up_t x_t),
        W^gate_t, W^up_t in R^{D x kD},  W^down_t in R^{kD x D}

    (RankMixer's per-token FFN with a SwiGLU; the zoo's SwiGLU layer is the same map with one set of
    weights for every token). Swish is SiLU; each token's weights start glorot-uniform, as one
    shared matrix would (Keras' glorot on a [T, D, kD] tensor would count T into the fans).

    Args:
        expansion: k, the hidden width as a multiple of the token width D.
    Call:
        x [B, T, D] -> [B, T, D] (T fixed when the layer is built).
    """

    def __init__(self, expansion=4, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(expansion, int) or isinstance(expansion, bool) or expansion < 1:
            raise ZooError(f"PerTokenSwiGLU expansion is {expansion!r}; it must be an integer >= 1")
        self.expansion = expansion

    def build(self, x_shape):
        t, d = x_shape[-2], x_shape[-1]
        if t is None:
            raise ZooError("PerTokenSwiGLU needs a fixed number of tokens T (one set of weights per token)")
        hidden = self.expansion * d
        per_token = keras.initializers.VarianceScaling(scale=t, mode="fan_avg", distribution="uniform")
        self.gate_kernel = self.add_weight(shape=(t, d, hidden), initializer=per_token, name="gate_kernel")
        self.up_kernel = self.add_weight(shape=(t, d, hidden), initializer=per_token, name="up_kernel")
        self.down_kernel = self.add_weight(shape=(t, hidden, d), initializer=per_token, name="down_kernel")
        self.built = True

    def call(self, x):
        gate = ops.silu(ops.einsum("btd,tdf->btf", x, self.gate_kernel))
        return ops.einsum("btf,tfd->btd", gate * ops.einsum("btd,tdf->btf", x, self.up_kernel), self.down_kernel)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"expansion": self.expansion})
        return config
