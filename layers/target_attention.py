import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class TargetAttention(keras.layers.Layer):
    """DIN's local activation unit (Zhou et al., KDD 2018, eq 3): candidate-aware sum pooling.

        w_j = MLP([e_j, v_A, e_j - v_A, e_j * v_A])     (a scalar, not normalised by softmax)
        v_U(A) = sum_j w_j * e_j  over the non-padding behaviours j

    For M candidates at once each candidate A pools the history independently.

    Args:
        units: hidden widths of the activation MLP (sigmoid activations, as in DIN's code).
    Call:
        candidates [B, M, D], history [B, L, D], history_valid [B, L] or [B, M, L] bool (per
        candidate: FeatureEmbedding's "hist_visible") -> [B, M, D].
    """

    def __init__(self, units=(80, 40), **kwargs):
        super().__init__(**kwargs)
        self.units = tuple(units)
        self.hidden = [
            keras.layers.Dense(width, activation="sigmoid", name=f"dense_{i}", dtype=self.dtype_policy)
            for i, width in enumerate(self.units)
        ]
        self.score = keras.layers.Dense(1, name="score", dtype=self.dtype_policy)

    def build(self, candidates_shape, history_shape=None, history_valid_shape=None):
        shape = (None, None, None, 4 * candidates_shape[-1])
        for dense in self.hidden:
            dense.build(shape)
            shape = shape[:-1] + (dense.units,)
        self.score.build(shape)
        self.built = True

    def call(self, candidates, history, history_valid):
        m = ops.shape(candidates)[1]
        length = ops.shape(history)[1]
        v_a = ops.repeat(candidates[:, :, None, :], length, axis=2)  # [B, M, L, D]
        e = ops.repeat(history[:, None, :, :], m, axis=1)  # [B, M, L, D]
        h = ops.concatenate([e, v_a, e - v_a, e * v_a], axis=-1)
        for dense in self.hidden:
            h = dense(h)
        weights = ops.squeeze(self.score(h), axis=-1)  # [B, M, L]
        visible = history_valid if len(history_valid.shape) == 3 else history_valid[:, None, :]
        weights = weights * ops.cast(visible, weights.dtype)
        return ops.einsum("bml,bld->bmd", weights, history)

    def compute_output_shape(self, candidates_shape, history_shape=None, history_valid_shape=None):
        return candidates_shape

    def get_config(self):
        config = super().get_config()
        config.update({"units": list(self.units)})
        return config
