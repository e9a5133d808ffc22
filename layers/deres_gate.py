import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class DeResGate(keras.layers.Layer):
    """The vector gate of DeRes' gated fusion (eq 6): gamma_l = sigmoid(W_g [r_l; d_l] + b_g).

    W_g is (d/2) x d and b_g is d/2: one gate value per hidden channel of a path, so each channel
    chooses its own mix of the identity path r_l and the attention-residual path d_l. The fusion
    x_l = gamma_l * r_l + (1 - gamma_l) * d_l (eq 7) is applied by the connector (layers/deres.py).

    Call:
        r [B, n, w], d [B, n, w] -> gamma [B, n, w] in (0, 1).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.projection = None

    def build(self, r_shape, d_shape=None):
        width = r_shape[-1]
        self.projection = keras.layers.Dense(width, activation="sigmoid", name="projection", dtype=self.dtype_policy)
        self.projection.build(tuple(r_shape[:-1]) + (2 * width,))
        self.built = True

    def call(self, r, d):
        return self.projection(ops.concatenate([r, d], axis=-1))

    def compute_output_shape(self, r_shape, d_shape=None):
        return r_shape
