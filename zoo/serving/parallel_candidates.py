"""LightSUAN served the way SUAN was deployed (SUAN §3.3.1, §4.5): m2 candidates per parallel pass.

Signatures (the same function and inputs; `score_all` is kept for the clients that name it):
    serving_default  the Schema's inputs with any number M of candidates (cand_* [B, M], cand_time [B, M])
    score_all        -> pctr [B, M], rectified_pctr [B, M], repaired_ids [B], repaired_numerics [B]

Both run the model's `score_all` (keras.ops; the function `score_candidates` compiles in Python): each
request's history is encoded once (the history cache) and its candidates are scored in ceil(M / m2)
parallel passes inside the graph; the last pass is filled with placeholders, which never change a real
candidate's score. M = 0 returns pctr [B, 0]. `rectified_pctr` is the model's
(p / (p + (1 - p) / sample_rate), sample_rate from the preset), undoing the training data's negative
sampling. Both refuse a request whose shapes are not the declared ones with one line naming the key
(zoo/serving/shapes.py) and run the request guard first (zoo/serving/guard.py). Models declare this
signature when they register (lightsuan).

`serving_default` scores any M rather than refusing M != m2: it used to declare cand_* [B, m2] and,
since TF checks no declared shape, truncated a longer list to its first m2 candidates and filled a
shorter one with scores of placeholders, silently. Scoring any M loses nothing for a client that sends
m2 (the same single pass, the same scores) and gives every other client all its scores instead of an
error to handle; m2 stays the pass size, so a client that sends multiples of m2 wastes no placeholder.
"""

from keras import ops

from zoo.datasets.pipeline import tensor_specs
from zoo.models.suan import check_parallel_candidates
from zoo.serving import guard, plain, shapes


def endpoints(model, options):
    m2 = check_parallel_candidates(options.pop("m2", model.parallel_candidates))
    if options:
        plain.raise_unused(options, "parallel_candidates")

    def score(features):
        features, repaired = guard.repair(model.schema, features)
        # The history cache is exact with causal alignment pooling only (see SUAN.score_all).
        pctr = model.score_all(features, parallel_candidates=m2, use_cache=model.alignment_pool == "causal")
        # [B, M] stated: with M = 0 (no pass) score_all's reshape cannot infer B.
        pctr = ops.reshape(pctr, ops.shape(features["cand_time"]))
        return {"pctr": pctr, "rectified_pctr": model.rectified_pctr(pctr), **repaired}

    specs = tensor_specs(model.schema, any_candidates=True)
    score = shapes.checked(score, specs)
    return {"serving_default": (score, specs), "score_all": (score, specs)}
