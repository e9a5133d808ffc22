import math

import keras
import numpy as np

from tests.references import rms_norm  # eq 2, unit scale, eps 1e-6
from tests.testing import LayerRunner, TestCase
from zoo.layers.afnet_test import afnet_reference
from zoo.layers.suan_self_attention_test import allowed_reference, attention_reference
from zoo.layers.uab import UAB


class UABTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.RandomState(0)
        self.length, self.m, self.d = 6, 3, 8
        self.hist = rng.normal(size=(2, self.length, self.d)).astype("float32")
        self.cand = rng.normal(size=(2, self.m, self.d)).astype("float32")
        self.profile = rng.normal(size=(2, 3, 4)).astype("float32")
        self.valid = np.ones((2, self.length), bool)
        self.valid[1, :2] = False
        self.hist_t = np.sort(rng.randint(0, 10**6, (2, self.length))).astype("int32")  # seconds
        self.cand_t = (self.hist_t[:, -1:] + 60).repeat(self.m, 1).astype("int32")
        self.cand_t[:, 0] = self.hist_t[:, 3]  # candidate 0 exposed at behaviour 3: behaviours 3.. are its future
        self.visible = self.valid[:, None, :] & (self.hist_t[:, None, :] < self.cand_t[:, :, None])  # [B, M, L]
        self.rng = rng

    def args(self, hist=None, cand=None):
        return [self.hist if hist is None else hist, self.cand if cand is None else cand, self.profile,
                self.valid, self.visible, self.hist_t, self.cand_t]

    def test_layer_basics(self):
        for config in ({}, {"window_size": 2, "dilation": 2}, {"alignment_pool": "global"}):
            self.run_layer_test(
                UAB, {"num_heads": 2, "sequence_length": self.length, **config}, tuple(self.args()), (2, self.length, self.d),
                expected_num_trainable_weights=19,  # 3 RMSNorm scales, attention 6, AFNet 7, SwiGLU 3
            )

    def test_block_order_matches_reference(self):
        rng = self.rng
        for window, dilation in ((None, 1), (2, 2)):
            layer = UAB(2, self.length, window, dilation)
            run = LayerRunner(layer, *self.args())
            att = [rng.normal(size=(8, 8)).astype("float32") / math.sqrt(8) for _ in range(4)]
            w_pos, w_time = rng.normal(size=2 * self.length + 3).astype("float32"), rng.normal(size=129).astype("float32")
            layer.attention.set_weights(att + [w_pos, w_time])
            afn = [rng.normal(size=s).astype("float32") / math.sqrt(s[0]) for s in [(8, 8), (4, 8), (4, 8), (8, 8), (8, 2), (2, 8), (2, 8)]]
            layer.afnet.set_weights(afn)
            ffn = [rng.normal(size=s).astype("float32") / math.sqrt(s[0]) for s in [(8, 24), (8, 24), (24, 8)]]
            layer.ffn.set_weights(ffn)
            out_h, out_c = run(*self.args())
            positions = np.concatenate([np.arange(self.length), np.full(self.m, self.length)])
            for b in range(2):
                allowed = allowed_reference(self.length, self.m, self.valid[b], self.visible[b], window, dilation)
                valid = [j for j in range(self.length) if self.valid[b, j]]
                pooled = [[j for j in valid if j <= i] for i in range(self.length)]
                pooled += [[j for j in valid if self.visible[b, c, j]] + [self.length + c] for c in range(self.m)]
                times = np.concatenate([self.hist_t[b], self.cand_t[b]]).astype("float64")
                x = rms_norm(np.concatenate([self.hist[b], self.cand[b]]))  # eq 2
                x = rms_norm(attention_reference(x, positions, times, allowed, att, 2, w_pos, w_time, self.length) + x)
                x = rms_norm(afnet_reference(x, self.profile[b], afn, 2, pooled) + x)
                a = x @ ffn[0]
                expected = (a / (1 + np.exp(-a)) * (x @ ffn[1])) @ ffn[2] + x  # eq 16 + residual
                keep = self.valid[b]
                self.assertAllClose(out_h[b][keep], expected[: self.length][keep], atol=1e-4)
                self.assertAllClose(out_c[b], expected[self.length :], atol=1e-4)

    def test_causal_and_candidates_isolated(self):
        for window in (None, 2):
            layer = UAB(2, self.length, window, 2 if window else 1)
            run = LayerRunner(layer, *self.args())
            out_h, out_c = run(*self.args())
            hist = self.hist.copy()
            hist[:, 4] += 1.0  # a later behaviour changes
            cand = self.cand.copy()
            cand[:, 1] += 1.0  # candidate 1 changes
            new_h, new_c = run(*self.args(hist=hist))
            self.assertAllClose(new_h[:, :4], out_h[:, :4])
            self.assertGreater(np.abs(new_h[:, 4:] - out_h[:, 4:]).max(), 1e-3)
            self.assertAllClose(new_c[:, 0], out_c[:, 0])  # behaviour 4 is candidate 0's future
            self.assertGreater(np.abs(new_c[:, 1:] - out_c[:, 1:]).max(), 1e-3)
            new_h, new_c = run(*self.args(cand=cand))
            self.assertAllClose(new_h, out_h)
            self.assertAllClose(new_c[:, [0, 2]], out_c[:, [0, 2]])
            self.assertGreater(np.abs(new_c[:, 1] - out_c[:, 1]).max(), 1e-3)

    def test_cache_methods_take_numpy(self):
        """encode_history and encode_candidates (public entry points): NumPy in equals tensors in."""
        layer = UAB(2, self.length)
        LayerRunner(layer, *self.args())
        history = (self.hist, self.profile, self.valid, self.hist_t)
        out_numpy, state_numpy = layer.encode_history(*history)
        out_tensor, state_tensor = layer.encode_history(*(keras.ops.convert_to_tensor(a) for a in history))
        self.assertAllClose(out_numpy, out_tensor, atol=1e-6)
        state_arrays = keras.tree.map_structure(keras.ops.convert_to_numpy, state_tensor)
        tensors = (keras.ops.convert_to_tensor(a) for a in (self.cand, self.profile, self.visible, self.cand_t))
        cand, profile, visible, cand_t = tensors
        expected = layer.encode_candidates(cand, profile, state_tensor, visible, cand_t)
        for state in (state_numpy, state_arrays):
            from_numpy = layer.encode_candidates(self.cand, self.profile, state, self.visible, self.cand_t)
            self.assertAllClose(from_numpy, expected, atol=1e-6)

    def test_the_state_alone_skips_the_history_output(self):
        """history_output=False: no history output, the very state (what the last block of an encoder gives)."""
        layer = UAB(2, self.length)
        LayerRunner(layer, *self.args())
        history = (self.hist, self.profile, self.valid, self.hist_t)
        _, state = layer.encode_history(*history)
        none, state_alone = layer.encode_history(*history, history_output=False)
        self.assertIsNone(none)
        for got, expected in zip(keras.tree.flatten(state_alone), keras.tree.flatten(state)):
            self.assertAllClose(got, expected, atol=1e-6)

    def test_global_pool_breaks_causality_and_isolation(self):
        """Documented behaviour of alignment_pool="global" (eq 11 as written)."""
        layer = UAB(2, self.length, alignment_pool="global")
        run = LayerRunner(layer, *self.args())
        out_h, out_c = run(*self.args())
        cand = self.cand.copy()
        cand[:, 1] += 1.0
        new_h, new_c = run(*self.args(cand=cand))
        self.assertGreater(np.abs(new_h - out_h).max(), 1e-4)
        self.assertGreater(np.abs(new_c[:, 0] - out_c[:, 0]).max(), 1e-4)
