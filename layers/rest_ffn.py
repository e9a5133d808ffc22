import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class RestFFN(keras.layers.Layer):
    """The SwiGLU feed-forward network of ReST's encoder T (§2.1, "LLaMA-style ... SwiGLU FFN"):

        FFN(x) = (SiLU(x W_1) ⊙ (x W_3)) W_2        (no biases)

    Args:
        hidden_dim: the inner width of W_1 and W_3.
    Call:
        x [..., d] -> [..., d].
    """

    def __init__(self, hidden_dim, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim

    def build(self, x_shape):
        d = x_shape[-1]
        self.w_1 = self.add_weight(shape=(d, self.hidden_dim), initializer="glorot_uniform", name="w_1")
        self.w_3 = self.add_weight(shape=(d, self.hidden_dim), initializer="glorot_uniform", name="w_3")
        self.w_2 = self.add_weight(shape=(self.hidden_dim, d), initializer="glorot_uniform", name="w_2")
        self.built = True

    def call(self, x):
        return ops.matmul(ops.silu(ops.matmul(x, self.w_1)) * ops.matmul(x, self.w_3), self.w_2)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim})
        return config
