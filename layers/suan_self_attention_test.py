import math

import numpy as np

from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.relative_attention_bias import RelativeAttentionBias
from zoo.layers.suan_self_attention import SuanSelfAttention


def allowed_reference(length, m, valid, visible, window=None, dilation=1):
    """Brute-force §3.3.1 pattern over the target-aware sequence [L history slots, M candidates].

    History query i sees history key j <= i that is not padding and, when sparse, lies in the local
    window (i - j < k) or on the dilation grid ((i - j) mod r == 0). Every candidate sits at
    position L, sees the history keys that position L may see and that are visible to it
    (visible[c, j]: real and before its exposure time), and itself.
    """
    n = length + m
    allowed = np.zeros((n, n), bool)
    for i in range(n):
        p = min(i, length)
        for j in range(length):
            near = p - j < window if window else True
            readable = valid[j] if i < length else visible[i - length, j]
            allowed[i, j] = readable and p - j >= 0 and (near or (window and (p - j) % dilation == 0))
        if i >= length:
            allowed[i, i] = True
    return allowed


def attention_reference(x, positions, times, allowed, w, heads, w_pos, w_time, length):
    """SUAN eq 3-6 for one row, with the eq 4 bias and a boolean mask; rows with no key give 0."""
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    n, d = x.shape
    dh = d // heads
    out = np.zeros((n, d))
    for h in range(heads):
        s = slice(h * dh, (h + 1) * dh)
        logits = q[:, s] @ k[:, s].T / math.sqrt(dh)
        for i in range(n):
            for j in range(n):
                gap = max(abs(times[i] - times[j]), 1.0)
                bucket = min(max(int(math.log(gap) / 0.301), 0), 128)
                logits[i, j] += w_pos[length + positions[j] - positions[i]] + w_time[bucket]
        for i in range(n):
            if allowed[i].any():
                e = np.exp(logits[i][allowed[i]] - logits[i][allowed[i]].max())
                out[i, s] = (e / e.sum()) @ v[allowed[i], s]
    return out @ w[3]


