import numpy as np

from tests.references import layer_norm, sigmoid
from tests.testing import TestCase, to_numpy
from zoo import ZooError
from zoo.layers.pfkv import PFKVDecoderLayer


def pfkv_reference(z, memory, allowed, w, num_heads):
    """ReST §2.2 in NumPy, one query token at a time, the token's type i selecting its parameters:
    CrossAttn(z, H) = [softmax((z W_Q^i) H^T / sqrt(d_h)) H ⊙ σ(z W_go^i)] W_o   (K = V = H),
    F_i(x) = (SiLU(x W_1^i) ⊙ x W_3^i) W_2^i;  z += CrossAttn(LN(z), H);  z += F_i(LN(z))."""
    batch, m, k, d = z.shape
    dh = d // num_heads
    out = np.zeros_like(z, dtype="float64")
    for b in range(batch):
        H = memory[b].astype("float64")
        for s in range(m):
            keys = np.flatnonzero(allowed[b, s])
            for i in range(k):
                x = z[b, s, i].astype("float64")
                n = layer_norm(x)
                q = n @ w["w_q"][i]
                context = np.zeros(d)
                for h in range(num_heads):
                    cols = slice(h * dh, (h + 1) * dh)
                    if keys.size:
                        scores = H[keys][:, cols] @ q[cols] / np.sqrt(dh)
                        p = np.exp(scores - scores.max())
                        context[cols] = (p / p.sum()) @ H[keys][:, cols]
                x = x + (context * sigmoid(n @ w["w_go"][i])) @ w["w_o"]
                n = layer_norm(x)
                a = n @ w["w_1"][i]
                out[b, s, i] = x + (a * sigmoid(a) * (n @ w["w_3"][i])) @ w["w_2"][i]
    return out


NAMES = ("w_q", "w_go", "w_o", "w_1", "w_3", "w_2")
rng = np.random.RandomState(0)
Z = rng.normal(size=(2, 3, 4, 8)).astype("float32")  # B=2, M=3 samples, K=4 token types, d=8
MEMORY = rng.normal(size=(2, 5, 8)).astype("float32")
ALLOWED = np.array(
    [[[0, 1, 1, 0, 0], [0, 1, 1, 1, 1], [0, 0, 0, 0, 0]], [[1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [0, 0, 1, 1, 0]]],
    bool,
)


def built_layer(seed):
    layer = PFKVDecoderLayer(num_heads=2, num_token_types=4, ffn_dim=6)
    layer.build(Z.shape)
    r = np.random.RandomState(seed)
    w = {
        "w_q": r.normal(0, 0.4, (4, 8, 8)), "w_go": r.normal(0, 0.4, (4, 8, 8)), "w_o": r.normal(0, 0.4, (8, 8)),
        "w_1": r.normal(0, 0.4, (4, 8, 6)), "w_3": r.normal(0, 0.4, (4, 8, 6)), "w_2": r.normal(0, 0.4, (4, 6, 8)),
    }
    w = {n: v.astype("float32") for n, v in w.items()}
    ones, zeros = np.ones(8, "float32"), np.zeros(8, "float32")
    layer.set_weights([w[n] for n in NAMES] + [ones, zeros, ones, zeros])
    return layer, w


class PFKVDecoderLayerTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            PFKVDecoderLayer,
            {"num_heads": 2, "num_token_types": 4, "ffn_dim": 6},
            (Z, MEMORY, ALLOWED),
            (2, 3, 4, 8),
        )

    def test_matches_reference_with_token_specific_parameters(self):
        layer, w = built_layer(seed=1)
        self.assertAllClose(layer(Z, MEMORY, ALLOWED), pfkv_reference(Z, MEMORY, ALLOWED, w, 2), atol=1e-4)

    def test_token_types_use_their_own_parameters(self):
        layer, w = built_layer(seed=2)
        before = to_numpy(layer(Z, MEMORY, ALLOWED))
        w["w_q"][3] += 1.0  # change only the candidate type's W_Q
        w["w_2"][3] += 1.0  # and its FFN
        layer.set_weights([w[n] for n in NAMES] + layer.get_weights()[6:])
        after = to_numpy(layer(Z, MEMORY, ALLOWED))
        np.testing.assert_array_equal(after[:, :, :3], before[:, :, :3])
        self.assertGreater(np.abs(after[:, :, 3] - before[:, :, 3]).max(), 1e-2)

    def test_has_no_key_or_value_projection(self):
        layer, _ = built_layer(seed=3)
        names = sorted({v.path.split("/")[-1] for v in layer.weights})
        self.assertEqual(names, ["beta", "gamma", "w_1", "w_2", "w_3", "w_go", "w_o", "w_q"])
        # K types x (W_Q, W_go: d x d; FFN: 3 d f) + shared W_o + two LayerNorms
        self.assertEqual(layer.count_params(), 4 * (2 * 64 + 3 * 48) + 64 + 2 * 16)

    def test_no_allowed_memory_gives_zero_attention(self):
        layer, w = built_layer(seed=4)
        none = np.zeros_like(ALLOWED)
        z = layer.attention_norm(Z)
        np.testing.assert_array_equal(to_numpy(layer.cross_attention(z, MEMORY, none)), 0.0)

    def test_bad_token_shape_is_a_clear_error(self):
        with self.assertRaisesRegex(
            ZooError,
            r"^PFKVDecoderLayer: the query tokens must be \[B, M, 3, d\] with d divisible by 2 heads, "
            r"got \[2, 3, 4, 8\]$",
        ):
            PFKVDecoderLayer(num_heads=2, num_token_types=3, ffn_dim=6)(Z, MEMORY, ALLOWED)
        with self.assertRaisesRegex(ZooError, r"d divisible by 3 heads"):
            PFKVDecoderLayer(num_heads=3, num_token_types=4, ffn_dim=6)(Z, MEMORY, ALLOWED)
