"""ReST serving (§2.4): encode the history once per request, decode any number of candidates against it.

Signatures:
    serving_default  the Schema's inputs -> pctr [B, M] (the full model)
    encode           hist_* [B, L], hist_time [B, L] -> memory [B, L, d] float32, memory_valid [B, L] bool
    decode           memory, memory_valid, hist_time, cand_* [B, N], cand_time [B, N], user_*, ctx_*, num_*
                     -> pctr [B, N]; N is dynamic, equal to the full model on each candidate.
"""

from zoo.errors import ZooError
from zoo.serving import plain


def endpoints(model, options):
    if getattr(model, "registered_name", None) != "rest" or not hasattr(model, "encoder"):
        raise ZooError(
            f"signature 'encode_decode' serves rest; {getattr(model, 'registered_name', model.name)} "
            "exports with serving_default"
        )
    if options:
        plain.raise_unused(options, "encode_decode")
    import tensorflow as tf

    from zoo.models.rest import _embed, decode_candidates

    schema = model.schema
    dynamic = plain.input_signature(schema, num_candidates=None)
    for key in dynamic:  # N candidates per request, any N
        if key.startswith("cand_"):
            dynamic[key] = tf.TensorSpec((None, None), dynamic[key].dtype, name=key)
    encoder = model.encoder()
    length, width = schema.sequence_length, model.model_dim

    def encode(features):
        return dict(encoder(features, training=False))

    def decode(features):
        parts = model.parts()
        inputs = {k: v for k, v in features.items() if k not in ("memory", "memory_valid")}
        embedded = _embed(parts, schema, inputs)
        outputs = decode_candidates(
            parts, schema, features["memory"], features["memory_valid"], features["hist_time"], embedded,
            features["cand_time"],
        )
        return {"pctr": outputs["pctr"]}

    decode_signature = {k: v for k, v in dynamic.items() if not k.startswith("hist") or k == "hist_time"}
    decode_signature["memory"] = tf.TensorSpec((None, length, width), "float32", name="memory")
    decode_signature["memory_valid"] = tf.TensorSpec((None, length), "bool", name="memory_valid")
    endpoints = plain.endpoints(model, {})
    endpoints["encode"] = (encode, {k: v for k, v in dynamic.items() if k.startswith("hist")})
    endpoints["decode"] = (decode, decode_signature)
    return endpoints
