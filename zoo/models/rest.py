"""ReST (Chen et al., 2026): a heavy behaviour encoder T computed once per user, a light cross decoder C
per candidate. Training-only parts live in `zoo.recipes.rest_training`."""

import keras
import numpy as np
from keras import ops

import zoo.guards as guards
from zoo.errors import ZooError
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.rest_decoder import ReSTDecoder
from zoo.layers.rest_encoder import ReSTEncoder
from zoo.models.zoo_model import ZooModel
from zoo.registry import register
from zoo.schema import check_range, first_unsorted


class _SubModels:
    """Plain holder (not tracked by Keras, so never saved twice) of a ReST model's graph taps and of
    the serving sub-models built from its layers."""

    def __init__(self, taps):
        self.taps = taps  # {"inputs", "pctr", "decoded", "cand", "user"}: KerasTensors of the assembled graph
        self.models = {}


@register(
    "rest",
    description="ReST: DGA + RoPE/RoTE + SRN behaviour encoder, PF-KV cross decoder with token-specific "
    "parameters; encode once, decode many candidates",
    paper="Chen et al., From Language to Behavior: Scaling Sequence Transformers for Industrial "
    "Recommendation Ranking with Rec-Native Designs, arXiv:2609.01240, 2026",
    signatures=("encode_decode",),
)
@keras.saving.register_keras_serializable(package="zoo")
class ReST(ZooModel):
    """ReST (§2.1-2.2, §2.4), inference graph. Output `pctr` [B, M].

        embedded = FeatureEmbedding(features)
        H = ReSTEncoder(embedded hist tokens, hist_valid, hist_time)                     T, §2.1
        pctr = ReSTDecoder(H, hist_valid, hist_time, cand tokens, cand_time, context, user)  C, §2.2

    T: behaviour projection Dense_d, `encoder_depth` layers of SRN-wrapped DGA (RoPE/RoTE heads with
    `time_granularities`, default one RoPE head then s/min/h/day/week/quarter/year) and SwiGLU FFN,
    final LN. C: query tokens [CLS], context (the ctx_ and num_ features), user, candidate; the
    prefix-valid mask (sample m reads only the real behaviours before `cand_time[m]`, so a row with M
    samples of one user over the union of their histories is shared-prefix training, §2.4);
    `decoder_depth` PF-KV layers; head MLP(concat of the K decoded tokens) -> sigmoid. See the two
    layers for the equations.

    Serving (§2.4): `encode(features)` runs T once per request, `decode(state, candidates)` scores N
    candidates with C; `encoder()` / `decoder(N)` return those sub-models (the model's own layers and
    weights). Training-only parts (aux seq-CVR head g_seq, alignment projections) are not here: wrap
    the model in `zoo.recipes.rest_training.ReSTTrainer`, which reads the decoded tokens from
    `tap_model()`; this model alone is what presets and export carry.

    Histories must be sorted oldest first (equal times allowed; ties keep their order), as for every
    zoo model: `score` and `encode` check each batch with `Schema.validate`; `fit` cannot check inside
    the graph, so validate new data with `schema.validate(batch)`. Empty histories are valid (the
    decoder then reads nothing).

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

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): the encoder's self-attention over the L behaviours, the decoder's cross-attention."""
        return L ** 2 + M * L

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
        schema.require("rest", time=True, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        encoder = ReSTEncoder(model_dim, num_heads, encoder_depth, ffn_dim, time_granularities, name="encoder")
        memory = encoder(embedded["hist"], embedded["hist_valid"], inputs["hist_time"])
        decoder = ReSTDecoder(
            model_dim, num_heads, decoder_depth, ffn_dim, mlp_units, token_types=query_token_types(schema),
            name="decoder",
        )
        pctr, decoded = decoder(
            memory, embedded["hist_valid"], inputs["hist_time"], embedded["cand"], inputs["cand_time"],
            **_per_row_inputs(embedded), return_decoded=True,
        )
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
        taps = {"inputs": inputs, "pctr": pctr, "decoded": decoded, "cand": embedded["cand"]}
        if "user" in embedded:
            taps["user"] = embedded["user"]
        self._sub_models = _SubModels(taps)

    # ------------------------------------------------------------------ sub-models
    def tap_model(self):
        """The assembled graph with its inner states as outputs (same layers, same weights): the contract
        inputs -> {"pctr" [B, M], "decoded" Z [B, M, K, d] (the decoder's [CLS], context, user and
        candidate tokens), "cand" a [B, M, D] (the candidate embeddings), "user" [B, D_u] (with user_
        features)}. The training losses of §2.3 read it (`ReSTTrainer`)."""
        models = self._sub_models.models
        if "taps" not in models:
            taps = dict(self._sub_models.taps)
            models["taps"] = keras.Model(taps.pop("inputs"), taps, name=f"{self.name}_taps")
        return models["taps"]

    def encoder(self):
        """The encoder T as a model: hist_* + hist_time -> {"memory": H [B, L, d], "memory_valid": [B, L]}."""
        models = self._sub_models.models
        if "encoder" not in models:
            inputs = {k: v for k, v in self._serving_inputs(1).items() if k.startswith("hist")}
            embedded = self.get_layer("embedding")(inputs)
            memory = self.get_layer("encoder")(embedded["hist"], embedded["hist_valid"], inputs["hist_time"])
            models["encoder"] = keras.Model(
                inputs, {"memory": memory, "memory_valid": embedded["hist_valid"]}, name=f"{self.name}_encoder"
            )
        return models["encoder"]

    def decoder(self, num_candidates=None):
        """The decoder C + head as a model scoring N candidates per row against one encoded history
        (N = `num_candidates`, or any N with None): {"memory" [B, L, d], "memory_valid" [B, L],
        "hist_time", cand_* [B, N], cand_time, user_*, ctx_*, num_*} -> pctr [B, N]."""
        models = self._sub_models.models
        key = ("decoder", num_candidates)
        if key not in models:
            length = self.schema.sequence_length
            inputs = {k: v for k, v in self._serving_inputs(num_candidates).items()
                      if not k.startswith("hist") or k == "hist_time"}
            inputs["memory"] = keras.Input(shape=(length, self.model_dim), name="memory")
            inputs["memory_valid"] = keras.Input(shape=(length,), dtype="bool", name="memory_valid")
            embedded = self.get_layer("embedding")({k: inputs[k] for k in self.schema.keys() if k in inputs})
            pctr = self.get_layer("decoder")(
                inputs["memory"], inputs["memory_valid"], inputs["hist_time"], embedded["cand"], inputs["cand_time"],
                **_per_row_inputs(embedded),
            )
            name = f"{self.name}_decoder_{'n' if num_candidates is None else int(num_candidates)}"
            models[key] = keras.Model(inputs, self.calibrate(pctr), name=name)
        return models[key]

    def _serving_inputs(self, num_candidates):
        """Fresh keras.Inputs for every schema key, with N candidates per row (None: any N)."""
        spec = self.schema.input_spec(num_candidates=1)
        return {
            k: keras.Input(shape=(num_candidates,) + tuple(s[1:]) if k.startswith("cand") else s, dtype=t, name=k)
            for k, (s, t) in spec.items()
        }

    # ------------------------------------------------------------------ serving
    def encode(self, features):
        """Runs T once on a request's history. Returns the state `decode` needs (NumPy):
        {"memory": H [B, L, d], "memory_valid": [B, L], "hist_time": [B, L]}."""
        hist_keys = [k for k in self.schema.keys() if k.startswith("hist")]
        inputs = self.schema.validate(features, keys=hist_keys, empty_ok=False)
        with guards.entry_lock(self):  # the sub-model is made once, by one thread
            encoder = self.encoder()
            state = dict(self.run_predictor(lambda: encoder.predict_on_batch(inputs), model=encoder))
        state["hist_time"] = inputs["hist_time"]
        return state

    def decode(self, state, candidates):
        """Scores the N candidates of `candidates` (cand_* [B, N], cand_time, user_*, ctx_*, num_*) against
        the state from `encode`. Equal to the full model on each candidate. Returns pctr [B, N] (NumPy)."""
        if not isinstance(state, dict) or set(state) != {"memory", "memory_valid", "hist_time"}:
            raise ZooError("rest.decode: state must be the dict rest.encode returned (memory, memory_valid, hist_time)")
        keys = [k for k in self.schema.keys() if not k.startswith("hist")]
        inputs = self.schema.validate(candidates, keys=keys, empty_ok=False)
        inputs.update(self._checked_state(state, inputs["cand_time"].shape[0]))
        with guards.entry_lock(self):
            decoder = self.decoder(inputs["cand_time"].shape[1])
            return self.run_predictor(lambda: decoder.predict_on_batch(inputs), model=decoder)

    def _checked_state(self, state, batch):
        """The state `encode` returned, as arrays of its dtypes, after the checks `Schema.validate` makes
        on a request (shapes, dtypes, finite memory, hist_time integers >= 0 and sorted): one-line
        ZooError otherwise, before any backend call."""
        length = self.schema.sequence_length
        expected = {
            "memory": ((batch, length, self.model_dim), "float32"),
            "memory_valid": ((batch, length), "bool"),
            "hist_time": ((batch, length), "int64"),
        }
        arrays = {}
        for key, (shape, dtype) in expected.items():
            try:
                value = np.asarray(state[key])
            except ValueError:
                value = np.asarray(state[key], dtype=object)
            if value.dtype == object or not (np.issubdtype(value.dtype, np.number) or value.dtype == bool):
                raise ZooError(f"rest.decode: state['{key}'] must be a numeric array, got dtype {value.dtype}")
            if value.shape != shape:
                raise ZooError(f"rest.decode: state['{key}'] has shape {list(value.shape)}, expected {list(shape)}")
            arrays[key] = value
        if not np.all(np.isfinite(arrays["memory"])):
            raise ZooError(
                "rest.decode: state['memory'] contains NaN or infinite values; pass encode's output unchanged"
            )
        if not np.isin(arrays["memory_valid"], (0, 1)).all():
            raise ZooError("rest.decode: state['memory_valid'] must hold booleans (or 0/1)")
        if not np.issubdtype(arrays["hist_time"].dtype, np.integer):
            dtype = arrays["hist_time"].dtype
            raise ZooError(f"rest.decode: state['hist_time'] must hold integer times, got dtype {dtype}")
        arrays = {key: arrays[key].astype(dtype, copy=False) for key, (_, dtype) in expected.items()}
        check_range("rest.decode: state['hist_time']", arrays["hist_time"], time=True)
        if first_unsorted(arrays["hist_time"], arrays["memory_valid"]) is not None:
            raise ZooError("rest.decode: state['hist_time'] is not sorted oldest first; pass encode's output unchanged")
        return arrays

    # ------------------------------------------------------------------ figures
    def introspect(self, features):
        """Each encoder head's RoPE/RoTE rotation position over one request's history (§2.1), for the
        figure `zoo.recipes.evaluate` draws: the positions the encoder's own rotary layer computes.

        The request is the batch's row with the most real behaviours. Returns NumPy: "positions" [H, L]
        (the sequence index for a RoPE head, floor((t_i - t_1) / τ_h) for a RoTE head; NaN on padding),
        "time_granularities" [H] (τ_h in seconds, 0 = RoPE), "distinct_positions" [H] (how many
        different positions the head gives the request's behaviours), "row" (its index in the batch).
        """
        embedded = self.get_layer("embedding")(features, training=False)
        valid = ops.convert_to_numpy(embedded["hist_valid"]).astype(bool)
        row = int(np.argmax(valid.sum(axis=1)))
        rotary = self.get_layer("encoder").encoder_layers[0].attention.rotary
        time = ops.convert_to_tensor(features["hist_time"])[row : row + 1]
        positions = ops.convert_to_numpy(rotary.positions(time, valid[row : row + 1]))[0].T  # [H, L]
        positions = np.where(valid[row][None, :], positions, np.nan)
        distinct = [len(np.unique(p[valid[row]])) for p in positions]
        return {"positions": positions, "time_granularities": list(rotary.time_granularities),
                "distinct_positions": distinct, "row": row}


def query_token_types(schema):
    """The query token types of C, in token order: [CLS], context (ctx/num), user, candidate (§2.1)."""
    types = ["cls"]
    if schema.group("ctx") or schema.group("num"):
        types.append("context")
    if schema.group("user"):
        types.append("user")
    return types + ["cand"]


def _per_row_inputs(embedded):
    """The decoder's per-row inputs from FeatureEmbedding's output: context = [ctx, num], user."""
    inputs = {}
    parts = [embedded[g] for g in ("ctx", "num") if g in embedded]
    if parts:
        inputs["context"] = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
    if "user" in embedded:
        inputs["user"] = embedded["user"]
    return inputs
