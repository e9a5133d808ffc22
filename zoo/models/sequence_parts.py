"""The check shared by the Transformer-family sequence baselines (bst, sasrec, transformer, llama, stca).

Each argument's own range is its rule in zoo.hyperparameters (checked by ZooModel); the Dice head comes from
baseline_parts; this is the check of several values the attention models add.
"""

from zoo.errors import ZooError


def check_heads(model, width, num_heads, rope=False, width_name="width"):
    """`width` divisible by num_heads (and an even head width for RoPE), else a one-line ZooError."""
    if width % num_heads:
        raise ZooError(f"{model}: {width_name} {width} is not divisible by num_heads {num_heads}")
    if rope and (width // num_heads) % 2:
        raise ZooError(f"{model}: {width_name} / num_heads = {width // num_heads} must be even for RoPE")
