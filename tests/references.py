"""NumPy references shared by several tests (one equation, one function)."""

import numpy as np
from scipy.special import erf

from tests.testing import to_numpy


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def block_weights(logits, weighting):
    """DeRes eq 4 (softmax over the blocks, last axis), eq 8 (SiLU) or ReLU of the block logits."""
    if weighting == "softmax":
        return softmax(logits)
    if weighting == "silu":
        return logits * sigmoid(logits)
    return np.maximum(logits, 0.0)


def rms_norm(x, eps=1e-6):
    """RMSNorm with unit scale: x / sqrt(mean(x^2) + eps) over the last axis."""
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)


def layer_norm(x, gamma=1.0, beta=0.0, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def multi_head_attention(x, valid, wq, bq, wk, bk, wv, bv, wo, bo):
    """softmax(Q K^T / sqrt(k)) V per head, keys restricted to valid tokens, then the output projection.

    x [B, n, w]; wq, wk, wv [w, H, K]; bq, bk, bv [H, K]; wo [H, K, w]; bo [w]; valid [B, n] bool.
    """
    q = np.einsum("bnw,whk->bhnk", x, wq) + bq[None, :, None, :]
    k = np.einsum("bnw,whk->bhnk", x, wk) + bk[None, :, None, :]
    v = np.einsum("bnw,whk->bhnk", x, wv) + bv[None, :, None, :]
    logits = np.einsum("bhik,bhjk->bhij", q, k) / np.sqrt(q.shape[-1])
    if valid is not None:
        logits = np.where(valid[:, None, None, :], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bhij,bhjk->bhik", weights, v)
    return np.einsum("bhnk,hkw->bnw", heads, wo) + bo


PRE_NORM_WEIGHTS = (
    "attention_norm_gamma", "attention_norm_beta", "ffn_norm_gamma", "ffn_norm_beta",
    "query_kernel", "query_bias", "key_kernel", "key_bias", "value_kernel", "value_bias", "output_kernel", "output_bias",
    "ffn_hidden_kernel", "ffn_hidden_bias", "ffn_output_kernel", "ffn_output_bias",
)


def pre_norm_branch(x, valid, weights, eps=1e-6):
    """DeRes eq 1 (Pre-Norm Transformer layer, LayerNorm, GELU FFN), returned as X' - X.

    `weights` maps the names of PRE_NORM_WEIGHTS to one layer's arrays.
    """
    w = weights
    attended = multi_head_attention(
        layer_norm(x, w["attention_norm_gamma"], w["attention_norm_beta"], eps), valid,
        w["query_kernel"], w["query_bias"], w["key_kernel"], w["key_bias"], w["value_kernel"], w["value_bias"],
        w["output_kernel"], w["output_bias"],
    )
    y = x + attended
    hidden = gelu(layer_norm(y, w["ffn_norm_gamma"], w["ffn_norm_beta"], eps) @ w["ffn_hidden_kernel"] + w["ffn_hidden_bias"])
    return y + hidden @ w["ffn_output_kernel"] + w["ffn_output_bias"] - x


def deres_layer_branch(layer, x, valid):
    """pre_norm_branch with the weights of a DeResTransformerLayer, in float64."""
    weights = {name: to_numpy(getattr(layer, name)).astype("float64") for name in PRE_NORM_WEIGHTS}
    return pre_norm_branch(np.asarray(x, "float64"), valid, weights, layer.epsilon)
