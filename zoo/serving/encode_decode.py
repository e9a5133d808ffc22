"""ReST serving (§2.4): encode the history once per request, decode any number of candidates against it.

Signatures (a model declares "encode_decode" when it registers; `zoo.export` checks that):
    serving_default  the Schema's inputs -> pctr [B, M] (the full model)
    encode           hist_* [B, L], hist_time [B, L] -> memory [B, L, d] float32, memory_valid [B, L] bool
                     (`model.encoder()`)
    decode           memory, memory_valid, hist_time, cand_* [B, N], cand_time [B, N], user_*, ctx_*, num_*
                     -> pctr [B, N]; N is dynamic (`model.decoder(None)`), equal to the full model on
                     each candidate.
Each signature refuses a request whose shapes are not the declared ones with one line naming the key
(zoo/serving/shapes.py: a history or memory of another length than L, cand_* of different M, mismatched
batch sizes), runs the request guard (zoo/serving/guard.py) and also returns `repaired_ids` [B] and
`repaired_numerics` [B]; decode's `memory` is repaired as a numeric (NaN/inf -> 0, +-1e9 clip).
"""

from zoo.datasets.pipeline import tensor_specs
from zoo.serving import guard, plain, shapes


def endpoints(model, options):
    if options:
        plain.raise_unused(options, "encode_decode")
    import tensorflow as tf

    schema = model.schema
    dynamic = tensor_specs(schema, any_candidates=True)  # N candidates per request, any N
    encoder, decoder = model.encoder(), model.decoder(None)
    length, width = schema.sequence_length, model.model_dim

    def encode(features):
        features, repaired = guard.repair(schema, features)
        return {**encoder(features, training=False), **repaired}

    def decode(features):
        features, repaired = guard.repair(schema, features, numeric_keys=("memory",))
        return {"pctr": decoder(features, training=False), **repaired}

    decode_signature = {k: v for k, v in dynamic.items() if not k.startswith("hist") or k == "hist_time"}
    decode_signature["memory"] = tf.TensorSpec((None, length, width), "float32", name="memory")
    decode_signature["memory_valid"] = tf.TensorSpec((None, length), "bool", name="memory_valid")
    encode_signature = {k: v for k, v in dynamic.items() if k.startswith("hist")}
    endpoints = plain.endpoints(model, {})
    endpoints["encode"] = (shapes.checked(encode, encode_signature), encode_signature)
    endpoints["decode"] = (shapes.checked(decode, decode_signature), decode_signature)
    return endpoints
