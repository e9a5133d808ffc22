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
        # The activation unit's first layer on [e, v, e - v, e * v] with kernel W = [W_e; W_v; W_d; W_p]
        # (each [D, units]) is e (W_e + W_d) + v (W_v - W_d) + (e * v) W_p: the history's term once per
        # row, the candidate's once per candidate, and only (e * v) W_p per pair, without building the
        # [B, M, L, 4D] concatenation (4x fewer multiply-adds and memory passes in that layer).
        first = self.hidden[0]
        w_e, w_v, w_d, w_p = ops.split(ops.cast(first.kernel, self.compute_dtype), 4, axis=0)
        h_history = ops.matmul(history, w_e + w_d)  # [B, L, u]
        h_candidate = ops.matmul(candidates, w_v - w_d) + ops.cast(first.bias, self.compute_dtype)  # [B, M, u]
        h_pair = ops.matmul(history[:, :, None, :] * candidates[:, None, :, :], w_p)  # [B, L, M, u]
        h = first.activation(h_pair + h_history[:, :, None, :] + h_candidate[:, None, :, :])
        for dense in self.hidden[1:]:
            h = dense(h)
        weights = ops.squeeze(self.score(h), axis=-1)  # [B, L, M]
        visible = history_valid if len(history_valid.shape) == 3 else history_valid[:, None, :]  # [B, M or 1, L]
        weights = weights * ops.cast(ops.transpose(visible, (0, 2, 1)), weights.dtype)
        return ops.einsum("blm,bld->bmd", weights, history)

    def compute_output_shape(self, candidates_shape, history_shape=None, history_valid_shape=None):
        return candidates_shape

    def get_config(self):
        config = super().get_config()
        config.update({"units": list(self.units)})
        return config
