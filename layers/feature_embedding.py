import keras
from keras import ops

from zoo.backend_kernels import gather_rows
from zoo.errors import ZooError
from zoo.layers.embedding_normal import EmbeddingNormal
from zoo.layers.embedding_uniform import EmbeddingUniform
from zoo.schema import Schema


@keras.saving.register_keras_serializable(package="zoo")
class FeatureEmbedding(keras.layers.Layer):
    """The shared embedding front-end: a batch dict in the input contract -> per-group embeddings.

    One embedding table per field; `hist_<f>` and `cand_<f>` share the table of field `f`. The
    behaviour and candidate tokens follow `schema.sequence_fields()`: a token is the concatenation of
    its fields' embeddings, and a field its group lacks is zero-filled (SUAN's target-aware sequence,
    §3.1: "the target item's behaviour-only fields are zero"). Every model of the zoo starts here.

    Returns a dict with, where the schema has them:
        "hist": [B, L, D] behaviour tokens; "hist_valid": [B, L] bool, False on padding (all ids 0);
        "cand": [B, M, D] candidate tokens in the same layout;
        "hist_visible": [B, M, L] bool, behaviour l is real and happened strictly before candidate m's
            exposure (hist_time < cand_time; hist_valid for every m when the schema has no times).
            Sequence models read the history through it, so nothing at or after a candidate's time
            (a label's future) reaches that candidate's score;
        "user": [B, D_user], "ctx": [B, D_ctx] concatenated field embeddings;
        "num": [B, F_num] float32 numerics;
        and every id feature's own embedding under its key ("user_age": [B, d]).

    A tags feature (`Feature.tags` = S: ids [B, S] or [B, M, S], 0 on empty slots) is embedded as the
    mean of its present ids' embeddings, sum_s 1[x_s > 0] e(x_s) / max(1, sum_s 1[x_s > 0]) (zero when
    none is present), the masked average pooling of a multi-valued field in AutoInt (eq. 2) and
    FuxiCTR; it then stands in the layout exactly as a one-valued field does.

    With `sequence_tokens=False` the "hist" and "cand" tokens are not built (the feature-interaction
    baselines read each feature's own embedding through FieldTokens): eager torch would otherwise
    concatenate a [B, L, D] tensor every step that nothing reads (XLA drops it on the other backends).

    A batch may hold a subset of the schema's keys (a serving sub-model: ReST's encoder takes the
    hist_* keys only, its decoder no hist_* key): the features present are embedded, and a group's
    entry ("hist", "user", ...) is returned when all of that group's keys are present. Part of a
    group is an error naming the missing keys.
    """

    def __init__(self, schema, embeddings_initializer="uniform", sequence_tokens=True, **kwargs):
        super().__init__(**kwargs)
        self.schema = Schema.from_dict(schema)
        self.sequence_tokens = bool(sequence_tokens)
        if embeddings_initializer == "uniform":  # Keras' U(-0.05, 0.05), drawn on the host under JAX
            embeddings_initializer = EmbeddingUniform()
        elif embeddings_initializer == "normal":  # N(0, 1e-4^2) (DeepCTR's, FuxiCTR's), drawn on the host under JAX
            embeddings_initializer = EmbeddingNormal()
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.tables = {}
        for feature in self.schema.features:
            if feature.group == "num":
                continue
            table = feature.table
            if table not in self.tables:
                self.tables[table] = keras.layers.Embedding(
                    feature.vocabulary_size,
                    feature.embedding_dim,
                    embeddings_initializer=self.embeddings_initializer,
                    name=f"embedding_{table}",
                    dtype=self.dtype_policy,
                )

    def build(self, input_shape=None):
        for feature in self.schema.features:
            if feature.group != "num":
                self._table(feature).build(None)
        self.built = True

    def _table(self, feature):
        return self.tables[feature.table]

    def _lookup(self, feature, ids):
        """The rows of `feature`'s table at `ids` (zoo.backend_kernels.gather_rows: torch's fast backward); a
        tags feature's present ids averaged over its last axis."""
        rows = gather_rows(self._table(feature), ids)
        if not feature.tags:
            return rows
        present = ops.cast(ops.not_equal(ids, 0), rows.dtype)[..., None]  # [..., S, 1]
        return ops.sum(rows * present, axis=-2) / ops.maximum(ops.sum(present, axis=-2), 1.0)

    def _tokens(self, features, group, embedded):
        """Concatenates a sequence group's fields in the shared layout, zero-filling absent fields."""
        present = {f.name: f for f in self.schema.group(group)}
        reference = embedded[next(iter(present.values())).key][..., 0]  # [B, L or M]
        parts = []
        for name in self.schema.sequence_fields():
            if name in present:
                parts.append(embedded[present[name].key])
            else:
                width = self.schema.feature(
                    f"{'cand' if group == 'hist' else 'hist'}_{name}"
                ).embedding_dim
                zeros = ops.zeros_like(reference)[..., None]  # [B, L or M, 1]
                parts.append(ops.repeat(zeros, width, axis=-1))
        return ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]

    def _visible(self, features, hist_valid):
        """[B, M, L]: hist_valid and, where the batch has times, hist_time < cand_time."""
        m = ops.shape(features[self.schema.group("cand")[0].key])[1]
        visible = ops.repeat(hist_valid[:, None, :], m, axis=1)
        if "hist_time" in features and "cand_time" in features:
            hist_time = ops.convert_to_tensor(features["hist_time"])
            cand_time = ops.cast(features["cand_time"], hist_time.dtype)
            visible = ops.logical_and(visible, ops.less(hist_time[:, None, :], cand_time[:, :, None]))
        return visible

    def call(self, features):
        embedded = {
            f.key: self._lookup(f, ops.cast(features[f.key], "int32"))
            for f in self.schema.features
            if f.group != "num" and f.key in features
        }
        complete = {}
        for group in ("hist", "cand", "user", "ctx", "num"):
            keys = [f.key for f in self.schema.group(group)]
            missing = [k for k in keys if k not in features]
            if missing and len(missing) < len(keys):
                raise ZooError(f"the batch has some {group}_ features but not {', '.join(missing)}")
            complete[group] = bool(keys) and not missing
        outputs = dict(embedded)
        for group in ("hist", "cand"):
            if complete[group] and self.sequence_tokens:
                outputs[group] = self._tokens(features, group, embedded)
        if complete["hist"]:
            ids = [ops.cast(features[f.key], "int32") for f in self.schema.group("hist")]
            nonzero = ops.stack([ops.not_equal(i, 0) for i in ids], axis=-1)
            outputs["hist_valid"] = ops.any(nonzero, axis=-1)
            if complete["cand"]:
                outputs["hist_visible"] = self._visible(features, outputs["hist_valid"])
        for group in ("user", "ctx"):
            if complete[group]:
                parts = [embedded[f.key] for f in self.schema.group(group)]
                outputs[group] = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
        if complete["num"]:
            outputs["num"] = ops.stack(
                [ops.cast(features[f.key], self.compute_dtype) for f in self.schema.group("num")], axis=-1
            )
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "schema": self.schema.to_dict(),
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
                "sequence_tokens": self.sequence_tokens,
            }
        )
        return config
