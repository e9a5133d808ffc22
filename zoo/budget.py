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
"""

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
}


def check(name, value, where):
    """Refuses `value` past BUDGET[name]: ZooError "<where>: <value> is past the budget of <budget> (...)"."""
    if value is not None and value > BUDGET[name]:
        raise ZooError(f"{where}: {value:,} is past the budget of {BUDGET[name]:,} (zoo/budget.py BUDGET['{name}'])")
