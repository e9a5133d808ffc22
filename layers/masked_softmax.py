"""The masked softmax every attention layer of the zoo uses (SUAN eq 5, ReST §2.1-2.2, DeRes eq 1)."""

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
