"""ReST (Chen et al., 2026): a heavy behaviour encoder T computed once per user, a light cross decoder C
per candidate. Training-only parts live in `zoo.recipes.rest_training`."""

import weakref

import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dga import DualGatedAttention
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.pfkv import PFKVDecoderLayer
from zoo.layers.prefix_valid_mask import PrefixValidMask
from zoo.layers.swiglu import SwiGLU
from zoo.layers.rote import default_granularities
from zoo.layers.srn import SRN
from zoo.models.zoo_model import ZooModel
from zoo.registry import register
from zoo.schema import Schema

_SERVING = weakref.WeakKeyDictionary()  # model -> {"encoder": Model, ("decoder", N): Model}


@register(
    "rest",
    description="ReST: DGA + RoPE/RoTE + SRN behaviour encoder, PF-KV cross decoder with token-specific "
    "parameters; encode once, decode many candidates",
    paper="Chen et al., From Language to Behavior: Scaling Sequence Transformers for Industrial "
    "Recommendation Ranking with Rec-Native Designs, arXiv:2609.01240, 2026",
)
@keras.saving.register_keras_serializable(package="zoo")
class ReST(ZooModel):
    """ReST (§2.1-2.2, §2.4), inference graph. Output `pctr` [B, M].

    Encoder T (§2.1), over the behaviour tokens only: x = Dense_d(hist tokens), then per layer
    l = 1..encoder_depth: x = SRN_l(DGA)(x), x = SRN_l(SwiGLU FFN)(x) with causal + padding masks,
    RoPE/RoTE heads (`time_granularities`, default one RoPE head then s/min/h/day/week/quarter/year)
    and SRN Post-LN for l <= L_switch = max(1, round(depth / 4)), Pre-LN after; H = LN(x).

    Decoder C (§2.2): query tokens [CLS] (learned), context (ctx + num features), user, candidate,
    each projected to d; `decoder_depth` PF-KV layers (K = V = H, token-specific W_Q, output gate and
    FFN). Sample m reads only the real behaviours before its own time `cand_time[m]` (the prefix-valid
    mask, §2.4), so a row with M samples of one user over the union of their histories is user-level
    shared-prefix training (ULT), and every candidate of an ordinary request sees its whole history.
    Head: MLP(concat of the K decoded tokens) -> sigmoid.

    Serving (§2.4): `encode(features)` runs T once per request, `decode(state, candidates)` scores N
    candidates with C; `encoder()` / `decoder(N)` return those sub-models (same layers, same weights).
    Training-only parts (aux seq-CVR head g_seq, alignment projections) are not here: wrap the model in
    `zoo.recipes.rest_training.ReSTTrainer` to train with them; this model alone is what presets and
    export carry.

    Histories must be sorted oldest first (equal times allowed; ties keep their order): `score`,
    `encode` and `decode` raise a ZooError on an unsorted row; `fit` cannot check inside the graph, so
    run `check_histories` on new data. Empty histories are valid (the decoder then reads nothing).

    Args:
        schema: the input contract (needs hist_ and cand_ features and time=True).
        model_dim: d, the width of T and C.
        num_heads: attention heads of T and C.
        encoder_depth: layers of T.
        decoder_depth: PF-KV layers of C.
        ffn_dim: inner width of the SwiGLU FFNs.
        mlp_units: hidden widths of the prediction head.
        time_granularities: τ_h in seconds per encoder head (0 = RoPE), or None for the default.
    """

    def __init__(
        self,
        schema,
        model_dim=32,
        num_heads=2,
        encoder_depth=2,
        decoder_depth=1,
        ffn_dim=64,
        mlp_units=(64, 32),
        time_granularities=None,
        **kwargs,
    ):
        schema = Schema.from_dict(schema)
        schema.require("rest", time=True, groups=("hist", "cand"))
        if time_granularities is not None and len(time_granularities) != num_heads:
            raise ZooError(
                f"rest: time_granularities has {len(time_granularities)} entries but num_heads is {num_heads}"
            )
        granularities = list(time_granularities or default_granularities(num_heads))
        layers = _make_layers(schema, model_dim, num_heads, encoder_depth, decoder_depth, ffn_dim, mlp_units, granularities)
        inputs = schema.inputs()
        pctr = forward(layers, schema, inputs)["pctr"]
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
        self.schema = schema
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.encoder_depth = encoder_depth
        self.decoder_depth = decoder_depth
        self.ffn_dim = ffn_dim
        self.mlp_units = tuple(mlp_units)
        self.time_granularities = None if time_granularities is None else list(time_granularities)

    # ------------------------------------------------------------------ parts
    def parts(self):
        """The model's layers by name (what `forward` and the sub-models are built from)."""
        return {layer.name: layer for layer in self.layers}

    def encoder(self):
        """The encoder T as a model: hist_* + hist_time -> {"memory": H [B, L, d], "memory_valid": [B, L]}."""
        cache = _SERVING.setdefault(self, {})
        if "encoder" not in cache:
            spec = self.schema.input_spec()
            inputs = {
                k: keras.Input(shape=s, dtype=t, name=k) for k, (s, t) in spec.items() if k.startswith("hist")
            }
            embedded = _embed(self.parts(), self.schema, inputs)
            memory = encode_history(self.parts(), embedded["hist"], embedded["hist_valid"], inputs["hist_time"])
            cache["encoder"] = keras.Model(
                inputs, {"memory": memory, "memory_valid": embedded["hist_valid"]}, name="rest_encoder"
            )
        return cache["encoder"]

    def decoder(self, num_candidates):
        """The decoder C + head as a model scoring N candidates against one encoded history:
        {"memory", "memory_valid", "hist_time", cand_*, cand_time, user_*, ctx_*, num_*} -> pctr [B, N]."""
        cache = _SERVING.setdefault(self, {})
        key = ("decoder", int(num_candidates))
        if key not in cache:
            length = self.schema.sequence_length
            spec = self.schema.input_spec(num_candidates=int(num_candidates))
            inputs = {
                k: keras.Input(shape=s, dtype=t, name=k)
                for k, (s, t) in spec.items()
                if not k.startswith("hist") or k == "hist_time"
            }
            inputs["memory"] = keras.Input(shape=(length, self.model_dim), name="memory")
            inputs["memory_valid"] = keras.Input(shape=(length,), dtype="bool", name="memory_valid")
            embedded = _embed(self.parts(), self.schema, inputs)
            outputs = decode_candidates(
                self.parts(), self.schema, inputs["memory"], inputs["memory_valid"], inputs["hist_time"], embedded,
                inputs["cand_time"],
            )
            cache[key] = keras.Model(inputs, outputs["pctr"], name=f"rest_decoder_{int(num_candidates)}")
        return cache[key]

    # ------------------------------------------------------------------ serving
    def encode(self, features):
        """Runs T once on a request's history. Returns the state `decode` needs (NumPy):
        {"memory": H [B, L, d], "memory_valid": [B, L], "hist_time": [B, L]}."""
        check_histories(features, self.schema)
        inputs = {k: v for k, v in features.items() if k.startswith("hist")}
        state = dict(self.encoder().predict_on_batch(inputs))
        state["hist_time"] = np.asarray(features["hist_time"])
        return state

    def decode(self, state, candidates):
        """Scores the N candidates of `candidates` (cand_* [B, N], cand_time, user_*, ctx_*, num_*) against
        the state from `encode`. Equal to the full model on each candidate. Returns pctr [B, N] (NumPy)."""
        keys = [k for k in self.schema.keys() if not k.startswith("hist")]
        missing = [k for k in keys if k not in candidates]
        if missing:
            raise ZooError(f"rest.decode: missing feature(s) {', '.join(missing)}")
        n = np.asarray(candidates["cand_time"]).shape[1]
        inputs = {k: candidates[k] for k in keys}
        inputs.update(state)
        return self.decoder(n).predict_on_batch(inputs)

    def score(self, features, batch_size=None):
        check_histories(features, self.schema)
        return super().score(features, batch_size=batch_size)


