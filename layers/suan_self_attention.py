import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import NEG_INF, masked_attention, masked_softmax
from zoo.layers.relative_attention_bias import RelativeAttentionBias


# The banded formulation runs several times the kernels of the masked one (the window blocks, each
# dilated chunk, the merged softmax). On the 2-core CPU the zoo is developed on, at batch 8, those cost
# about what 7,000-22,000 pairs per row cost (benchmarks/suan_training_step.py, L = 100-400: banded
# loses at L = 100, r = 8 and ties or wins at L = 200, r = 2 under TensorFlow and torch), so it must
# save at least this many pairs of the dense product to be built.
BANDED_MIN_SAVING = 16384
# The dilated part's chunk: n slots per residue class in ceil(n / DILATED_CHUNK) equal chunks (at
# L = 1000, r = 2 and 8, chunks of 32-64 slots measured 1.2-2x faster than one chunk of n).
DILATED_CHUNK = 64


def _banded_blocks(length, window):
    """(front padding, blocks) of the window part: L padded to blocks of k queries."""
    pad = (-length) % window
    return pad, (length + pad) // window


def _dilated_chunks(length, dilation):
    """(front padding, slots n, chunk c) of the dilated part: L padded to r residue classes of n slots,
    n a multiple of the chunk c."""
    slots = -(-length // dilation)
    chunk = -(-slots // -(-slots // DILATED_CHUNK))
    slots = -(-slots // chunk) * chunk
    return slots * dilation - length, slots, chunk


def attention_pairs(length, window_size, dilation, formulation="masked"):
    """Query-key pairs of one row's history attention: those a formulation computes ("masked": every
    pair, "banded": see `SuanSelfAttention`) or those the pattern allows ("allowed", causal included)."""
    if formulation == "masked":
        return length * length
    if formulation == "allowed":
        if window_size is None:
            return length * (length + 1) // 2
        near = sum(min(i + 1, window_size) for i in range(length))
        first_far = -(-window_size // dilation)  # the nearest dilated key beyond the window: r * first_far
        return near + sum(max(i // dilation - first_far + 1, 0) for i in range(length))
    _, blocks = _banded_blocks(length, window_size)
    _, slots, chunk = _dilated_chunks(length, dilation)
    chunks = slots // chunk
    return blocks * window_size * 2 * window_size + dilation * chunk * chunk * chunks * (chunks + 1) // 2


def choose_formulation(length, window_size, dilation):
    """The formulation a layer builds: "masked" for full attention; for sparse attention "banded" where
    it computes at least BANDED_MIN_SAVING fewer pairs per row than the dense [L, L] product, else
    "masked" (the same kernels as full attention, under the sparse mask)."""
    if window_size is None:
        return "masked"
    saved = length * length - attention_pairs(length, window_size, dilation, "banded")
    return "banded" if saved >= BANDED_MIN_SAVING else "masked"


def candidate_key_slots(length, window_size, dilation):
    """The history slots a candidate (at the shared position L) may attend to, in order.

    Full attention: every slot. Sparse (§3.3.1): slot j with L - j < k (local window) or
    (L - j) mod r == 0 (dilation).
    """
    if window_size is None:
        return list(range(length))
    return [j for j in range(length) if length - j < window_size or (length - j) % dilation == 0]


@keras.saving.register_keras_serializable(package="zoo")
class SuanSelfAttention(keras.layers.Layer):
    """SUAN §3.2.1 self-attention (eq 3-6) over the target-aware sequence, with LightSUAN's sparse
    pattern and parallel candidates (§3.3.1).

        Q1, K1, V1 = E_norm W1^Q, E_norm W1^K, E_norm W1^V                         (eq 3, no biases)
        Attention = softmax(Q1 K1^T / sqrt(d_head) + bias + mask) V1                (eq 4-5)
        E_self = Concat(Attention_1..h) W1^O                                         (eq 6)

    The logits are scaled by 1/sqrt(d_head) (the authors' code; eq 5 writes the full width n1·d) and
    the eq 4 bias (`RelativeAttentionBias`) is shared by the heads. Query i may attend key j when j is
    not padding and, for history slots 0..L-1:
      - full attention (`window_size=None`): j <= i (causal);
      - sparse attention: 0 <= i - j < k (local window of k keys, itself included) or
        i - j >= 0 and (i - j) mod r == 0 (dilation r); r = 1 is full causal attention.
    The M candidates all sit at position L: candidate m attends to the history slots position L may
    attend to that are visible to it (`history_visible[m]`: real and before its exposure time, so
    nothing from its label's future reaches it), and to itself, never to another candidate, so
    candidates are scored independently.
    A query with no allowed key (a padding slot) outputs zeros. Times are seconds relative to any
    common reference, as integers (float times work under a float32 policy; under mixed precision
    Keras casts float inputs to float16, which cannot hold them).

    The history attention has two formulations with one result, chosen when the layer is built
    (`formulation`, see `choose_formulation`; `attention_pairs` counts what each computes):
      - "masked": every query against every key, [B, H, L, L], under the pattern: full attention, and
        sparse attention where L is short (L = 50 with k = 8), where the banded formulation's extra
        kernels would cost more than the pairs it saves;
      - "banded": only the neighbourhood of the allowed pairs, about L (2k + L / 2r) instead of L^2 (the
        paper's O(L (k + L/r))): the window part as blocks of k queries against their own and the
        previous block of keys, the dilated part as r residue classes (a strided reshape), each a
        causal attention over n = L/r slots in chunks of c query slots against the slots up to their
        chunk's end; one softmax spans both parts.

    Args:
        num_heads: h.
        sequence_length: L, the history length (the candidates take position L).
        window_size: k, or None for full attention.
        dilation: r (sparse attention only).
        relative_bias: a `RelativeAttentionBias(L + 1)` this layer reads instead of owning its own
            tables; SuanEncoder passes one such layer to every block (`share_relative_bias=True`, the
            authors' scheme). It is a shared object, not part of the config: a layer rebuilt from its
            config owns its tables.
    """

    def __init__(self, num_heads, sequence_length, window_size=None, dilation=1, relative_bias=None, **kwargs):
        super().__init__(**kwargs)
        if window_size is not None and (int(window_size) < 1 or int(dilation) < 1):
            raise ZooError(f"window_size k and dilation r must be >= 1, got k={window_size}, r={dilation}")
        if window_size is None and dilation != 1:
            raise ZooError("dilation r needs a window_size k (sparse attention); full attention takes r = 1")
        self.num_heads = int(num_heads)
        self.sequence_length = int(sequence_length)
        self.window_size = None if window_size is None else int(window_size)
        self.dilation = int(dilation)
        if relative_bias is None:
            relative_bias = RelativeAttentionBias(self.sequence_length + 1, dtype=self.dtype_policy, name="relative_bias")
        elif relative_bias.max_length != self.sequence_length + 1:
            raise ZooError(
                f"the shared relative bias covers {relative_bias.max_length} positions; L = {self.sequence_length} "
                f"needs {self.sequence_length + 1}"
            )
        self.relative_bias = relative_bias
        self.candidate_slots = candidate_key_slots(self.sequence_length, self.window_size, self.dilation)
        self.formulation = choose_formulation(self.sequence_length, self.window_size, self.dilation)
        if self.window_size is not None:
            self.window_layout = _banded_blocks(self.sequence_length, self.window_size)
            self.dilated_layout = _dilated_chunks(self.sequence_length, self.dilation)

    def build(self, input_shape):
        d = int(input_shape[-1])
        if d % self.num_heads:
            raise ZooError(f"token width {d} is not divisible by num_heads {self.num_heads}")
        self.head_dim = d // self.num_heads
        for name in ("query", "key", "value", "output"):
            setattr(self, f"{name}_kernel", self.add_weight(name=f"{name}_kernel", shape=(d, d), initializer="glorot_uniform"))
        if not self.relative_bias.built:  # a shared bias is built once, by its first user
            self.relative_bias.build()
        self.built = True

    # ------------------------------------------------------------------ pieces
    def _heads(self, x, kernel):
        """[B, N, d] -> [B, N, H, d_head]"""
        y = ops.matmul(x, ops.cast(kernel, self.compute_dtype))  # cast: the methods also run outside __call__
        return ops.reshape(y, (-1, y.shape[1], self.num_heads, self.head_dim))

    def _merge(self, y):
        """[B, N, H, d_head] -> [B, N, d] through W^O"""
        y = ops.reshape(y, (-1, y.shape[1], self.num_heads * self.head_dim))
        return ops.matmul(y, ops.cast(self.output_kernel, self.compute_dtype))

    def _scale(self):
        return 1.0 / math.sqrt(self.head_dim)

    # ------------------------------------------------------------------ history
    def attend_history(self, history, history_valid, history_times):
        """History self-attention. Returns (E_self of the history [B, L, d], keys, values)."""
        q, k, v = (self._heads(history, w) for w in (self.query_kernel, self.key_kernel, self.value_kernel))
        if self.formulation == "banded":
            out = self._banded(q, k, v, history_valid, history_times)
        else:
            out = self._masked(q, k, v, history_valid, history_times)
        return self._merge(out), k, v

    def _masked(self, q, k, v, valid, times):
        """Every query against every key, [B, H, L, L], under the pattern and the key padding."""
        positions = ops.arange(self.sequence_length, dtype="int32")
        allowed = ops.logical_and(self._pattern(positions)[None, None], valid[:, None, None, :])  # [B, 1, L, L]
        bias = self.relative_bias(positions[:, None], positions[None, :], times[:, :, None], times[:, None, :])
        return masked_attention(q, k, v, allowed, self._scale(), bias[:, None])

    def _pattern(self, positions):
        """pattern [L, L]: query i may attend key j (causal; sparse: local window or dilation grid)."""
        offset = positions[:, None] - positions[None, :]  # i - j
        causal = offset >= 0
        if self.window_size is None:
            return causal
        return ops.logical_and(causal, ops.logical_or(offset < self.window_size, offset % self.dilation == 0))

    def _banded(self, q, k, v, valid, times):
        """The window part as blocks of k queries against their own and the previous block of keys; the
        dilated part as r residue classes (a strided reshape), each a causal attention over n = L / r
        slots, in chunks of c query slots against the key slots up to their chunk's end. One softmax
        spans both parts: each part's row maxima and sums are merged in query order."""
        window, r = self.window_size, self.dilation
        batch, heads, dh = -1, self.num_heads, self.head_dim
        q = q * self._scale()
        valid = ops.cast(valid, "float32")  # padded and reshaped as 0/1

        # Window part (0 <= i - j < k): query block b against key blocks [b - 1, b].
        pad_w, blocks = self.window_layout

        def blocked(x, fill):  # [B, L, ...] -> [B, nb, k, ...] (front-padded)
            x = ops.pad(x, [(0, 0), (pad_w, 0)] + [(0, 0)] * (len(x.shape) - 2), constant_values=fill)
            return ops.reshape(x, (batch, blocks, window) + tuple(x.shape[2:]))

        def with_previous(x):  # [B, nb, k, ...] -> [B, nb, 2k, ...]
            previous = ops.concatenate([ops.zeros_like(x[:, :1]), x[:, :-1]], axis=1)
            return ops.concatenate([previous, x], axis=2)

        qw, kw, vw = blocked(q, 0.0), with_previous(blocked(k, 0.0)), with_previous(blocked(v, 0.0))
        tq = blocked(times, 0)
        tk = with_previous(tq)
        valid_w = with_previous(blocked(valid, 0.0)) > 0.5  # [B, nb, 2k]
        a = ops.arange(window, dtype="int32")[:, None]
        c = ops.arange(2 * window, dtype="int32")[None, :]
        offset = window + a - c  # i - j for query a of a block and key c of [previous, own]
        band = ops.logical_and(offset >= 0, offset < window)  # [k, 2k]
        allowed_w = ops.logical_and(band[None, None], valid_w[:, :, None, :])[:, :, None]  # [B, nb, 1, k, 2k]
        block_start = ops.arange(blocks, dtype="int32")[:, None, None] * window
        bias_w = self.relative_bias(block_start + a[None], block_start - window + c[None], tq[..., None],
                                    tk[:, :, None, :])  # [B, nb, k, 2k]
        logits_w = ops.einsum("bnqhd,bnkhd->bnhqk", qw, kw) + bias_w[:, :, None]
        logits_w = ops.where(allowed_w, ops.cast(logits_w, "float32"), NEG_INF)  # [B, nb, H, k, 2k]

        # Dilated part ((i - j) mod r = 0, i - j >= k): residue class i mod r, slot m = i // r, the
        # slots front-padded to n = chunks * c; query chunk [s, s + c) against key slots [0, s + c).
        pad_d, slots, chunk = self.dilated_layout
        starts = range(0, slots, chunk)

        def strided(x, fill):  # [B, L, ...] -> [B, r, n, ...]
            x = ops.pad(x, [(0, 0), (pad_d, 0)] + [(0, 0)] * (len(x.shape) - 2), constant_values=fill)
            return ops.moveaxis(ops.reshape(x, (batch, slots, r) + tuple(x.shape[2:])), 2, 1)

        qd, kd, vd = strided(q, 0.0), strided(k, 0.0), strided(v, 0.0)
        td, valid_d = strided(times, 0), strided(valid, 0.0) > 0.5
        m = ops.arange(slots, dtype="int32")
        logits_d = []
        for s in starts:
            mq, mk = m[s : s + chunk], m[: s + chunk]
            far = (mq[:, None] - mk[None, :]) * r >= window  # [c, s + c]
            allowed = ops.logical_and(far[None, None], valid_d[:, :, None, : s + chunk])[:, :, None]
            bias_d = self.relative_bias(mq[:, None] * r, mk[None, :] * r, td[:, :, s : s + chunk, None],
                                        td[:, :, None, : s + chunk])  # [B, r, c, s + c]
            logits = ops.einsum("brqhd,brkhd->brhqk", qd[:, :, s : s + chunk], kd[:, :, : s + chunk])
            logits = logits + bias_d[:, :, None]
            logits_d.append(ops.where(allowed, ops.cast(logits, "float32"), NEG_INF))  # [B, r, H, c, s + c]

        # One softmax over both parts, per query: exp(logit - top) / total.
        def window_to_queries(x):  # [B, nb, H, k] -> [B, L, H]
            return ops.reshape(ops.moveaxis(x, 2, 3), (batch, blocks * window, heads))[:, pad_w:]

        def dilated_to_queries(parts):  # chunks of [B, r, H, c] -> [B, L, H]
            x = ops.transpose(ops.concatenate(parts, axis=3), (0, 3, 1, 2))  # [B, n, r, H]
            return ops.reshape(x, (batch, slots * r, heads))[:, pad_d:]

        top = ops.maximum(window_to_queries(ops.max(logits_w, axis=-1)),
                          dilated_to_queries([ops.max(x, axis=-1) for x in logits_d]))
        # Any shift gives the same softmax (no gradient); at least NEG_INF / 2, so that a query with no
        # allowed key has every exp 0 (a total of 0: all-zero weights, as masked_softmax gives).
        top = ops.stop_gradient(ops.maximum(top, NEG_INF / 2))
        top_w = ops.reshape(ops.pad(top, [(0, 0), (pad_w, 0), (0, 0)]), (batch, blocks, window, heads))
        top_w = ops.moveaxis(top_w, 3, 2)[..., None]  # [B, nb, H, k, 1]
        top_d = ops.reshape(ops.pad(top, [(0, 0), (pad_d, 0), (0, 0)]), (batch, slots, r, heads))
        top_d = ops.transpose(top_d, (0, 2, 3, 1))  # [B, r, H, n]
        exp_w = ops.exp(logits_w - top_w)
        exp_d = [ops.exp(x - top_d[:, :, :, s : s + chunk, None]) for s, x in zip(starts, logits_d)]
        total = window_to_queries(ops.sum(exp_w, axis=-1)) + dilated_to_queries([ops.sum(x, axis=-1) for x in exp_d])

        out_w = ops.einsum("bnhqk,bnkhd->bnqhd", ops.cast(exp_w, q.dtype), vw)
        out_w = ops.reshape(out_w, (batch, blocks * window, heads, dh))[:, pad_w:]
        out_d = [ops.einsum("brhqk,brkhd->brqhd", ops.cast(x, q.dtype), vd[:, :, : s + chunk])
                 for s, x in zip(starts, exp_d)]
        out_d = ops.moveaxis(ops.concatenate(out_d, axis=2), 1, 2)  # [B, n, r, H, d_head]
        out_d = ops.reshape(out_d, (batch, slots * r, heads, dh))[:, pad_d:]
        total = ops.where(total > 0, total, 1.0)[..., None]  # [B, L, H, 1]
        return (out_w + out_d) / ops.cast(total, q.dtype)

    # ------------------------------------------------------------------ candidates
    def candidate_mask(self, history_mask):
        """The part of a mask over the history (last axis L) at the slots position L may attend to."""
        return ops.take(history_mask, ops.convert_to_tensor(self.candidate_slots, dtype="int32"), axis=-1)

    def candidate_context(self, keys, values, history_mask, history_times):
        """What the candidates read from the history: keys, values, mask and times of the slots
        position L may attend to. `history_mask` is [B, M, L], the behaviours each candidate may read
        (hist_visible), or [B, L], one mask for every candidate."""
        slots = ops.convert_to_tensor(self.candidate_slots, dtype="int32")
        take = lambda x: ops.take(x, slots, axis=1)  # noqa: E731
        return take(keys), take(values), self.candidate_mask(history_mask), take(history_times)

    def candidate_weights(self, candidates, context, candidate_times):
        """Eq 4-5 for the candidates: each one's softmax over the history slots its mask allows and
        itself, [B, H, M, S + 1] (the last column: itself)."""
        keys, _, mask, times = context
        q, k = self._heads(candidates, self.query_kernel), self._heads(candidates, self.key_kernel)
        slots = ops.convert_to_tensor(self.candidate_slots, dtype="int32")
        t_c = candidate_times  # [B, M]
        at_length = ops.convert_to_tensor(self.sequence_length, dtype="int32")
        bias_h = self.relative_bias(at_length, slots[None, None, :], t_c[:, :, None], times[:, None, :])  # [B, M, S]
        bias_self = self.relative_bias(at_length, at_length, t_c, t_c)[..., None]  # [B, M, 1]
        logits_h = ops.einsum("bmhd,bshd->bhms", q, keys) * self._scale() + bias_h[:, None]
        logits_self = ops.moveaxis(ops.sum(q * k, axis=-1), 2, 1)[..., None] * self._scale() + bias_self[:, None]
        mask = ops.cast(mask, "bool")
        per_candidate = mask if len(mask.shape) == 3 else mask[:, None, :]  # [B, M or 1, S]
        allowed_h = ops.broadcast_to(per_candidate[:, None], ops.shape(logits_h))  # [B, H, M, S]
        allowed = ops.concatenate([allowed_h, ops.ones_like(logits_self, dtype="bool")], axis=-1)
        return masked_softmax(ops.concatenate([logits_h, logits_self], axis=-1), allowed)

    def attend_candidates(self, candidates, context, candidate_times):
        """Each candidate attends to the history context its mask allows and to itself: E_self [B, M, d]."""
        probs = self.candidate_weights(candidates, context, candidate_times)
        v = self._heads(candidates, self.value_kernel)
        out = ops.einsum("bhms,bshd->bmhd", probs[..., :-1], context[1])
        out = out + ops.moveaxis(probs[..., -1:], 1, 2) * v
        return self._merge(out)

    def call(self, history, candidates, history_valid, history_visible, history_times, candidate_times):
        """Returns (E_self of the history [B, L, d], E_self of the candidates [B, M, d]); history_visible
        [B, M, L] says which behaviours each candidate may read."""
        history_valid = ops.cast(history_valid, "bool")
        out_h, keys, values = self.attend_history(history, history_valid, history_times)
        context = self.candidate_context(keys, values, history_visible, history_times)
        return out_h, self.attend_candidates(candidates, context, candidate_times)

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
                "sequence_length": self.sequence_length,
                "window_size": self.window_size,
                "dilation": self.dilation,
            }
        )
        return config
