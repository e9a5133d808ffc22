import dataclasses

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.schema import Schema


@keras.saving.register_keras_serializable(package="zoo")
class FieldTokens(keras.layers.Layer):
    """The field tokens of the feature-interaction baselines (FM, DeepFM, DCN-V2, AutoInt, FiBiNET):
    one k-dimensional vector e_f per field f, for each of the M candidates.

    The interaction papers see a row as F one-hot (or multi-hot) fields x_f, each with its embedding
    e_f = V_f x_f (FM's v_i x_i; DeepFM §2.1, AutoInt eq 2, FiBiNET §3.2.2 "embedding layer"). From the
    dict FeatureEmbedding returns, in this order:

        cand_<f>   the candidate's own embedding (one token per candidate m);
        hist_<f>   mean of the embeddings of the behaviours visible to candidate m (FeatureEmbedding's
                   hist_visible [B, M, L]: real and strictly before m's exposure), zero when none is
                   visible; one token per hist field (AutoInt eq 2's multi-valued field, the average);
        user_<f>, ctx_<f>  the field's embedding, the same for every candidate;
        num_<f>    v_f * a_f with a learned a_f in R^k (AutoInt eq 3).

    Decisions where the papers are silent:
    - One k for all fields: the papers embed every field with one size, so k is the schema's common
      embedding_dim and an id field of another size is a one-line ZooError (no projection: a per-field
      Dense would add parameters FM does not have, and every data set of the zoo has one size).
    - FM's first-order weights w_i live in a second FeatureEmbedding built from
      `FieldTokens.first_order_schema(schema)` (every embedding_dim 1) and a second FieldTokens over
      it: its tokens [B, M, F, 1] are w_f x_f per field (a pooled history field gives the mean of its
      visible behaviours' w, a numeric field w_f v_f, its a_f in R^1 being w_f).
    - A pooled hist field is one field: FM-style pairwise terms see it as one vector, so interactions
      between two behaviours of the same field are not modelled (as DeepCTR/FuxiCTR treat sequence
      fields).

    Args:
        schema: the input contract (needs at least one cand_ feature).
    Call:
        embedded (the dict FeatureEmbedding returns) -> tokens [B, M, F, k]; `field_keys` names the F
        fields in order.
    """

    def __init__(self, schema, **kwargs):
        super().__init__(**kwargs)
        self.schema = Schema.from_dict(schema)
        if not self.schema.group("cand"):
            raise ZooError("field tokens need at least one cand_ feature to score")
        ids = [f for f in self.schema.features if f.group != "num"]
        odd = [f for f in ids if f.embedding_dim != ids[0].embedding_dim]
        if odd:
            raise ZooError(
                f"field tokens need one embedding_dim k for every id feature, but {ids[0].key} has "
                f"{ids[0].embedding_dim} and {odd[0].key} has {odd[0].embedding_dim}"
            )
        self.dim = ids[0].embedding_dim
        self.field_keys = [f.key for group in ("cand", "hist", "user", "ctx", "num") for f in self.schema.group(group)]

    @staticmethod
    def first_order_schema(schema):
        """`schema` with every embedding_dim 1: its FeatureEmbedding holds FM's scalar weights w_i."""
        schema = Schema.from_dict(schema)
        return dataclasses.replace(schema, features=[dataclasses.replace(f, embedding_dim=1) for f in schema.features])

    def build(self, embedded_shape=None):
        numerics = len(self.schema.group("num"))
        if numerics:
            self.numeric_scale = self.add_weight(
                shape=(numerics, self.dim), initializer="random_normal", name="numeric_scale"
            )  # a_f
        self.built = True

    def call(self, embedded):
        candidates = [embedded[f.key] for f in self.schema.group("cand")]  # each [B, M, k]
        m = candidates[0].shape[1]
        tokens = list(candidates)
        if self.schema.group("hist"):
            visible = ops.cast(embedded["hist_visible"], self.compute_dtype)  # [B, M, L]
            count = ops.maximum(ops.sum(visible, axis=-1, keepdims=True), 1.0)
            weights = visible / count
            tokens += [ops.einsum("bml,bld->bmd", weights, embedded[f.key]) for f in self.schema.group("hist")]
        for group in ("user", "ctx"):
            tokens += [ops.repeat(embedded[f.key][:, None, :], m, axis=1) for f in self.schema.group(group)]
        tokens = ops.stack(tokens, axis=2)  # [B, M, F_id, k]
        if self.schema.group("num"):
            numeric = embedded["num"][:, :, None] * self.numeric_scale  # [B, F_num, k]
            numeric = ops.repeat(numeric[:, None], m, axis=1)  # [B, M, F_num, k]
            tokens = ops.concatenate([tokens, numeric], axis=2)
        return tokens

    def get_config(self):
        config = super().get_config()
        config.update({"schema": self.schema.to_dict()})
        return config
