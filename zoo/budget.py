"""The resource budget: the largest size a spec, a model's schema, a config, a preset or a request may name,
in one place, checked before anything of that size is allocated. A value past its budget is refused in
one line naming the value and the budget; raise the entry here (`zoo.budget.BUDGET[name] = ...`, before
the call) for a deliberately larger run.

    sequence_length      L of a schema or spec: the histories' length (memory and time grow with L, and
                         with L^2 in the self-attention models)
    num_candidates       M a schema is built for (LightSUAN's parallel candidates, a decoder's)
    embedding_dim        a feature's embedding width
    vocabulary_size      rows of one embedding table (2^25 = 33.5M: 1 GB at width 8 in float32, 3 GB with
                         Adam's two moments); a spec's hash_buckets and max_size take 2^24 (the table
                         adds its padding and OOV rows)
    buckets              a numeric's equal-frequency buckets
    negatives            sampled negatives per event (the rows grow (N + 1)-fold)
    parameters           weights of one model (4 GB in float32; zoo.presets.MAX_PARAMETERS)
    request_scores       B x M: the (row, candidate) scores one request to a SavedModel may ask for
                         (about 18 KB each in LightSUAN's raw signature: 1.2 GB at the budget)
    request_values       values of any one input of a request (B x L of a history, B x H of the raw
                         signature's history columns, ...)
    step_memory          bytes of activations one training or scoring step may hold (`step_bytes`: L and
                         the batch's rows, with L^2 per head and layer in the attention models); None:
                         80% of the memory this machine has available when the step is planned
"""

import os

from zoo.errors import ZooError

BUDGET = {
    "sequence_length": 4_096,
    "num_candidates": 4_096,
    "embedding_dim": 1_024,
    "vocabulary_size": 1 << 25,
    "hash_buckets": 1 << 24,
    "buckets": 10_000,
    "negatives": 100,
    "parameters": 10**9,
    "request_scores": 1 << 16,
    "request_values": 1 << 20,
    "step_memory": None,
}
STEP_FRACTION = 0.8  # of the available memory, when BUDGET["step_memory"] is None


def check(name, value, where):
    """Refuses `value` past BUDGET[name]: ZooError "<where>: <value> is past the budget of <budget> (...)"."""
    if value is not None and value > BUDGET[name]:
        raise ZooError(f"{where}: {value:,} is past the budget of {BUDGET[name]:,} (zoo/budget.py BUDGET['{name}'])")


def available_memory():
    """Bytes this machine has available now (Linux's MemAvailable; else the physical memory)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def step_bytes(model, rows, training):
    """(bytes, what) of the activations one step of `model` holds on `rows` rows, a lower estimate: per row,
    every history position's states through each layer (8 x width floats: projections, feed-forward, norms)
    plus each candidate's read of the history (M x L x width), and in the attention models the scores and
    their softmax, 2 x H x layers x `model.attention_scores(L, M, F, hyperparameters)` (L^2 per head and
    layer for self-attention over the history); 4 bytes a float, x 3 when training (the forward's values
    kept for the backward, and their gradients). `what` says which term dominates, in the user's terms."""
    schema = model.schema
    L, M = schema.sequence_length, schema.num_candidates
    hp = {name: getattr(model, name, None) for name in model.hyperparameter_names() if name != "schema"}
    heads = hp.get("num_heads") or 1
    layers = sum(hp.get(name) or 0 for name in ("num_layers", "encoder_depth", "decoder_depth")) or 1
    history = schema.group("hist")
    fields = len(schema.features) - len(history)
    width = max(hp.get("width") or hp.get("model_dim") or 0, sum(f.embedding_dim for f in history))
    states = (8 * layers * L * width + M * L * width) if history else 0
    scores = 2 * heads * layers * model.attention_scores(L, M, fields, hp)
    factor = 3 if training else 1
    what = (f"{heads} head(s) x {layers} layer(s) of attention scores over L = {L:,}" if scores > states else
            f"the states of {L:,} history positions x {layers} layer(s) at width {width}")
    return (states + scores) * rows * 4 * factor, what


def check_step(model, rows, training, where):
    """Refuses a step whose `step_bytes` pass BUDGET["step_memory"] (default: STEP_FRACTION of the memory
    available now), before anything of that size is allocated: one line naming the model, L, the rows of a
    batch, the estimate and what to lower."""
    if not rows or getattr(model, "schema", None) is None or not hasattr(model, "attention_scores"):
        return
    size, what = step_bytes(model, rows, training)
    limit = BUDGET["step_memory"]
    if limit is None:
        limit, free = int(available_memory() * STEP_FRACTION), "this machine's available memory"
    else:
        free = "the budget (zoo/budget.py BUDGET['step_memory'])"
    if size > limit:
        raise ZooError(
            f"{where}: {model.registered_name} at sequence_length {model.schema.sequence_length:,} with "
            f"{rows:,} rows a batch would hold about {size / 2**30:,.1f} GiB a {'training' if training else 'scoring'} "
            f"step ({what}), past {free} ({limit / 2**30:,.1f} GiB): lower sequence_length or the batch size")
