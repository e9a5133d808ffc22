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


def check_parallel_candidates(m2, name="parallel_candidates (m2)"):
    """m2 (or another count `name`) as an int; a one-line error unless it is an integer >= 1."""
    if isinstance(m2, bool) or not isinstance(m2, (int, np.integer)) or m2 < 1:
        raise ZooError(f"{name} is {m2!r}; it must be an integer >= 1")
    return int(m2)


def _head_logit(mlp, candidates, context, training=None):
    """Eq 1: z = MLP(E_block[-1], e_p, e_other) for each of the M candidates -> [B, M]."""
    parts = [candidates]
    if context is not None:
        parts.append(ops.zeros_like(candidates[..., :1]) + context[:, None, :])  # [B, M, D_c]
    joined = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
    return ops.squeeze(mlp(joined, training=training), axis=-1)


def _head_context(embedded):
    """e_p (flattened profile) and e_other (context, numerics): [B, D_c] or None."""
    parts = [embedded[g] for g in ("user", "ctx", "num") if g in embedded]
    return ops.concatenate(parts, axis=-1) if parts else None


class _Scorer(keras.Model):
    """`SUAN.score_all` at one (m2, use_cache) as a model, so that `predict_on_batch` compiles it with
    the backend's own compiler, like any model."""

    def __init__(self, suan, parallel_candidates, use_cache, **kwargs):
        super().__init__(dtype=suan.dtype_policy, **kwargs)
        self.suan = suan
        self.parallel_candidates = parallel_candidates
        self.use_cache = use_cache
        self.built = True  # its weights are the built SUAN's: no eager build call (slow under JAX)

    def call(self, features):
        return self.suan.score_all(features, self.parallel_candidates, self.use_cache)


class _AttentionTap(keras.Model):
    """`SUAN.candidate_attention` as a model, compiled by `predict_on_batch` like `_Scorer`."""

    def __init__(self, suan, **kwargs):
        super().__init__(dtype=suan.dtype_policy, **kwargs)
        self.suan = suan
        self.built = True

    def call(self, features):
        return self.suan.candidate_attention(features)


class _ScorerCache:
    """Plain holder (not tracked by Keras) of a model's compiled scorers."""

    def __init__(self):
        self.scorers = {}


def _candidate_attention(attention, candidates, context, candidate_times):
    """The weights of `SuanSelfAttention.attend_candidates` (eq 4-5): each candidate's softmax over the
    history slots it may attend to and itself, [B, H, M, S + 1] (the last column: itself)."""
    return attention.candidate_weights(candidates, context, candidate_times)


def _balanced(total, most):
    """The size of the fewest equal parts of `total` that are each at most `most`."""
    return math.ceil(total / math.ceil(total / most))


