import keras
from keras import ops

from zoo.errors import ZooError
from zoo.schema import Schema


@keras.saving.register_keras_serializable(package="zoo")
class CTRTransformerTokens(keras.layers.Layer):
    """The token sequence X^(0) in R^{n x d} of the CTR Transformer that DeRes and its baselines share.

    DeRes §"preliminaries" embeds "the user features and the behaviour sequence" as X^(0); this is
    the OneTrans-style layout, one candidate per pass:

        [CLS] | cand fields | user fields | ctx fields | numeric fields | behaviour positions
          1   |    F_cand   |   F_user    |   F_ctx    |     F_num      |         L

    - [CLS] is the target token: a learned vector plus the sum of the candidate's field tokens; its
      output feeds the prediction (y = sigmoid(w . x_L[CLS]), eq 1). Decision: the issue allows
      reading "the target/[CLS] token"; a candidate-aware token 0 lets the first layer already attend
      from the candidate to the behaviours (target attention, as OneTrans reads its candidate
      tokens), where a plain [CLS] would need a second layer to learn which behaviours match.
    - Each categorical field (cand_, user_, ctx_) is one token: its embedding projected to d by the
      field's own Dense.
    - Each numeric field f is one token v_f * a_f + b_f (a_f, b_f in R^d learned).
    - Each behaviour position is one token (no pooling, no target attention): the behaviour's field
      embeddings (FeatureEmbedding's "hist") projected to d, plus a learned position embedding;
      padded positions, and in each candidate's pass the behaviours at or after that candidate's
      time (FeatureEmbedding's "hist_visible"), are masked out of attention. Times are not encoded
      (DeRes' backbone has no time encoding).
    - M > 1 candidates: each candidate gets its own pass with its own [CLS] (candidates never see
      each other); the batch of passes is B * M rows, row b * M + m for candidate m of row b.

    Args:
        schema: the input contract (needs at least one cand_ feature).
        width: d, the token width.
    Call:
        embedded (the dict FeatureEmbedding returns) -> (tokens [B*M, n, d], valid [B*M, n] bool).
    """

    def __init__(self, schema, width, **kwargs):
        super().__init__(**kwargs)
        self.schema = Schema.from_dict(schema)
        if not self.schema.group("cand"):
            raise ZooError("the CTR Transformer needs at least one cand_ feature to score")
        self.width = width
        self.field_keys = [f.key for group in ("cand", "user", "ctx") for f in self.schema.group(group)]
        self.field_projections = {
            key: keras.layers.Dense(width, name=f"project_{key}", dtype=self.dtype_policy) for key in self.field_keys
        }
        self.history_projection = (
            keras.layers.Dense(width, name="project_hist", dtype=self.dtype_policy) if self.schema.group("hist") else None
        )

    def build(self, embedded_shape=None):
        for key in self.field_keys:
            self.field_projections[key].build((None, self.schema.feature(key).embedding_dim))
        self.cls = self.add_weight(shape=(self.width,), initializer="random_normal", name="cls")
        numerics = len(self.schema.group("num"))
        if numerics:
            self.numeric_scale = self.add_weight(shape=(numerics, self.width), initializer="random_normal", name="numeric_scale")
            self.numeric_bias = self.add_weight(shape=(numerics, self.width), initializer="zeros", name="numeric_bias")
        if self.history_projection is not None:
            fields = self.schema.sequence_fields()
            token_dim = sum(self._field_dim(name) for name in fields)
            self.history_projection.build((None, None, token_dim))
            self.positions = self.add_weight(
                shape=(self.schema.sequence_length, self.width), initializer="random_normal", name="positions"
            )
        self.built = True

    def _field_dim(self, name):
        group = "hist" if f"hist_{name}" in self.schema.keys() else "cand"
        return self.schema.feature(f"{group}_{name}").embedding_dim

    def call(self, embedded):
        m = self.schema.num_candidates
        candidate = ops.stack(
            [self.field_projections[f.key](embedded[f.key]) for f in self.schema.group("cand")], axis=2
        )  # [B, M, F_cand, d]
        candidate = ops.reshape(candidate, (-1, candidate.shape[2], self.width))  # [B*M, F_cand, d]
        shared = [
            self.field_projections[f.key](embedded[f.key])[:, None, :]
            for group in ("user", "ctx")
            for f in self.schema.group(group)
        ]
        if self.schema.group("num"):
            shared.append(embedded["num"][:, :, None] * self.numeric_scale + self.numeric_bias)  # [B, F_num, d]
        fixed = sum(t.shape[1] for t in shared)
        if self.history_projection is not None:
            shared.append(self.history_projection(embedded["hist"]) + self.positions)  # [B, L, d]
        cls = ops.sum(candidate, axis=1, keepdims=True) + self.cls  # the target token [B*M, 1, d]
        parts = [cls, candidate]
        if shared:
            parts.append(ops.repeat(ops.concatenate(shared, axis=1), m, axis=0))
        tokens = ops.concatenate(parts, axis=1)
        valid = ops.ones_like(tokens[:, : 1 + candidate.shape[1] + fixed, 0], dtype="bool")
        if self.history_projection is not None:
            length = ops.shape(embedded["hist"])[1]
            history_valid = ops.reshape(embedded["hist_visible"], (-1, length))  # [B*M, L], row b * M + m
            valid = ops.concatenate([valid, history_valid], axis=1)
        return tokens, valid

    def get_config(self):
        config = super().get_config()
        config.update({"schema": self.schema.to_dict(), "width": self.width})
        return config