class SuanSelfAttentionTest(TestCase):
    def make_inputs(self, length, m, d, seed=0, pad=2):
        rng = np.random.RandomState(seed)
        hist = rng.normal(size=(2, length, d)).astype("float32")
        cand = rng.normal(size=(2, m, d)).astype("float32")
        valid = np.ones((2, length), bool)
        valid[1, :pad] = False  # left padding on row 1
        hist_t = np.sort(rng.randint(0, 10**6, (2, length))).astype("int32")  # seconds
        cand_t = (hist_t[:, -1:] + rng.randint(1, 5000, (2, m))).astype("int32")
        cand_t[:, 0] = hist_t[:, length // 2]  # candidate 0 exposed mid-history: the later half is its future
        visible = valid[:, None, :] & (hist_t[:, None, :] < cand_t[:, :, None])  # [B, M, L]
        return hist, cand, valid, visible, hist_t, cand_t

    def set_random_weights(self, layer, d, length, seed=1):
        rng = np.random.RandomState(seed)
        w = [rng.normal(size=(d, d)).astype("float32") / math.sqrt(d) for _ in range(4)]
        w_pos = rng.normal(size=2 * (length + 1) + 1).astype("float32")
        w_time = rng.normal(size=129).astype("float32")
        layer.set_weights(w + [w_pos, w_time])
        return w, w_pos, w_time

    def check_against_reference(self, length, m, window, dilation, heads=2, d=8):
        inputs = self.make_inputs(length, m, d, seed=length + m)
        hist, cand, valid, visible, hist_t, cand_t = inputs
        layer = SuanSelfAttention(heads, length, window_size=window, dilation=dilation)
        run = LayerRunner(layer, *inputs)
        w, w_pos, w_time = self.set_random_weights(layer, d, length)
        out_h, out_c = run(*inputs)
        positions = np.concatenate([np.arange(length), np.full(m, length)])
        for b in range(2):
            allowed = allowed_reference(length, m, valid[b], visible[b], window, dilation)
            x = np.concatenate([hist[b], cand[b]])
            times = np.concatenate([hist_t[b], cand_t[b]]).astype("float64")
            expected = attention_reference(x, positions, times, allowed, w, heads, w_pos, w_time, length)
            msg = f"L={length} M={m} k={window} r={dilation} row {b}"
            self.assertAllClose(out_h[b], expected[:length], atol=1e-4, msg=msg)
            self.assertAllClose(out_c[b], expected[length:], atol=1e-4, msg=msg)

    def test_layer_basics(self):
        inputs = self.make_inputs(6, 3, 8)
        for window, dilation in ((None, 1), (2, 2)):
            config = {"num_heads": 2, "sequence_length": 6, "window_size": window, "dilation": dilation}
            _, (out_h, out_c) = self.run_layer_test(
                SuanSelfAttention, config, inputs, (2, 6, 8), expected_num_trainable_weights=6  # W^Q,K,V,O + 2 tables
            )
            self.assertEqual(tuple(out_c.shape), (2, 3, 8))

    def test_shared_relative_bias(self):
        """Two layers given one RelativeAttentionBias read the same tables (SuanEncoder's sharing)."""
        inputs = self.make_inputs(6, 2, 8)
        shared = RelativeAttentionBias(7)
        first, second = (SuanSelfAttention(2, 6, relative_bias=shared) for _ in range(2))
        for layer in (first, second):
            LayerRunner(layer, *inputs)
        self.assertIs(first.relative_bias, second.relative_bias)
        self.assertLen(first.trainable_weights, 6)
        self.assertIs(first.trainable_weights[-1], second.trainable_weights[-1])
        with self.assertRaisesRegex(ZooError, "covers 7 positions; L = 7 needs 8"):
            SuanSelfAttention(2, 7, relative_bias=shared)

    def test_full_attention_matches_reference(self):
        self.check_against_reference(length=6, m=3, window=None, dilation=1)

    def test_sparse_attention_matches_brute_force_pattern(self):
        for length, window, dilation, m in [(7, 2, 2, 3), (9, 3, 4, 1), (8, 1, 3, 2), (5, 2, 1, 4), (10, 4, 3, 2)]:
            self.check_against_reference(length, m, window, dilation, heads=1 if length % 2 else 2)

    def test_one_mask_for_every_candidate(self):
        """candidate_context takes hist_visible [B, M, L] or one [B, L] mask for all candidates."""
        hist, cand, valid, _, hist_t, cand_t = self.make_inputs(6, 3, 8)
        layer = SuanSelfAttention(2, 6, window_size=2, dilation=2)
        LayerRunner(layer, hist, cand, valid, np.repeat(valid[:, None], 3, axis=1), hist_t, cand_t)
        _, keys, values = layer.attend_history(hist, valid, hist_t)
        shared = layer.attend_candidates(cand, layer.candidate_context(keys, values, valid, hist_t), cand_t)
        masks = np.repeat(valid[:, None], 3, axis=1)
        each = layer.attend_candidates(cand, layer.candidate_context(keys, values, masks, hist_t), cand_t)
        self.assertAllClose(shared, each, atol=1e-6)

    def test_dilation_one_and_wide_window_is_full_attention(self):
        args = list(self.make_inputs(6, 2, 8))
        full = SuanSelfAttention(2, 6)
        expected = LayerRunner(full, *args)(*args)
        for window in (6, 2):  # k >= L; r = 1 with a short window (window + every farther key)
            sparse = SuanSelfAttention(2, 6, window_size=window, dilation=1)
            run = LayerRunner(sparse, *args)
            sparse.set_weights(full.get_weights())
            for a, b in zip(run(*args), expected):
                self.assertAllClose(a, b, atol=1e-5)

    def test_padding_query_outputs_zeros(self):
        args = list(self.make_inputs(6, 2, 8, pad=3))
        for window in (None, 2):
            layer = SuanSelfAttention(2, 6, window_size=window, dilation=2 if window else 1)
            out_h, out_c = LayerRunner(layer, *args)(*args)
            self.assertAllClose(out_h[1, :3], np.zeros((3, 8)))
            self.assertTrue(np.all(np.isfinite(np.asarray(out_c))))

    def test_bad_arguments(self):
        with self.assertRaises(ZooError):
            SuanSelfAttention(2, 6, window_size=0, dilation=2)
        with self.assertRaises(ZooError):
            SuanSelfAttention(2, 6, dilation=2)
        with self.assertRaises(ZooError):
            SuanSelfAttention(3, 6)(*self.make_inputs(6, 1, 8))
