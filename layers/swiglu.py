import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SwiGLU(keras.layers.Layer):
    """The SwiGLU feed-forward network of SUAN's UAB and ReST's encoder, no biases:

        SUAN §3.2.3, eq 16:  E_FFN = (swish(E W1) ⊙ E W2) W3,   W1, W2: d x 3d, W3: 3d x d
        ReST §2.1:           FFN(x) = (SiLU(x W_1) ⊙ x W_3) W_2  ("LLaMA-style ... SwiGLU FFN")

    One computation under two namings: `gate_kernel` is SUAN's W1 / ReST's W_1, `up_kernel` SUAN's W2 /
    ReST's W_3, `down_kernel` SUAN's W3 / ReST's W_2.

    Args:
        hidden_dim: the inner width; None gives `expansion` * d (SUAN's 3d).
        expansion: the inner width as a multiple of the input width d when hidden_dim is None.
    Call:
        x [..., d] -> [..., d].
    """

    def __init__(self, hidden_dim=None, expansion=3, **kwargs):
        super().__init__(**kwargs)
        from zoo.errors import ZooError

        for name, value in (("hidden_dim", hidden_dim), ("expansion", expansion)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ZooError(f"SwiGLU {name} is {value!r}; it must be an integer >= 1")
        self.hidden_dim = hidden_dim
        self.expansion = expansion

    def build(self, x_shape):
        d = int(x_shape[-1])
        hidden = self.hidden_dim or self.expansion * d
        add = lambda name, shape: self.add_weight(name=name, shape=shape, initializer="glorot_uniform")  # noqa: E731
        self.gate_kernel = add("gate_kernel", (d, hidden))
        self.up_kernel = add("up_kernel", (d, hidden))
        self.down_kernel = add("down_kernel", (hidden, d))
        self.built = True

    def call(self, x):
        return ops.matmul(ops.silu(ops.matmul(x, self.gate_kernel)) * ops.matmul(x, self.up_kernel), self.down_kernel)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim, "expansion": self.expansion})
        return config
