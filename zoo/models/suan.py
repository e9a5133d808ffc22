import math

import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.suan_encoder import SuanEncoder
from zoo.models.zoo_model import ZooModel
from zoo.registry import register
from zoo.schema import Schema


def _head_logit(mlp, candidates, context):
    """Eq 1: z = MLP(E_block[-1], e_p, e_other) for each of the M candidates -> [B, M]."""
    parts = [candidates]
    if context is not None:
        parts.append(ops.zeros_like(candidates[..., :1]) + context[:, None, :])  # [B, M, D_c]
    joined = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
    return ops.squeeze(mlp(joined), axis=-1)


def _head_context(embedded):
    """e_p (flattened profile) and e_other (context, numerics): [B, D_c] or None."""
    parts = [embedded[g] for g in ("user", "ctx", "num") if g in embedded]
    return ops.concatenate(parts, axis=-1) if parts else None


class _Scorer(keras.Model):
    """Runs one part of a SUAN model ("full", "history" or "candidates") so that `predict_on_batch`
    compiles it with the backend's own compiler, like any model."""

    def __init__(self, suan, part, **kwargs):
        super().__init__(**kwargs)
        self.suan = suan
        self.part = part

    def call(self, inputs):
        return self.suan.score_part(self.part, inputs)


class _ScorerCache:
    """Plain holder (not tracked by Keras) of a model's compiled scoring parts."""

    def __init__(self):
        self.parts = {}


