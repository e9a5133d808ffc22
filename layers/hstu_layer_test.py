import math

import numpy as np

from tests.references import layer_norm
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.hstu_layer import HSTULayer


def silu(x):
    return x / (1.0 + np.exp(-x))


def hstu_reference(hist, cand, valid, visible, hist_t, cand_t, w, heads, dqk, dv):
    """HSTU eq 1-3 for one row over the sequence [L history slots, M candidates at position L].

    History i reads history j <= i when j is real; candidate m reads history j when visible[m, j]
    and itself. A = SiLU(q_i . k_j + rab(i, j)) / (L + 1) on those pairs, 0 elsewhere.
    """
    length, m = len(hist), len(cand)
    x = np.concatenate([hist, cand]).astype("float64")
    positions = list(range(length)) + [length] * m
    times = np.concatenate([hist_t, cand_t]).astype("float64")
    n = length + m
    allowed = np.zeros((n, n), bool)
    for i in range(n):
        for j in range(length):
            allowed[i, j] = (j <= i and valid[j]) if i < length else visible[i - length, j]
        if i >= length:
            allowed[i, i] = True
    y = silu(layer_norm(x) @ w["uvqk_kernel"] + w["uvqk_bias"])
    u, v = y[:, : heads * dv], y[:, heads * dv : 2 * heads * dv]
    q, k = y[:, 2 * heads * dv : 2 * heads * dv + heads * dqk], y[:, 2 * heads * dv + heads * dqk :]
    attended = np.zeros((n, heads * dv))
    for h in range(heads):
        for i in range(n):
            for j in range(n):
                if not allowed[i, j]:
                    continue
                gap = max(abs(times[i] - times[j]), 1.0)
                bucket = min(max(int(math.log(gap) / 0.301), 0), 128)
                rab = w["position_table"][length + positions[j] - positions[i]] + w["time_table"][bucket]
                a = silu(q[i, h * dqk : (h + 1) * dqk] @ k[j, h * dqk : (h + 1) * dqk] + rab) / (length + 1)
                attended[i, h * dv : (h + 1) * dv] += a * v[j, h * dv : (h + 1) * dv]
    out = (layer_norm(attended) * u) @ w["output_kernel"] + w["output_bias"] + x
    return out[:length], out[length:]


class HSTULayerTest(TestCase):
    def make_inputs(self, length=5, m=3, d=6, seed=0):
        rng = np.random.RandomState(seed)
        hist = rng.normal(size=(2, length, d)).astype("float32")
        cand = rng.normal(size=(2, m, d)).astype("float32")
        valid = np.ones((2, length), bool)
        valid[1, :2] = False  # left padding on row 1
        hist_t = np.sort(rng.randint(10**9, 10**9 + 10**6, (2, length))).astype("int32")
        hist_t[~valid] = 0
        cand_t = np.repeat(hist_t[:, -1:] + 100, m, axis=1).astype("int32")
        cand_t[:, 0] = hist_t[:, 3]  # candidate 0 sees slots 0..2 only
        visible = valid[:, None, :] & (hist_t[:, None, :] < cand_t[:, :, None])
        return hist, cand, valid, visible, hist_t, cand_t

    def test_layer_basics(self):
        inputs = self.make_inputs()
        self.run_layer_test(
            HSTULayer,
            {"num_heads": 2, "attention_dim": 3, "linear_dim": 4, "sequence_length": 5},
            inputs,
            (2, 5, 6),
            expected_num_trainable_weights=6,
        )

    def test_matches_hstu_equations(self):
        heads, dqk, dv = 2, 3, 4
        inputs = self.make_inputs()
        hist, cand, valid, visible, hist_t, cand_t = inputs
        layer = HSTULayer(heads, dqk, dv, sequence_length=5)
        runner = LayerRunner(layer, *inputs)
        rng = np.random.RandomState(3)
        weights = {}
        for variable, name in (
            (layer.uvqk.kernel, "uvqk_kernel"), (layer.uvqk.bias, "uvqk_bias"),
            (layer.output_dense.kernel, "output_kernel"), (layer.output_dense.bias, "output_bias"),
            (layer.relative_bias.position_table, "position_table"), (layer.relative_bias.time_table, "time_table"),
        ):
            value = (0.5 * rng.normal(size=variable.shape)).astype("float32")
            variable.assign(value)
            weights[name] = value.astype("float64")
        out_h, out_c = runner(*inputs)
        for b in range(2):
            want_h, want_c = hstu_reference(
                hist[b], cand[b], valid[b], visible[b], hist_t[b], cand_t[b], weights, heads, dqk, dv
            )
            self.assertAllClose(out_h[b][valid[b]], want_h[valid[b]], atol=1e-4, rtol=1e-4)
            self.assertAllClose(out_c[b], want_c, atol=1e-4, rtol=1e-4)

    def test_candidates_are_independent_and_see_only_their_past(self):
        inputs = list(self.make_inputs())
        layer = HSTULayer(2, 3, 4, sequence_length=5)
        runner = LayerRunner(layer, *inputs)
        _, before = runner(*inputs)
        inputs[1] = inputs[1].copy()
        inputs[1][:, 1:] += 3.0  # other candidates
        inputs[0] = inputs[0].copy()
        inputs[0][:, 3:] += 5.0  # behaviours at or after candidate 0's time
        _, after = runner(*inputs)
        self.assertAllClose(after[:, 0], before[:, 0], atol=1e-5)
        self.assertFalse(np.allclose(to_numpy(after[:, 1]), to_numpy(before[:, 1])))

    def test_bad_sizes_are_one_line_errors(self):
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            HSTULayer(0, 3, 4, sequence_length=5)
        with self.assertRaisesRegex(ZooError, "linear_dim is -1"):
            HSTULayer(1, 3, -1, sequence_length=5)