# ---------------------------------------------------------------------- the graph, as functions of the layers
def _make_layers(schema, d, num_heads, encoder_depth, decoder_depth, ffn_dim, mlp_units, granularities):
    layers = [FeatureEmbedding(schema, name="embedding"), keras.layers.Dense(d, name="behaviour_projection")]
    switch = switch_layer(encoder_depth)
    for l in range(1, encoder_depth + 1):
        attention = DualGatedAttention(num_heads, causal=True, time_granularities=granularities, name=f"dga_{l}")
        layers.append(SRN(attention, post_norm=l <= switch, name=f"encoder_{l}_attention"))
        layers.append(SRN(SwiGLU(ffn_dim, name=f"ffn_{l}"), post_norm=l <= switch, name=f"encoder_{l}_ffn"))
    layers.append(keras.layers.LayerNormalization(epsilon=1e-6, name="memory_norm"))
    layers.append(keras.layers.Embedding(1, d, name="cls_token"))
    for group in query_groups(schema)[1:-1]:
        layers.append(keras.layers.Dense(d, name=f"{group}_token"))
    layers.append(keras.layers.Dense(d, name="cand_token"))
    layers.append(PrefixValidMask(name="prefix_valid_mask"))
    for l in range(1, decoder_depth + 1):
        layers.append(PFKVDecoderLayer(num_heads, len(query_groups(schema)), ffn_dim, name=f"decoder_{l}"))
    for i, units in enumerate(mlp_units):
        layers.append(keras.layers.Dense(units, activation="relu", name=f"head_{i}"))
    layers.append(keras.layers.Dense(1, name="head_logit"))
    return {layer.name: layer for layer in layers}


