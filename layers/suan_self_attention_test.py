import math

import keras
import numpy as np

from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.relative_attention_bias import RelativeAttentionBias
from zoo.layers.suan_self_attention import SuanSelfAttention, attention_pairs, choose_formulation


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


def gradients(layer, inputs, c_h, c_c):
    """d(sum(c_h * E_self history) + sum(c_c * E_self candidates)) / d(trainable weights), with the
    backend's own autodiff (test-only helper)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            out_h, out_c = layer(*inputs)
            loss = tf.reduce_sum(out_h * c_h) + tf.reduce_sum(out_c * c_c)
        return [np.asarray(g) for g in tape.gradient(loss, [v.value for v in layer.trainable_variables])]
    if backend == "jax":
        import jax

        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss(values):
            (out_h, out_c), _ = layer.stateless_call(values, non_trainable, *inputs)
            return (out_h * c_h).sum() + (out_c * c_c).sum()

        return [np.asarray(g) for g in jax.jit(jax.grad(loss))([v.value for v in layer.trainable_variables])]
    import torch

    out_h, out_c = layer(*inputs)
    ((out_h * torch.as_tensor(c_h)).sum() + (out_c * torch.as_tensor(c_c)).sum()).backward()
    return [np.zeros(v.shape) if v.value.grad is None else v.value.grad.numpy() for v in layer.trainable_variables]


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

    def reference(self, inputs, weights, heads, window, dilation):
        """attention_reference on every row: (E_self of the history [B, L, d], of the candidates [B, M, d])."""
        hist, cand, valid, visible, hist_t, cand_t = inputs
        w, w_pos, w_time = weights
        length, m = hist.shape[1], cand.shape[1]
        positions = np.concatenate([np.arange(length), np.full(m, length)])
        rows = []
        for b in range(len(hist)):
            allowed = allowed_reference(length, m, valid[b], visible[b], window, dilation)
            x = np.concatenate([hist[b], cand[b]]).astype("float64")
            times = np.concatenate([hist_t[b], cand_t[b]]).astype("float64")
            rows.append(attention_reference(x, positions, times, allowed, w, heads, w_pos, w_time, length))
        return np.stack(rows)[:, :length], np.stack(rows)[:, length:]

    def check_against_reference(self, length, m, window, dilation, heads=2, d=8, formulation=None, pad=2):
        inputs = self.make_inputs(length, m, d, seed=length + m, pad=pad)
        layer = SuanSelfAttention(heads, length, window_size=window, dilation=dilation)
        if formulation is not None:
            layer.formulation = formulation
        run = LayerRunner(layer, *inputs)
        weights = self.set_random_weights(layer, d, length)
        out_h, out_c = run(*inputs)
        expected_h, expected_c = self.reference(inputs, weights, heads, window, dilation)
        msg = f"L={length} M={m} k={window} r={dilation} {layer.formulation}"
        self.assertAllClose(out_h, expected_h, atol=1e-4, msg=msg)
        self.assertAllClose(out_c, expected_c, atol=1e-4, msg=msg)

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
        """Both formulations, the banded one (only the window band and the dilated residue classes, in
        chunks) and the masked one (the dense product under the sparse mask), give the reference: L not
        a multiple of k or r, r = 1, k = 1, row 1 padded in its first `pad` slots (wholly at L = 9, k = 8),
        several dilated chunks (L = 150, r = 2: 75 slots per residue class)."""
        cases = [(7, 2, 2, 3, 2), (9, 3, 4, 1, 2), (8, 1, 3, 2, 2), (5, 2, 1, 4, 2), (10, 4, 3, 2, 2), (13, 3, 2, 2, 5),
                 (9, 8, 2, 1, 9), (150, 8, 2, 2, 37)]
        for length, window, dilation, m, pad in cases:
            for formulation in ("banded", "masked"):
                self.check_against_reference(length, m, window, dilation, heads=1 if length % 2 else 2,
                                             formulation=formulation, pad=pad)

    def test_both_formulations_have_the_reference_gradients(self):
        """Both formulations' weight gradients agree with each other, and with central differences of the
        NumPy reference along random directions (W^Q, W^K, W^V, W^O and the eq 4 tables at once)."""
        d, heads = 8, 2
        rng = np.random.RandomState(3)
        for length, window, dilation, m in [(13, 3, 2, 2), (11, 4, 3, 1)]:
            inputs = self.make_inputs(length, m, d, seed=length, pad=4)
            c_h, c_c = rng.normal(size=(2, length, d)).astype("float32"), rng.normal(size=(2, m, d)).astype("float32")
            grads = {}
            for formulation in ("banded", "masked"):
                layer = SuanSelfAttention(heads, length, window_size=window, dilation=dilation)
                layer.formulation = formulation
                LayerRunner(layer, *inputs)  # builds it
                weights = self.set_random_weights(layer, d, length)
                grads[formulation] = gradients(layer, inputs, c_h, c_c)
            for banded, masked in zip(grads["banded"], grads["masked"]):
                self.assertAllClose(banded, masked, atol=1e-5, rtol=1e-4)

            def objective(flat):
                parts, start = [], 0
                for size, shape in zip(sizes, shapes):
                    parts.append(flat[start : start + size].reshape(shape))
                    start += size
                out_h, out_c = self.reference(inputs, (parts[:4], parts[4], parts[5]), heads, window, dilation)
                return np.sum(out_h * c_h) + np.sum(out_c * c_c)

            flat_weights = [np.asarray(w, "float64") for w in (*weights[0], weights[1], weights[2])]
            shapes, sizes = [w.shape for w in flat_weights], [w.size for w in flat_weights]
            point = np.concatenate([w.ravel() for w in flat_weights])
            gradient = np.concatenate([g.ravel() for g in grads["banded"]])
            for _ in range(2):
                direction = rng.normal(size=point.shape)
                eps = 1e-4
                numeric = (objective(point + eps * direction) - objective(point - eps * direction)) / (2 * eps)
                self.assertAllClose(gradient @ direction, numeric, rtol=1e-3, atol=1e-3,
                                    msg=f"L={length} k={window} r={dilation}")

    def test_banded_under_mixed_precision(self):
        """The banded formulation computes in float16 under mixed_float16 (the softmax in float32) and stays
        close to float32."""
        inputs = self.make_inputs(13, 2, 8, pad=5)
        outputs = {}
        for policy in ("float32", "mixed_float16"):
            layer = SuanSelfAttention(2, 13, window_size=3, dilation=2, dtype=policy)
            layer.formulation = "banded"
            run = LayerRunner(layer, *inputs)
            self.set_random_weights(layer, 8, 13)
            outputs[policy] = run(*inputs)
        for mixed, full in zip(outputs["mixed_float16"], outputs["float32"]):
            self.assertEqual(str(mixed.dtype), "float16")
            self.assertAllClose(mixed.astype("float32"), full, atol=5e-2, rtol=5e-2)

    def test_formulation_follows_computed_pairs(self):
        """The banded formulation is built where it saves enough pairs of the dense [L, L] product (not at
        L = 50 with k = 8, where its extra kernels cost more than the pairs it saves; at L = 1000 it
        computes under a third of them, below the paper's L (k + L / r)); full attention is masked."""
        self.assertEqual(choose_formulation(50, None, 1), "masked")
        self.assertEqual(choose_formulation(50, 8, 2), "masked")
        self.assertEqual(choose_formulation(50, 8, 8), "masked")
        self.assertEqual(choose_formulation(1000, 8, 2), "banded")
        self.assertEqual(SuanSelfAttention(2, 1000, window_size=8, dilation=8).formulation, "banded")
        for r in (2, 8):
            banded = attention_pairs(1000, 8, r, "banded")
            self.assertLess(banded, 1000 * (8 + 1000 / r))
            self.assertLess(3 * banded, attention_pairs(1000, 8, r, "masked"))
        for length, window, dilation in [(1, 1, 1), (9, 3, 4), (50, 8, 2), (61, 8, 8)]:
            visible = np.zeros((0, length), bool)
            allowed = allowed_reference(length, 0, np.ones(length, bool), visible, window, dilation)
            self.assertEqual(attention_pairs(length, window, dilation, "allowed"), allowed.sum())
            self.assertGreaterEqual(attention_pairs(length, window, dilation, "banded"), allowed.sum())
        self.assertEqual(attention_pairs(7, None, 1, "allowed"), 28)

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