@register(
    "suan",
    description="SUAN: stacked unified attention blocks over the target-aware behaviour sequence, Dice MLP head",
    paper="Exploring Scaling Laws of CTR Model for Online Performance Improvement (Meituan, 2025)",
)
@keras.saving.register_keras_serializable(package="zoo")
class SUAN(ZooModel):
    """SUAN (§3.1-3.2) and, with a window, LightSUAN (§3.3.1): behaviour tokens (concatenated
    per-field embeddings) with the candidate appended (target-aware sequence), a learned absolute
    position table plus Dense(time embedding), l stacked UABs (causal self-attention with the eq 4
    bias, AFNet, SwiGLU), and the eq 1 head pctr = sigmoid(MLP([E_block[-1], e_p, e_other])) with Dice.
    Output `pctr` [B, M]; the layer named "logit" holds z ([B, M]; `logit_model()`), and
    `rectified_pctr` undoes negative sampling.

    SUAN's self-attention is full (window_size=None, dilation=1); LightSUAN (zoo/models/lightsuan.py)
    is this class with sparse attention and m2 = 32 parallel candidates by default.

    Candidates: the M candidates all sit at position L after the history; each sees the behaviours
    before its exposure time (FeatureEmbedding's hist_visible) and itself, never a later behaviour
    or another candidate, so a row with M candidates scores each as if it alone followed the
    behaviours visible to it. Parallel inference (§3.3.1) scores m1 candidates in ceil(m1 / m2)
    passes of m2: `score_all` in keras.ops (what the exported `score_all` signature runs) and
    `score_candidates` (NumPy in, NumPy out, split into compiled calls of bounded size). With
    alignment_pool="causal" both encode each request's history once and reuse it in every pass (the
    history cache), exact because the encoder is causal (a behaviour's state depends only on the
    behaviours up to it), candidates never reach history positions, and each candidate reads the
    cached states through its own visibility. With alignment_pool="global" the one mean of eq 11
    mixes every position, later behaviours and other candidates included (see AFNet).

    Training: the paper pads each 1-candidate training row with m2 - 1 placeholders so that training
    sees the parallel attention pattern. Here a candidate's attention pattern does not depend on its
    slot or on the other slots (tested), so training on the ordinary M = 1 rows computes exactly what
    the padded rows would (minus the placeholders' own losses); rows with M candidates also work.

    Args:
        schema: the input contract; needs hist_, cand_ and user_ features and time=True. The user
            features are E_p's tokens and share one embedding_dim.
        num_layers: l, stacked UABs.
        num_heads: h.
        mlp_units: hidden widths of the prediction MLP (the paper's [1024, 512, 256, 1]).
        dice_momentum: moving-average decay of the head's BatchNorm/Dice (0.9; the authors use 0.999 over 10^10
            samples).
        alignment_pool: "causal" (default) or "global" (eq 11 as written; see AFNet).
        sample_rate: the negative sampling rate of the training data, for `rectified_pctr`.
        window_size: k, LightSUAN's local window (keys i - k < j <= i); None: full attention.
        dilation: r, LightSUAN's dilation (keys j <= i with (i - j) mod r == 0); 1 with window_size=None.
        parallel_candidates: m2, candidates per pass in `score_all` / `score_candidates`.
        share_relative_bias: one eq 4 bias (position and time tables) for all UABs, as in the authors'
            code (True), or one per UAB (False); see SuanEncoder.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): the target-aware sequence: the L behaviours and the M candidates appended."""
        return (L + M) ** 2

    def __init__(self, schema, num_layers=2, num_heads=2, mlp_units=(1024, 512, 256), dice_momentum=0.9,
                 alignment_pool="causal", sample_rate=1.0, window_size=None, dilation=1, parallel_candidates=1,
                 share_relative_bias=True, **kwargs):
        schema.require(self.registered_name, time=True, groups=("hist", "cand", "user"))
        widths = {f.embedding_dim for f in schema.group("user")}
        if len(widths) > 1:
            raise ZooError(
                f"{self.registered_name} attends to the user features as tokens: they need one embedding_dim, "
                f"got {sorted(widths)}"
            )
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        encoder = SuanEncoder(
            num_layers, num_heads, schema.sequence_length, window_size, dilation, alignment_pool,
            share_relative_bias=share_relative_bias, name="encoder",
        )
        candidates = encoder(
            embedded["hist"], embedded["cand"], embedded["hist_valid"], embedded["hist_visible"], inputs["hist_time"],
            inputs["cand_time"], self._profile(schema, embedded),
        )
        mlp = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")
        logit = keras.layers.Identity(name="logit")(_head_logit(mlp, candidates, _head_context(embedded)))
        pctr = keras.layers.Activation("sigmoid", name="pctr")(logit)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
        self._scorers = _ScorerCache()

    @staticmethod
    def _profile(schema, embedded):
        """E_p [B, n2, d]: one token per user feature."""
        return ops.stack([embedded[f.key] for f in schema.group("user")], axis=1)

    def rectified_pctr(self, pctr):
        """Undoes negative sampling at rate `sample_rate`: p / (p + (1 - p) / sample_rate), in keras.ops
        (a tensor; the exported signatures return it as `rectified_pctr`)."""
        p = ops.convert_to_tensor(pctr)
        return p / (p + (1.0 - p) / self.sample_rate)

    def logit_model(self):
        """A functional model sharing this one's weights whose output is the logit z [B, M] (eq 1)."""
        return keras.Model(self.inputs, self.get_layer("logit").output, name=f"{self.name}_logit")

    # ------------------------------------------------------------------ figures
    def introspect(self, features):
        """The self-attention of one request's candidate over its history, per UAB and head (eq 4-5 with
        LightSUAN's sparse pattern), for the figure `zoo.recipes.evaluate` draws.

        The request is the batch's row with the most real behaviours, its first candidate. Returns
        NumPy: "attention" [l, h, L + 1], the weights of the candidate token on history slots 0..L-1 and
        on itself (last column), NaN where it may not attend (padding, behaviours at or after its
        exposure time, outside the sparse pattern);
        "hist_valid" [L]; "row" (its index in the batch); "model" (the registered name).
        """
        valid = np.zeros(np.shape(features[f"hist_{self.schema.field_names('hist')[0]}"]), bool)
        for field in self.schema.field_names("hist"):
            valid |= np.asarray(features[f"hist_{field}"]) != 0  # a behaviour: any non-padding id
        row = int(np.argmax(valid.sum(axis=1)))
        request = {key: np.asarray(features[key])[row : row + 1] for key in self.schema.keys()}
        request = {key: value[:, :1] if key.startswith("cand_") else value for key, value in request.items()}
        key = ("introspect",)
        if key not in self._scorers.scorers:
            self._scorers.scorers[key] = _AttentionTap(self, name=f"{self.name}_attention")
        tap = self._scorers.scorers[key]
        probs = np.asarray(self.run_predictor(lambda: tap.predict_on_batch(request), model=tap))  # [1, l, H, S + 1]
        length = self.schema.sequence_length
        slots = self.get_layer("encoder").blocks[0].attention.candidate_slots + [length]
        attention = np.full((self.num_layers, self.num_heads, length + 1), np.nan)
        attention[:, :, slots] = probs[0]
        later = np.asarray(request["hist_time"])[0] >= np.asarray(request["cand_time"])[0, 0]
        attention[:, :, np.r_[~valid[row] | later, False]] = np.nan  # padding and the future are never attended
        return {"attention": attention, "hist_valid": valid[row], "row": row, "model": self.registered_name}

    def candidate_attention(self, features):
        """Per UAB, the weights of each row's first candidate over the history slots it may attend to and
        itself (`_candidate_attention`), in keras.ops: [B, l, H, S + 1]. Runs the encoder as `call` does."""
        embedded = self.get_layer("embedding")(features, training=False)
        encoder = self.get_layer("encoder")
        hist_time, cand_time = (ops.convert_to_tensor(features[key]) for key in ("hist_time", "cand_time"))
        visible = embedded["hist_visible"][:, :1]
        x, valid, times, reference = encoder._embed_history(embedded["hist"], embedded["hist_valid"], hist_time)
        c, c_times = encoder._embed_candidates(embedded["cand"][:, :1], cand_time[:, :1], visible, times, reference)
        profile = self._profile(self.schema, embedded)
        weights = []
        for block in encoder.blocks:
            attention = block.attention
            _, keys, values = attention.attend_history(block.input_norm(x), valid, times)
            context = attention.candidate_context(keys, values, visible, times)
            weights.append(_candidate_attention(attention, block.input_norm(c), context, c_times)[:, :, 0])
            x, c = block(x, c, profile, valid, visible, times, c_times)
        return ops.stack(weights, axis=1)

    # ------------------------------------------------------------------ parallel inference (§3.3.1)
    def _scoring_m2(self, parallel_candidates, use_cache):
        """m2 of a scoring call (default: the model's), checked with the cache request."""
        if use_cache and self.alignment_pool != "causal":
            raise ZooError("use_cache=True needs alignment_pool='causal' (the global mean mixes candidates)")
        return self.parallel_candidates if parallel_candidates is None else check_parallel_candidates(parallel_candidates)

    def score_all(self, features, parallel_candidates=None, use_cache=True):
        """pctr [B, m1] of m1 candidates per row, scored in ceil(m1 / m2) parallel passes, in keras.ops.

        `features` is a batch in the contract whose cand_* hold m1 candidates (m1 may be unknown while
        tracing: every shape comes from the inputs). The candidates are padded with placeholders to
        ceil(m1 / m2) * m2 and reshaped so that pass p of row b is row b * passes + p of one batch of
        m2-candidate passes. With `use_cache` each row's history is encoded once and its cache
        repeated for its passes; without it every pass runs the whole target-aware sequence.
        Placeholders never change a real candidate's score (each candidate sees the behaviours
        before its exposure time and itself only); with alignment_pool="global" the candidates of
        one pass shift each other's scores (see AFNet) and `use_cache` is refused.
        """
        m2 = self._scoring_m2(parallel_candidates, use_cache)
        embedding, encoder, mlp = self.get_layer("embedding"), self.get_layer("encoder"), self.get_layer("mlp")
        embedded = embedding(features, training=False)
        candidates, candidate_time = embedded["cand"], ops.convert_to_tensor(features["cand_time"])
        m1 = ops.shape(candidate_time)[1]
        passes = (m1 + m2 - 1) // m2

        def to_passes(x):  # [B, m1, ...] -> [B * passes, m2, ...], zeros filling the last pass
            if m2 > 1:
                x = ops.concatenate([x, ops.repeat(ops.zeros_like(x[:, :1]), m2 - 1, axis=1)], axis=1)
                x = x[:, : passes * m2]
            return ops.reshape(x, (-1, m2) + tuple(x.shape[2:]))

        def per_pass(x):  # a row's [B, ...] value repeated for each of its passes: [B * passes, ...]
            return ops.repeat(x, passes, axis=0)

        candidates, candidate_time = to_passes(candidates), to_passes(candidate_time)
        visible = to_passes(embedded["hist_visible"])  # [B * passes, m2, L]
        profile = self._profile(self.schema, embedded)
        if use_cache:
            _, cache = encoder.encode_history(embedded["hist"], embedded["hist_valid"], features["hist_time"], profile,
                                              history_output=False)
            cache = keras.tree.map_structure(per_pass, cache)
            out = encoder.encode_candidates(candidates, candidate_time, visible, cache)
        else:
            history = (embedded["hist"], embedded["hist_valid"], ops.convert_to_tensor(features["hist_time"]))
            history = [per_pass(x) for x in history]
            out = encoder(history[0], candidates, history[1], visible, history[2], candidate_time, per_pass(profile))
        context = _head_context(embedded)
        logit = _head_logit(mlp, out, None if context is None else per_pass(context), training=False)  # [B*passes, m2]
        pctr = self.calibrate(ops.sigmoid(logit))
        return ops.reshape(pctr, (-1, passes * m2))[:, :m1]

    def _scorer(self, m2, use_cache):
        """One compiled `score_all` per (m2, use_cache)."""
        key = (m2, use_cache)
        if key not in self._scorers.scorers:
            self._scorers.scorers[key] = _Scorer(self, m2, use_cache, name=f"{self.name}_scorer_{m2}_{int(use_cache)}")
        return self._scorers.scorers[key]

    def score_candidates(self, features, parallel_candidates=None, use_cache=True, rows_per_call=None):
        """Scores m1 candidates per row in ceil(m1 / m2) parallel passes (§3.3.1): pctr [B, m1] (NumPy).

        `features` is a batch in the contract whose cand_* arrays hold any number m1 of candidates
        (validated against the Schema). Every call runs `score_all` (the function the exported
        `score_all` signature runs) compiled as a model, on `rows_per_call` passes at most: the rows'
        passes when a row's passes fit (several rows per call), else a part of one row's passes (its
        history is then encoded once per call). The default is the fewest equal calls that keep one
        attention map under 2^25 scores. The last call is filled (copies of the last row, placeholder
        candidates) so every call has the same shape. m2 defaults to `parallel_candidates`; see
        `score_all` for `use_cache`.
        """
        m2 = self._scoring_m2(parallel_candidates, use_cache)
        if rows_per_call is not None:
            check_parallel_candidates(rows_per_call, "rows_per_call")
        features = self.schema.validate(features, empty_ok=False)
        cand_keys = [k for k in features if k.startswith("cand_")]
        batch, m1 = features[cand_keys[0]].shape[:2]
        if m1 < 1:
            raise ZooError("the batch has no candidates to score (cand_* arrays have M = 0)")
        passes = math.ceil(m1 / m2)
        if rows_per_call is None:
            keys = self.schema.sequence_length + m2
            queries = m2 if use_cache else keys
            rows_per_call = max(1, 2**25 // (self.num_heads * queries * keys))
        if rows_per_call >= passes:  # whole rows: `requests` rows x all their passes per call
            requests, width = _balanced(batch, rows_per_call // passes), passes
        else:  # part of one row: `width` of its passes per call
            requests, width = 1, _balanced(passes, rows_per_call)
        rows, columns = math.ceil(batch / requests) * requests, math.ceil(passes / width) * width * m2
        filled = {}
        for key, value in features.items():
            value = np.concatenate([value, np.repeat(value[-1:], rows - batch, axis=0)])
            if key in cand_keys:
                value = np.pad(value, [(0, 0), (0, columns - m1)] + [(0, 0)] * (value.ndim - 2))  # (tags: [B, M, S])
            filled[key] = value
        scorer = self._scorer(m2, use_cache)
        pctr = np.zeros((rows, columns), "float32")

        def run_calls():
            for r in range(0, rows, requests):
                for c in range(0, columns, width * m2):
                    call = {k: v[r : r + requests, c : c + width * m2] if k in cand_keys else v[r : r + requests]
                            for k, v in filled.items()}
                    pctr[r : r + requests, c : c + width * m2] = np.asarray(scorer.predict_on_batch(call))

        self.run_predictor(run_calls, model=scorer)
        return pctr[:batch, :m1]
