"""The masked softmax every attention layer of the zoo uses (SUAN eq 5, ReST §2.1-2.2, DeRes eq 1), and the
scaled dot-product attention built on it."""

import keras
from keras import ops

NEG_INF = -1e9


def masked_softmax(logits, allowed):
    """softmax(logits) over the keys where `allowed` is True, along the last axis.

    `allowed` is boolean and broadcasts against `logits` (e.g. [B, 1, Lq, Lk] against [B, H, Lq, Lk]).
    Disallowed keys get weight exactly 0, and a query with no allowed key at all gets all-zero weights
    (not a uniform average over padding), so fully padded rows contribute nothing downstream.
    """
    allowed = ops.cast(allowed, "bool")
    # In float32 even under mixed precision: -1e9 is -inf in float16, and a row of -inf is NaN.
    probs = ops.softmax(ops.where(allowed, ops.cast(logits, "float32"), NEG_INF), axis=-1)
    return ops.cast(probs * ops.cast(allowed, probs.dtype), logits.dtype)


def masked_attention(query, key, value, allowed, scale, bias=None):
    """masked_softmax(scale · Q K^T + bias, allowed) V, per head: [B, Lq, H, D] from query [B, Lq, H, D],
    key and value [B, Lk, H, D], `allowed` boolean broadcasting to [B, H, Lq, Lk] (or None: every key) and
    `bias` to [B, H, Lq, Lk] (or None).

    Under torch in float32 this is `keras.ops.dot_product_attention` (torch's fused
    scaled_dot_product_attention: one kernel forward and one backward instead of about ten eager ones;
    2.7-6x faster at [1024, 2, 50, 32], `layers/masked_softmax_test.py` checks the results agree), with the
    mask folded into the bias and a query that has no allowed key set to zeros, as masked_softmax gives.
    Every other case runs the einsums around `masked_softmax` (XLA fuses them already).
    """
    if keras.backend.backend() == "torch" and query.dtype == key.dtype == value.dtype and \
            keras.backend.standardize_dtype(query.dtype) == "float32":
        folded = None if bias is None else ops.cast(bias, "float32")
        if allowed is not None:
            allowed = ops.cast(allowed, "bool")
            folded = ops.where(allowed, 0.0 if folded is None else folded, NEG_INF)
        out = ops.dot_product_attention(query, key, value, bias=folded, scale=scale)
        if allowed is None:
            return out
        # [B, 1 or H, Lq] -> [B, Lq, 1 or H, 1]: zero where a query has no allowed key
        anything = ops.cast(ops.any(allowed, axis=-1), out.dtype)
        return out * ops.expand_dims(ops.moveaxis(anything, 1, 2), -1)
    return einsum_attention(query, key, value, allowed, scale, bias)


def einsum_attention(query, key, value, allowed, scale, bias=None):
    """`masked_attention` as einsums around masked_softmax, on every backend."""
    logits = ops.einsum("bqhd,bkhd->bhqk", query, key) * scale
    if bias is not None:
        logits = logits + ops.cast(bias, logits.dtype)
    weights = ops.softmax(logits, axis=-1) if allowed is None else masked_softmax(logits, allowed)
    return ops.einsum("bhqk,bkhd->bqhd", weights, value)
