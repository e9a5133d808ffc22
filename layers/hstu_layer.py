import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.relative_attention_bias import RelativeAttentionBias


@keras.saving.register_keras_serializable(package="zoo")
class HSTULayer(keras.layers.Layer):
    """One HSTU layer (Zhai et al., Actions Speak Louder than Words, ICML 2024, eq 1-3) over a history
    with M candidates appended.

        U(X), V(X), Q(X), K(X) = Split(φ1(f1(X)))                         (eq 1, φ1 = SiLU)
        A(X) V(X) = φ2(Q(X) K(X)^T + rab^{p,t}) V(X) / n                   (eq 2, φ2 = SiLU, no softmax)
        Y(X) = f2(Norm(A(X) V(X)) ⊙ U(X)) + X                              (eq 3)

    per head h (H heads; Q, K of `attention_dim` d_qk and U, V of `linear_dim` d_v per head). Where the
    paper is silent this follows the public code (meta-recsys/generative-recommenders, research/
    modeling/sequential/hstu.py):
    - X is layer-normalised before f1 (pre-norm); both norms are LayerNorm without scale or offset,
      epsilon 1e-6; f1 = Linear with bias (the production STU's bias), initialised N(0, 0.02);
      f2 = Linear with bias (Glorot uniform);
    - the pointwise weights are divided by n, the padded length of the sequence, a constant:
      n = L + 1 here (L history slots plus the candidates' shared slot), so a weight does not change
      with the number of visible keys or of candidates; the logits are not scaled by 1/sqrt(d_qk);
    - rab^{p,t} is one `RelativeAttentionBias` (SUAN eq 4, the same scheme: a position table of
      2N + 1 and a table of 129 log-time buckets) per layer, shared by the heads.

    Masks (causal, so nothing from a behaviour's future reaches it): history query i reads history
    key j when j <= i and j is not padding. The M candidates share position L (HSTU's public code gives
    appended targets one position): candidate m reads history key j where history_visible[m, j]
    (real and strictly before m's exposure time) and itself, never another candidate. Masked keys
    get weight 0 (no softmax, so no renormalisation). Time gaps are integer differences of the
    given times, cast to float32 once (exact for any int64 reference).

    Args:
        num_heads: H.
        attention_dim: d_qk per head.
        linear_dim: d_v per head.
        sequence_length: L, the history length.
        num_time_buckets: the last log-time bucket of rab^t (128: a table of 129 entries).
    Call:
        history [B, L, d], candidates [B, M, d], history_valid [B, L] bool, history_visible [B, M, L]
        bool, history_times [B, L] and candidate_times [B, M] integer seconds
        -> (history [B, L, d], candidates [B, M, d]).
    """

    def __init__(self, num_heads, attention_dim, linear_dim, sequence_length, num_time_buckets=128, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("attention_dim", attention_dim), ("linear_dim", linear_dim),
                            ("sequence_length", sequence_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ZooError(f"HSTULayer {name} is {value!r}; it must be an integer >= 1")
        self.num_heads = num_heads
        self.attention_dim = attention_dim
        self.linear_dim = linear_dim
        self.sequence_length = sequence_length
        self.num_time_buckets = int(num_time_buckets)
        policy = self.dtype_policy
        self.input_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, center=False, scale=False, dtype=policy, name="input_norm"
        )
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, center=False, scale=False, dtype=policy, name="attention_norm"
        )
        self.uvqk = keras.layers.Dense(
            (2 * linear_dim + 2 * attention_dim) * num_heads,
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=policy,
            name="uvqk",
        )
        self.relative_bias = RelativeAttentionBias(
            sequence_length + 1, self.num_time_buckets, dtype=policy, name="relative_bias"
        )

    def build(self, history_shape, candidates_shape=None, *args):
        d = int(history_shape[-1])
        self.input_norm.build(history_shape)
        self.uvqk.build(history_shape)
        self.attention_norm.build(tuple(history_shape[:-1]) + (self.num_heads * self.linear_dim,))
        self.output_dense = keras.layers.Dense(d, dtype=self.dtype_policy, name="output")
        self.output_dense.build(tuple(history_shape[:-1]) + (self.num_heads * self.linear_dim,))
        self.relative_bias.build()
        self.built = True

    def _project(self, x):
        """Eq 1: x [B, N, d] -> U, V [B, N, H, d_v] and Q, K [B, N, H, d_qk]."""
        h, dv, dqk = self.num_heads, self.linear_dim, self.attention_dim
        y = ops.silu(self.uvqk(self.input_norm(x)))
        u, v, q, k = ops.split(y, [h * dv, 2 * h * dv, 2 * h * dv + h * dqk], axis=-1)
        n = ops.shape(x)[1]
        return (
            ops.reshape(u, (-1, n, h * dv)),
            ops.reshape(v, (-1, n, h, dv)),
            ops.reshape(q, (-1, n, h, dqk)),
            ops.reshape(k, (-1, n, h, dqk)),
        )

    def _pointwise(self, logits, allowed):
        """Eq 2's φ2(logits) / n on the allowed pairs, 0 elsewhere."""
        weights = ops.silu(logits) / float(self.sequence_length + 1)
        return weights * ops.cast(allowed, weights.dtype)

    def _output(self, attended, u, x):
        """Eq 3: f2(Norm(A V) ⊙ U) + X, with attended [B, N, H, d_v]."""
        n = ops.shape(attended)[1]
        attended = ops.reshape(attended, (-1, n, self.num_heads * self.linear_dim))
        return self.output_dense(self.attention_norm(attended) * u) + x

    def call(self, history, candidates, history_valid, history_visible, history_times, candidate_times):
        length = self.sequence_length
        u_h, v_h, q_h, k_h = self._project(history)
        u_c, v_c, q_c, k_c = self._project(candidates)
        t_h = ops.convert_to_tensor(history_times)
        t_c = ops.cast(candidate_times, t_h.dtype)
        positions = ops.arange(length, dtype="int32")
        at_length = ops.convert_to_tensor(length, dtype="int32")  # the candidates' shared position
        no_gap = ops.zeros((), dtype=t_h.dtype)

        # History: causal over the real behaviours.
        causal = positions[:, None] >= positions[None, :]  # [L, L]
        allowed_hh = ops.logical_and(causal[None], ops.cast(history_valid, "bool")[:, None, :])  # [B, L, L]
        gap_hh = t_h[:, :, None] - t_h[:, None, :]  # [B, L, L]
        rab_hh = self.relative_bias(positions[:, None], positions[None, :], gap_hh, no_gap)
        logits_hh = ops.einsum("bqhd,bkhd->bhqk", q_h, k_h) + rab_hh[:, None]
        attended_h = ops.einsum("bhqk,bkhd->bqhd", self._pointwise(logits_hh, allowed_hh[:, None]), v_h)

        # Candidates: the visible history and themselves, at the shared position L.
        gap_ch = t_c[:, :, None] - t_h[:, None, :]  # [B, M, L]
        rab_ch = self.relative_bias(at_length, positions[None, None, :], gap_ch, no_gap)  # [B, M, L]
        logits_ch = ops.einsum("bmhd,blhd->bhml", q_c, k_h) + rab_ch[:, None]
        weights_ch = self._pointwise(logits_ch, ops.cast(history_visible, "bool")[:, None])
        rab_cc = self.relative_bias(at_length, at_length, ops.zeros_like(t_c), no_gap)  # [B, M]
        weights_cc = self._pointwise(ops.sum(q_c * k_c, axis=-1) + rab_cc[:, :, None], True)  # [B, M, H]
        attended_c = ops.einsum("bhml,blhd->bmhd", weights_ch, v_h) + weights_cc[..., None] * v_c

        return self._output(attended_h, u_h, history), self._output(attended_c, u_c, candidates)

    def compute_output_spec(self, history, candidates, *args):
        return (
            keras.KerasTensor(history.shape, dtype=self.compute_dtype),
            keras.KerasTensor(candidates.shape, dtype=self.compute_dtype),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "attention_dim": self.attention_dim,
                "linear_dim": self.linear_dim,
                "sequence_length": self.sequence_length,
                "num_time_buckets": self.num_time_buckets,
            }
        )
        return config
