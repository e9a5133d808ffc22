import math

import keras
from keras import ops

from zoo.errors import ZooError

POOLS = ("causal", "global")


def _without_padding(e_sum, history_valid):
    """E_sum [B, L, d] with padded behaviours zeroed."""
    return e_sum * ops.cast(history_valid, e_sum.dtype)[..., None]


@keras.saving.register_keras_serializable(package="zoo")
class AFNet(keras.layers.Layer):
    """SUAN §3.2.2 adaptive fusion network: cross-attention to the user profile (eq 7-9), then
    dual-alignment attention (eq 10-15).

        Q2, K2, V2 = E_self W2^Q, E_p W2^K, E_p W2^V                                   (eq 7)
        E_cross = Concat_h(softmax(Q2 K2^T / sqrt(d_head)) V2) W2^O                     (eq 8-9)
        E_sum = E_self + E_cross                                                        (eq 10)
        e_mean = pool(E_sum)                                                            (eq 11)
        e_self, e_cross = relu(e_mean W1) W2, relu(e_mean W1) W3                        (eq 12)
        w_self, w_cross = softmax over the pair [e_self, e_cross], per channel          (eq 13-14)
        E_AFN = w_self * E_self + w_cross * E_cross                                     (eq 15)

    Projections carry no biases (as written in eq 7-12); W1 maps d -> d/4 (d = n1·d in the paper's
    symbols, the token width). The profile E_p is [B, n2, d_p] (one token per user feature); every
    sequence token attends to all of it. With one user feature (n2 = 1) every weight of eq 8 is exactly
    1, so no softmax runs and E_cross = V2 W2^O for every token.

    Scale of the cross-attention logits: 1/sqrt(d_head), d_head = d / h, the usual per-head scaled
    dot product and the scale of the self-attention (eq 5 in the authors' code). The alternatives:
    eq 8 as written divides by sqrt(n1·d), the full width (logits sqrt(h) times smaller than here);
    the authors' code divides by sqrt(n2), the number of profile tokens (a temperature tied to the
    feature count, not to the width). All three are one constant factor on the logits, which W2^Q can
    absorb in training; they differ in the attention's sharpness at initialisation.

    `alignment_pool` chooses eq 11's pooling:
      - "causal" (default): each token pools E_sum over the positions it may attend to: a history
        token over the non-padding history up to itself, candidate m over the behaviours visible to
        it (`history_visible[m]`: real and before its exposure time) and itself. The block stays
        causal, nothing from a candidate's future reaches it, and parallel candidate scoring stays
        exact.
      - "global": eq 11 as written: one mean of E_sum over every position of the target-aware
        sequence, padding slots, later behaviours and all candidates included (`history_visible` is
        not read). Earlier positions then depend on later tokens and each candidate shifts the others'
        scores, so the history cache and exact parallel scoring do not hold, and a behaviour at or
        after a candidate's exposure time reaches its score through the mean (none exists in rows
        whose history is the user's behaviours before the one candidate's time, as the readers
        build them). On rows without padding this is the authors' code (one candidate appended, a
        mean over the sequence). On padded rows it is not: their additive mask
        (logits + mask * -1e9) shifts every logit of a padding query by the same amount, so a padding
        row still gets an ordinary softmax over its keys and a non-zero self-attention output, which
        then enters their mean; here a padding query attends to nothing (masked_softmax gives it zero
        weights), so the UAB hands it its normalised residual x alone and it enters the mean as
        x + E_cross(x).

    Args:
        num_heads: h of the cross-attention.
        alignment_pool: "causal" or "global".
    """

    def __init__(self, num_heads, alignment_pool="causal", **kwargs):
        super().__init__(**kwargs)
        if alignment_pool not in POOLS:
            raise ZooError(f"alignment_pool is {alignment_pool!r}; it must be one of {', '.join(POOLS)}")
        self.num_heads = int(num_heads)
        self.alignment_pool = alignment_pool

    def build(self, history_self_shape, candidate_self_shape=None, profile_shape=None, history_valid_shape=None,
              history_visible_shape=None):
        d = int(history_self_shape[-1])
        d_p = int(profile_shape[-1])
        if d % self.num_heads:
            raise ZooError(f"token width {d} is not divisible by num_heads {self.num_heads}")
        self.head_dim = d // self.num_heads
        add = lambda name, shape: self.add_weight(name=name, shape=shape, initializer="glorot_uniform")  # noqa: E731
        self.cross_query = add("cross_query", (d, d))
        self.cross_key = add("cross_key", (d_p, d))
        self.cross_value = add("cross_value", (d_p, d))
        self.cross_output = add("cross_output", (d, d))
        reduced = max(1, d // 4)
        self.gate_squeeze = add("gate_squeeze", (d, reduced))  # W1
        self.gate_self = add("gate_self", (reduced, d))  # W2
        self.gate_cross = add("gate_cross", (reduced, d))  # W3
        self.built = True

    def _weights(self, *weights):
        """The weights in the compute dtype (the history-cache methods also run outside __call__,
        where Keras does not autocast them)."""
        return [ops.cast(w, self.compute_dtype) for w in weights]

    def cross(self, e_self, profile):
        """Eq 7-9: E_cross [B, N, d] from E_self [B, N, d] and E_p [B, n2, d_p]."""
        h, dh = self.num_heads, self.head_dim
        w_q, w_k, w_v, w_o = self._weights(self.cross_query, self.cross_key, self.cross_value, self.cross_output)
        q = ops.reshape(ops.matmul(e_self, w_q), (-1, e_self.shape[1], h, dh))
        k = ops.reshape(ops.matmul(profile, w_k), (-1, profile.shape[1], h, dh))
        v = ops.reshape(ops.matmul(profile, w_v), (-1, profile.shape[1], h, dh))
        logits = ops.einsum("bnhd,bphd->bhnp", q, k) / math.sqrt(dh)  # [B, H, N, n2]
        one_profile_token = profile.shape[1] == 1  # a softmax over one key is exactly 1: not run
        probs = ops.ones_like(logits) if one_profile_token else ops.softmax(logits, axis=-1)
        out = ops.einsum("bhnp,bphd->bnhd", probs, v)
        return ops.matmul(ops.reshape(out, (-1, e_self.shape[1], h * dh)), w_o)

    def align(self, e_self, e_cross, e_mean):
        """Eq 12-15 given each token's pooled statistic e_mean (same shape as E_self)."""
        w_1, w_2, w_3 = self._weights(self.gate_squeeze, self.gate_self, self.gate_cross)
        squeezed = ops.relu(ops.matmul(e_mean, w_1))
        gates = ops.stack([ops.matmul(squeezed, w_2), ops.matmul(squeezed, w_3)], axis=0)
        w = ops.softmax(gates, axis=0)
        return w[0] * e_self + w[1] * e_cross

    def history_pool(self, e_sum, history_valid):
        """Causal eq 11 over the history: (per-token prefix means [B, L, d], E_sum of each behaviour,
        zero on padding [B, L, d])."""
        valid = ops.cast(history_valid, e_sum.dtype)[..., None]
        terms = _without_padding(e_sum, history_valid)
        means = ops.cumsum(terms, axis=1) / ops.maximum(ops.cumsum(valid, axis=1), 1.0)
        return means, terms

    def history_terms(self, history_self, profile, history_valid):
        """E_sum of each behaviour, zero on padding [B, L, d]: what the candidates pool over (the second
        value of `encode_history`, without the history's own alignment)."""
        history_self = ops.convert_to_tensor(history_self)
        e_sum = history_self + self.cross(history_self, ops.convert_to_tensor(profile))
        return _without_padding(e_sum, ops.convert_to_tensor(history_valid))

    def encode_history(self, history_self, profile, history_valid):
        """History part, causal pool: (E_AFN of the history, E_sum of each behaviour [B, L, d], which the
        candidates pool over). NumPy arrays are accepted (a public entry point, also run outside __call__)."""
        history_self, profile, history_valid = (
            ops.convert_to_tensor(x) for x in (history_self, profile, history_valid)
        )
        e_cross = self.cross(history_self, profile)
        means, terms = self.history_pool(history_self + e_cross, history_valid)
        return self.align(history_self, e_cross, means), terms

    def encode_candidates(self, candidate_self, profile, history_terms, history_visible):
        """Candidate part, causal pool: candidate m pools the behaviours history_visible[m] [B, M, L]
        allows and itself. NumPy arrays are accepted."""
        candidate_self, profile, history_terms, history_visible = (
            ops.convert_to_tensor(x) for x in (candidate_self, profile, history_terms, history_visible)
        )
        e_cross = self.cross(candidate_self, profile)
        e_sum = candidate_self + e_cross
        visible = ops.cast(history_visible, e_sum.dtype)
        pooled = ops.einsum("bml,bld->bmd", visible, history_terms)
        means = (pooled + e_sum) / (ops.sum(visible, axis=-1, keepdims=True) + 1.0)
        return self.align(candidate_self, e_cross, means)

    def call(self, history_self, candidate_self, profile, history_valid, history_visible):
        """Returns (E_AFN of the history [B, L, d], E_AFN of the candidates [B, M, d])."""
        if self.alignment_pool == "causal":
            history_out, terms = self.encode_history(history_self, profile, history_valid)
            return history_out, self.encode_candidates(candidate_self, profile, terms, history_visible)
        h_cross, c_cross = self.cross(history_self, profile), self.cross(candidate_self, profile)
        e_sum = ops.concatenate([history_self + h_cross, candidate_self + c_cross], axis=1)
        e_mean = ops.mean(e_sum, axis=1, keepdims=True)
        return (
            self.align(history_self, h_cross, ops.broadcast_to(e_mean, ops.shape(history_self))),
            self.align(candidate_self, c_cross, ops.broadcast_to(e_mean, ops.shape(candidate_self))),
        )

    def compute_output_spec(self, history_self, candidate_self, *args):
        return (
            keras.KerasTensor(history_self.shape, dtype=self.compute_dtype),
            keras.KerasTensor(candidate_self.shape, dtype=self.compute_dtype),
        )

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "alignment_pool": self.alignment_pool})
        return config
