"""LightSUAN served the way SUAN was deployed (SUAN §3.3.1, §4.5): m2 candidates per parallel pass.

Signatures:
    serving_default  the Schema's inputs with m2 candidates (cand_* [B, m2], cand_time [B, m2])
                     -> pctr [B, m2], rectified_pctr [B, m2], repaired_ids [B], repaired_numerics [B]
    score_all        the same inputs with any number m1 of candidates (cand_* [B, m1])
                     -> pctr [B, m1], rectified_pctr [B, m1], repaired_ids [B], repaired_numerics [B]

Both run the model's `score_all` (keras.ops; the function `score_candidates` compiles in Python): each
request's history is encoded once (the history cache) and its candidates are scored in
ceil(m1 / m2) parallel passes inside the graph (one pass for serving_default); the last pass is filled
with placeholders, which never change a real candidate's score. `rectified_pctr` is the model's
(p / (p + (1 - p) / sample_rate), sample_rate from the preset), undoing the training data's negative
sampling. Both run the request guard first (zoo/serving/guard.py). Models declare this signature when
they register (lightsuan).
"""

from zoo.datasets.pipeline import tensor_specs
from zoo.models.suan import check_parallel_candidates
from zoo.serving import guard, plain


def endpoints(model, options):
    m2 = check_parallel_candidates(options.pop("m2", model.parallel_candidates))
    if options:
        plain.raise_unused(options, "parallel_candidates")

    def score(features):
        features, repaired = guard.repair(model.schema, features)
        # The history cache is exact with causal alignment pooling only (see SUAN.score_all).
        pctr = model.score_all(features, parallel_candidates=m2, use_cache=model.alignment_pool == "causal")
        return {"pctr": pctr, "rectified_pctr": model.rectified_pctr(pctr), **repaired}

    return {
        "serving_default": (score, tensor_specs(model.schema, num_candidates=m2)),
        "score_all": (score, tensor_specs(model.schema, any_candidates=True)),
    }
