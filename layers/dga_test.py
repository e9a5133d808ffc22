import numpy as np

from layers.rote_test import rotation
from tests.references import sigmoid
from tests.testing import TestCase, to_numpy
from zoo import ZooError
from zoo.layers.dga import DualGatedAttention


def dga_reference(x, valid, w, num_heads, causal=True, positions=None):
    """ReST §2.1 in NumPy, one row and one head at a time:
    H = Attention(XW_Q, XW_K, σ(XW_gv) ⊙ XW_V); out = (H ⊙ σ(XW_go)) W_o."""
    batch, length, d = x.shape
    dh = d // num_heads
    out = np.zeros_like(x, dtype="float64")
    for b in range(batch):
        X = x[b].astype("float64")
        Q, K = X @ w["w_q"], X @ w["w_k"]
        V = sigmoid(X @ w["w_gv"]) * (X @ w["w_v"])
        H = np.zeros((length, d))
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            for i in range(length):
                q = Q[i, cols]
                if positions is not None:
                    q = rotation(positions[b, i, h], dh) @ q
                keys = [j for j in range(length) if valid[b, j] and (not causal or j <= i)]
                if not keys:
                    continue  # a query with no allowed key outputs zeros
                scores = []
                for j in keys:
                    k = K[j, cols]
                    if positions is not None:
                        k = rotation(positions[b, j, h], dh) @ k
                    scores.append(q @ k / np.sqrt(dh))
                p = np.exp(np.array(scores) - max(scores))
                p /= p.sum()
                H[i, cols] = sum(pj * V[j, cols] for pj, j in zip(p, keys))
        out[b] = (H * sigmoid(X @ w["w_go"])) @ w["w_o"]
    return out


def random_weights(d, seed=0):
    rng = np.random.RandomState(seed)
    return {n: rng.normal(0, 0.4, (d, d)).astype("float32") for n in ("w_q", "w_k", "w_v", "w_gv", "w_go", "w_o")}


def set_dga_weights(layer, w):
    layer.set_weights([w[n] for n in ("w_q", "w_k", "w_v", "w_gv", "w_go", "w_o")])


X = np.random.RandomState(1).normal(size=(3, 5, 8)).astype("float32")
VALID = np.array([[False, False, True, True, True], [True] * 5, [False] * 5])  # left-padded, full, empty
TIME = np.array(
    [[0, 0, 1_700_000_000, 1_700_000_100, 1_700_090_000],
     [1_600_000_000, 1_600_000_001, 1_600_003_600, 1_600_003_600, 1_600_700_000],
     [0] * 5], dtype="int64")


class DualGatedAttentionTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            DualGatedAttention,
            {"num_heads": 2, "time_granularities": [0, 3600]},
            (X, VALID, TIME),
            (3, 5, 8),
        )

    def test_matches_reference_causal_with_padding(self):
        layer = DualGatedAttention(num_heads=2)
        layer.build(X.shape)
        w = random_weights(8)
        set_dga_weights(layer, w)
        self.assertAllClose(layer(X, VALID), dga_reference(X, VALID, w, 2), atol=1e-5)

    def test_matches_reference_bidirectional(self):
        layer = DualGatedAttention(num_heads=4, causal=False)
        layer.build(X.shape)
        w = random_weights(8, seed=3)
        set_dga_weights(layer, w)
        self.assertAllClose(layer(X, VALID), dga_reference(X, VALID, w, 4, causal=False), atol=1e-5)

    def test_matches_reference_with_rope_and_rote_heads(self):
        layer = DualGatedAttention(num_heads=2, time_granularities=[0, 60])
        layer.build(X.shape)
        w = random_weights(8, seed=4)
        set_dga_weights(layer, w)
        first = np.argmax(VALID, axis=1)
        elapsed = np.where(VALID, TIME - TIME[np.arange(3), first][:, None], 0)
        positions = np.stack([np.tile(np.arange(5), (3, 1)), elapsed // 60], axis=-1)
        expected = dga_reference(X, VALID, w, 2, positions=positions)
        self.assertAllClose(layer(X, VALID, TIME), expected, atol=1e-5)

    def test_query_without_allowed_key_outputs_zeros(self):
        out = to_numpy(DualGatedAttention(num_heads=2)(X, VALID))
        np.testing.assert_array_equal(out[2], 0.0)  # empty history
        np.testing.assert_array_equal(out[0, :2], 0.0)  # padding queries see no real behaviour

    def test_bad_head_count_is_a_clear_error(self):
        message = "^DualGatedAttention: time_granularities has 2 entries but num_heads is 3$"
        with self.assertRaisesRegex(ZooError, message):
            DualGatedAttention(num_heads=3, time_granularities=[0, 1])
        with self.assertRaisesRegex(ZooError, r"^DualGatedAttention: width 8 does not split into 3 heads$"):
            DualGatedAttention(num_heads=3)(X, VALID)
        with self.assertRaisesRegex(ZooError, r"heads of even width \(RoPE/RoTE rotate pairs\)$"):
            DualGatedAttention(num_heads=8, time_granularities=[0] * 8)(X, VALID, TIME)
