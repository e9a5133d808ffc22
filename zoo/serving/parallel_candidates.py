"""LightSUAN served the way SUAN was deployed (SUAN §3.3.1, §4.5): m2 candidates per parallel pass.

Signatures:
    serving_default  the Schema's inputs with m2 candidates (cand_* [B, m2], cand_time [B, m2])
                     -> pctr [B, m2], rectified_pctr [B, m2]
    score_all        the same inputs with any number m1 of candidates (cand_* [B, m1])
                     -> pctr [B, m1], rectified_pctr [B, m1]

`score_all` encodes each request's history once (the history cache) and scores its candidates in
ceil(m1 / m2) parallel passes inside the graph; the last pass is filled with placeholders, which never
change a real candidate's score (each candidate attends to the history and itself only).
rectified_pctr = p / (p + (1 - p) / sample_rate) undoes the training data's negative sampling
(sample_rate from the preset).
"""

from zoo.errors import ZooError
from zoo.serving import plain


def endpoints(model, options):
    name = getattr(model, "registered_name", None)
    if not hasattr(model, "parallel_candidates"):
        raise ZooError(
            f"signature 'parallel_candidates' serves lightsuan and distilsuan; {name} exports with serving_default"
        )
    m2 = options.pop("m2", model.parallel_candidates)
    if options:
        plain.raise_unused(options, "parallel_candidates")
    if not isinstance(m2, int) or m2 < 1:
        raise ZooError(f"m2 is {m2!r}; it must be an integer >= 1")
    import tensorflow as tf

    schema = model.schema
    sample_rate = float(model.sample_rate)
    cand_keys = [k for k in schema.keys() if k.startswith("cand_")]

    def outputs(pctr):
        return {"pctr": pctr, "rectified_pctr": pctr / (pctr + (1.0 - pctr) / sample_rate)}

    def serve(features):
        return outputs(model.score_part("full", features))

    def score_all(features):
        reference = features[cand_keys[0]]
        batch, m1 = tf.shape(reference)[0], tf.shape(reference)[1]
        passes = (m1 + m2 - 1) // m2
        stand_in = {k: features[k][:, :1] for k in cand_keys}
        cache = model.score_part("history", {**{k: v for k, v in features.items() if k not in cand_keys}, **stand_in})
        # Pass p of request b becomes row b * passes + p: repeat the request's cache once per pass.
        cache = {k: tf.repeat(v, passes, axis=0) for k, v in cache.items()}
        chunks = {
            k: tf.reshape(tf.pad(features[k], [[0, 0], [0, passes * m2 - m1]]), [batch * passes, m2])
            for k in cand_keys
        }
        others = {
            k: tf.zeros([batch * passes, 1] if k.startswith("hist") else [batch * passes], v.dtype)
            for k, v in features.items()
            if k not in cand_keys
        }
        pctr = model.score_part("candidates", {**others, **cache, **chunks})  # [B * passes, m2]
        return outputs(tf.reshape(pctr, [batch, passes * m2])[:, :m1])

    dynamic = plain.input_signature(schema)
    for key in cand_keys:
        dynamic[key] = tf.TensorSpec((None, None), dynamic[key].dtype, name=key)
    return {
        "serving_default": (serve, plain.input_signature(schema, num_candidates=m2)),
        "score_all": (score_all, dynamic),
    }
