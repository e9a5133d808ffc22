"""Argument checks shared by the Transformer-family sequence baselines (bst, sasrec, transformer, llama, stca).

The generic checks (sizes, hidden widths, Dice momentum) and the Dice head come from baseline_parts; these
are the two the attention models add.
"""

from zoo.errors import ZooError


def check_heads(model, width, num_heads, rope=False, width_name="width"):
    """`width` divisible by num_heads (and an even head width for RoPE), else a one-line ZooError."""
    if width % num_heads:
        raise ZooError(f"{model}: {width_name} {width} is not divisible by num_heads {num_heads}")
    if rope and (width // num_heads) % 2:
        raise ZooError(f"{model}: {width_name} / num_heads = {width // num_heads} must be even for RoPE")


def check_dropout(model, dropout):
    """dropout as a float in [0, 1)."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ZooError(f"{model}: dropout is {dropout!r}; it must lie in [0, 1)")
    return float(dropout)