class SuanFamily(ZooModel):
    """What SUAN and LightSUAN share: the graph of §3.1 and candidate scoring with the history cache."""

    def _build_graph(self, schema, num_layers, num_heads, mlp_units, dice_momentum, alignment_pool,
                     window_size, dilation, **kwargs):
        schema = Schema.from_dict(schema)
        schema.require(self.registered_name, time=True, groups=("hist", "cand", "user"))
        widths = {f.embedding_dim for f in schema.group("user")}
        if len(widths) > 1:
            raise ZooError(
                f"{self.registered_name} attends to the user features as tokens: they need one embedding_dim, "
                f"got {sorted(widths)}"
            )
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        profile = self._profile(schema, embedded)
        encoder = SuanEncoder(
            num_layers, num_heads, schema.sequence_length, window_size, dilation, alignment_pool, name="encoder"
        )
        candidates = encoder(
            embedded["hist"], embedded["cand"], embedded["hist_valid"], inputs["hist_time"], inputs["cand_time"], profile
        )
        mlp = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")
        logit = keras.layers.Identity(name="logit")(_head_logit(mlp, candidates, _head_context(embedded)))
        pctr = keras.layers.Activation("sigmoid", name="pctr")(logit)
        ZooModel.__init__(self, inputs=inputs, outputs=pctr, **kwargs)
        self.schema = schema
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.mlp_units = tuple(mlp_units)
        self.dice_momentum = dice_momentum
        self.alignment_pool = alignment_pool
        self._scorers = _ScorerCache()

    @staticmethod
    def _profile(schema, embedded):
        """E_p [B, n2, d]: one token per user feature."""
        return ops.stack([embedded[f.key] for f in schema.group("user")], axis=1)

    # ------------------------------------------------------------------ serving
    def rectified_pctr(self, pctr):
        """Undoes negative sampling at rate `sample_rate`: p / (p + (1 - p) / sample_rate)."""
        p = np.asarray(pctr, dtype="float64")
        return (p / (p + (1.0 - p) / self.sample_rate)).astype("float32")

    def logit_model(self):
        """A functional model sharing this one's weights whose output is the logit z [B, M] (eq 1)."""
        return keras.Model(self.inputs, self.get_layer("logit").output, name=f"{self.name}_logit")

    def score_part(self, part, inputs):
        """One part of the scoring graph, in keras.ops (usable inside any traced function, e.g. an export):

            "full"        the contract inputs with M candidates -> pctr [B, M] (each candidate alone)
            "history"     the contract inputs (any 1-candidate stand-in) -> the history cache (a flat dict)
            "candidates"  the cache + cand_* [B, m2] + cand_time (other keys: 1-wide stand-ins) -> pctr [B, m2]
        """
        embedded = self.get_layer("embedding")(inputs, training=False)
        encoder, mlp = self.get_layer("encoder"), self.get_layer("mlp")
        if part == "full":
            candidates = encoder(
                embedded["hist"], embedded["cand"], embedded["hist_valid"], inputs["hist_time"], inputs["cand_time"],
                self._profile(self.schema, embedded),
            )
            return ops.sigmoid(_head_logit(mlp, candidates, _head_context(embedded)))
        if part == "history":
            _, cache = encoder.encode_history(
                embedded["hist"], embedded["hist_valid"], inputs["hist_time"], self._profile(self.schema, embedded)
            )
            flat = {"reference": cache["reference"], "newest_valid": cache["newest_valid"], "profile": cache["profile"]}
            context = _head_context(embedded)
            if context is not None:
                flat["head_context"] = context
            for i in range(self.num_layers):
                (keys, values, valid, times), (total, count) = cache[f"state_{i}"]
                for name, value in zip(("keys", "values", "valid", "times", "total", "count"),
                                       (keys, values, valid, times, total, count)):
                    flat[f"state_{i}_{name}"] = value
            return flat
        cache = {k: inputs[k] for k in ("reference", "newest_valid", "profile")}
        for i in range(self.num_layers):
            s = lambda name: inputs[f"state_{i}_{name}"]  # noqa: E731
            cache[f"state_{i}"] = ((s("keys"), s("values"), s("valid"), s("times")), (s("total"), s("count")))
        candidates = encoder.encode_candidates(embedded["cand"], inputs["cand_time"], cache)
        return ops.sigmoid(_head_logit(mlp, candidates, inputs.get("head_context")))

    def _scorer(self, part, m2):
        """One compiled scorer per (part, m2), so every trace sees static shapes."""
        if (part, m2) not in self._scorers.parts:
            self._scorers.parts[part, m2] = _Scorer(self, part, name=f"{self.name}_{part}_{m2}_scorer")
        return self._scorers.parts[part, m2]

    def score_candidates(self, features, parallel_candidates=None, use_cache=True, rows_per_call=None):
        """Scores m1 candidates per row in ceil(m1 / m2) parallel passes (§3.3.1): pctr [B, m1].

        `features` is a batch in the contract whose cand_* arrays hold any number m1 of candidates.
        Each pass appends m2 candidates to the history (the last pass is filled with placeholders);
        every candidate sees the history and itself only, so its score equals its score alone.
        With `use_cache` the history is encoded once per request and every pass reuses it (exact
        because the encoder is causal and candidates never reach history positions); it needs
        alignment_pool="causal". m2 defaults to 1 for SUAN and to `parallel_candidates` for LightSUAN.

        The B * ceil(m1 / m2) passes are independent, so they run stacked along the batch axis,
        `rows_per_call` passes per compiled call (default: the fewest equal calls that keep one
        attention map under 2^25 scores); the last call is filled with copies so every call has the
        same shape.
        """
        m2 = getattr(self, "parallel_candidates", 1) if parallel_candidates is None else parallel_candidates
        if not isinstance(m2, (int, np.integer)) or m2 < 1:
            raise ZooError(f"parallel_candidates (m2) is {m2!r}; it must be an integer >= 1")
        if use_cache and self.alignment_pool != "causal":
            raise ZooError("use_cache=True needs alignment_pool='causal' (the global mean mixes candidates)")
        if rows_per_call is not None and (not isinstance(rows_per_call, (int, np.integer)) or rows_per_call < 1):
            raise ZooError(f"rows_per_call is {rows_per_call!r}; it must be an integer >= 1")
        self.schema.validate(features)
        features = {k: np.asarray(v) for k, v in features.items()}
        cand_keys = [k for k in features if k.startswith("cand_")]
        batch, m1 = features[cand_keys[0]].shape[:2]
        if m1 < 1:
            raise ZooError("the batch has no candidates to score (cand_* arrays have M = 0)")
        passes = math.ceil(m1 / m2)
        # Pass p of row b becomes row b * passes + p: [B, passes * m2] -> [B * passes, m2].
        chunks = {k: np.pad(features[k], [(0, 0), (0, passes * m2 - m1)]).reshape(batch * passes, m2) for k in cand_keys}
        keys = self.schema.sequence_length + m2
        queries = m2 if use_cache else keys
        if rows_per_call is None:  # balanced calls, each under the limit
            calls = math.ceil(batch * passes / max(1, 2**25 // (self.num_heads * queries * keys)))
            rows_per_call = math.ceil(batch * passes / calls)
        rows_per_call = min(rows_per_call, batch * passes)
        if not use_cache:
            shared = {k: np.repeat(v, passes, axis=0) for k, v in features.items() if k not in chunks}
            scorer = self._scorer("full", m2)
        else:
            dummies = {k: np.zeros((batch, 1), "int64" if k.endswith("time") else "int32") for k in cand_keys}
            cache = self._scorer("history", 0).predict_on_batch({**features, **dummies})
            others = {k: np.zeros_like(v[:, :1]) if v.ndim == 2 else np.zeros_like(v)
                      for k, v in features.items() if not k.startswith("cand_")}
            shared = {k: np.repeat(np.asarray(v), passes, axis=0) for k, v in {**others, **cache}.items()}
            scorer = self._scorer("candidates", m2)
        rows = {**shared, **chunks}
        out = []
        for start in range(0, batch * passes, rows_per_call):
            stop = start + rows_per_call
            call = {k: v[start:stop] for k, v in rows.items()}
            short = stop - batch * passes
            if short > 0:  # fill the last call with copies of its last row
                call = {k: np.concatenate([v, np.repeat(v[-1:], short, axis=0)]) for k, v in call.items()}
            out.append(np.asarray(scorer.predict_on_batch(call))[: rows_per_call - max(short, 0)])
        return np.concatenate(out).reshape(batch, passes * m2)[:, :m1]


@register(
    "suan",
    description="SUAN: stacked unified attention blocks over the target-aware behaviour sequence, Dice MLP head",
    paper="Exploring Scaling Laws of CTR Model for Online Performance Improvement (Meituan, 2025)",
)
@keras.saving.register_keras_serializable(package="zoo")
class SUAN(SuanFamily):
    """SUAN (§3.1-3.2): behaviour tokens (concatenated per-field embeddings) with the candidate
    appended (target-aware sequence), a learned absolute position table plus Dense(time embedding),
    l stacked UABs (full causal self-attention with the eq 4 bias, AFNet, SwiGLU), and the eq 1 head
    pctr = sigmoid(MLP([E_block[-1], e_p, e_other])) with Dice. Output `pctr` [B, M]; the layer
    named "logit" holds z ([B, M]; `logit_model()`), `rectified_pctr` undoes negative sampling.

    With M > 1 candidates (schema.num_candidates or `score_candidates`) each candidate is scored as
    if it alone followed the history.

    Args:
        schema: the input contract; needs hist_, cand_ and user_ features and time=True. The user
            features are E_p's tokens and share one embedding_dim.
        num_layers: l, stacked UABs.
        num_heads: h.
        mlp_units: hidden widths of the prediction MLP (the paper's [1024, 512, 256, 1]).
        dice_momentum: moving-average decay of the head's BatchNorm/Dice (the authors' 0.999).
        alignment_pool: "causal" (default) or "global" (eq 11 as written; see AFNet).
        sample_rate: the negative sampling rate of the training data, for `rectified_pctr`.
    """

    def __init__(self, schema, num_layers=2, num_heads=2, mlp_units=(1024, 512, 256), dice_momentum=0.999,
                 alignment_pool="causal", sample_rate=1.0, **kwargs):
        if not 0.0 < float(sample_rate) <= 1.0:
            raise ZooError(f"sample_rate is {sample_rate!r}; it must lie in (0, 1]")
        self._build_graph(schema, num_layers, num_heads, mlp_units, dice_momentum, alignment_pool, None, 1, **kwargs)
        self.sample_rate = float(sample_rate)