def switch_layer(depth):
    """L_switch of SRN: about 25% of the depth, at least 1."""
    return max(1, round(depth / 4))


def query_groups(schema):
    """The query token types of C, in token order: [CLS], context (ctx/num), user, candidate."""
    groups = ["cls"]
    if schema.group("ctx") or schema.group("num"):
        groups.append("context")
    if schema.group("user"):
        groups.append("user")
    return groups + ["cand"]


def _embed(layers, schema, inputs):
    """FeatureEmbedding on `inputs`; features a sub-model does not take (the encoder takes only hist_*,
    the decoder no hist_*) get zero stand-ins of one token, whose embeddings are left unused."""
    hist_key, cand_key = schema.group("hist")[0].key, schema.group("cand")[0].key
    reference = inputs[hist_key] if hist_key in inputs else inputs[cand_key]  # an int [B, L or M] input
    zeros = ops.zeros_like(ops.cast(reference[:, 0], "int32"))  # [B]
    features = dict(inputs)
    for feature in schema.features:
        if feature.key not in features:
            stand_in = zeros[:, None] if feature.group in ("hist", "cand") else zeros
            features[feature.key] = ops.cast(stand_in, "float32") if feature.group == "num" else stand_in
    return layers["embedding"](features)


def encode_history(layers, hist_tokens, valid, hist_time):
    """T (§2.1): H = LN(SRN-wrapped DGA and FFN layers over the projected behaviour tokens)."""
    x = layers["behaviour_projection"](hist_tokens)
    l = 1
    while f"encoder_{l}_attention" in layers:
        x = layers[f"encoder_{l}_attention"](x, valid=valid, time=hist_time)
        x = layers[f"encoder_{l}_ffn"](x)
        l += 1
    return layers["memory_norm"](x)


def query_tokens(layers, schema, embedded):
    """Z [B, M, K, d]: the [CLS], context, user and candidate tokens of every sample."""
    cand = embedded["cand"]  # [B, M, D]
    m = ops.shape(cand)[1]
    tokens = {"cls": layers["cls_token"](ops.zeros_like(ops.cast(cand[..., 0], "int32")))}
    if "context_token" in layers:
        parts = [embedded[g] for g in ("ctx", "num") if g in embedded]
        context = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
        tokens["context"] = ops.repeat(layers["context_token"](context)[:, None, :], m, axis=1)
    if "user_token" in layers:
        tokens["user"] = ops.repeat(layers["user_token"](embedded["user"])[:, None, :], m, axis=1)
    tokens["cand"] = layers["cand_token"](cand)
    return ops.stack([tokens[g] for g in query_groups(schema)], axis=2)


def decode_candidates(layers, schema, memory, memory_valid, hist_time, embedded, cand_time):
    """C (§2.2) + head: {"pctr": [B, M], "decoded": [B, M, K, d]}."""
    allowed = layers["prefix_valid_mask"](memory_valid, hist_time, cand_time)  # [B, M, L]
    z = query_tokens(layers, schema, embedded)
    l = 1
    while f"decoder_{l}" in layers:
        z = layers[f"decoder_{l}"](z, memory, allowed)
        l += 1
    x = ops.reshape(z, (-1, ops.shape(z)[1], ops.shape(z)[2] * ops.shape(z)[3]))  # [B, M, K d]
    i = 0
    while f"head_{i}" in layers:
        x = layers[f"head_{i}"](x)
        i += 1
    logit = ops.squeeze(layers["head_logit"](x), axis=-1)
    return {"pctr": ops.sigmoid(logit), "decoded": z}


def forward(layers, schema, inputs):
    """The whole inference graph on a batch in the contract: {"pctr", "decoded", "embedded"}."""
    embedded = _embed(layers, schema, inputs)
    memory = encode_history(layers, embedded["hist"], embedded["hist_valid"], inputs["hist_time"])
    outputs = decode_candidates(
        layers, schema, memory, embedded["hist_valid"], inputs["hist_time"], embedded, inputs["cand_time"]
    )
    outputs["embedded"] = embedded
    return outputs


def check_histories(features, schema):
    """Raises a ZooError when a row's real behaviours are not sorted oldest first (ties are fine)."""
    time = np.asarray(features["hist_time"]).astype("int64")
    ids = [np.asarray(features[f.key]) for f in schema.group("hist") if f.key in features]
    valid = np.any(np.stack([i != 0 for i in ids], axis=-1), axis=-1) if ids else time != 0
    for row in range(time.shape[0]):
        t = time[row][valid[row]]
        drops = np.flatnonzero(np.diff(t) < 0)
        if drops.size:
            j = drops[0]
            raise ZooError(
                f"hist_time of row {row} is not sorted oldest first ({t[j]} is followed by {t[j + 1]}); "
                "ReST needs each history in chronological order, newest last"
            )
