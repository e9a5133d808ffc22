import numpy as np
from scipy.special import erf

from tests.testing import TestCase
from zoo.layers.deres_transformer_layer import DeResTransformerLayer


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def multi_head_attention(x, valid, wq, bq, wk, bk, wv, bv, wo, bo):
    """softmax(Q K^T / sqrt(k)) V per head, keys restricted to valid tokens, then the output projection."""
    q = np.einsum("bnw,whk->bhnk", x, wq) + bq[None, :, None, :]
    k = np.einsum("bnw,whk->bhnk", x, wk) + bk[None, :, None, :]
    v = np.einsum("bnw,whk->bhnk", x, wv) + bv[None, :, None, :]
    logits = np.einsum("bhik,bhjk->bhij", q, k) / np.sqrt(q.shape[-1])
    logits = np.where(valid[:, None, None, :], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bhij,bhjk->bhik", weights, v)
    return np.einsum("bhnk,hkw->bnw", heads, wo) + bo


def reference_branch(x, valid, weights, eps):
    """DeRes eq 1 (Pre-Norm, LayerNorm), returned as X' - X."""
    (g1, b1, g2, b2, wq, bq, wk, bk, wv, bv, wo, bo, w1, c1, w2, c2) = weights
    attended = multi_head_attention(layer_norm(x, g1, b1, eps), valid, wq, bq, wk, bk, wv, bv, wo, bo)
    y = x + attended
    out = y + gelu(layer_norm(y, g2, b2, eps) @ w1 + c1) @ w2 + c2
    return out - x


class DeResTransformerLayerTest(TestCase):
    def test_layer_basics(self):
        x = np.random.rand(2, 5, 6).astype("float32")
        valid = np.array([[True] * 5, [False, True, True, True, True]])
        self.run_layer_test(
            DeResTransformerLayer, {"num_heads": 2, "key_dim": 4, "ffn_units": 12}, (x,), (2, 5, 6),
            call_kwargs={"valid": valid},
        )

    def test_matches_numpy_pre_norm_layer(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 5, 6)).astype("float32")
        valid = np.array([[True, True, True, True, True], [False, False, True, True, True]])
        layer = DeResTransformerLayer(num_heads=2, key_dim=3, ffn_units=8, epsilon=1e-6)
        layer(x, valid=valid)
        norm1, norm2 = layer.attention_norm, layer.ffn_norm
        values = {}
        for w in layer.weights:
            values[w.path] = (1.0 + 0.1 * rng.normal(size=w.shape) if "gamma" in w.path else 0.4 * rng.normal(size=w.shape)).astype("float32")
            w.assign(values[w.path])
        ordered = [norm1.gamma, norm1.beta, norm2.gamma, norm2.beta] + layer.attention.weights + [
            layer.ffn_hidden.kernel, layer.ffn_hidden.bias, layer.ffn_output.kernel, layer.ffn_output.bias,
        ]
        expected = reference_branch(x, valid, [values[w.path] for w in ordered], 1e-6)
        self.assertAllClose(layer(x, valid=valid), expected, atol=1e-4)

    def test_padding_tokens_do_not_reach_valid_ones(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(1, 4, 6)).astype("float32")
        valid = np.array([[False, True, True, True]])
        layer = DeResTransformerLayer(num_heads=2, key_dim=3, ffn_units=8)
        changed = x.copy()
        changed[0, 0] += 5.0
        self.assertAllClose(layer(x, valid=valid)[:, 1:], layer(changed, valid=valid)[:, 1:], atol=1e-5)
