import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_softmax


def time_gap_bucket(gap, num_buckets):
    """The log2 bucket of a time gap in integer seconds: 0 for gap < 1, else min(1 + floor(log2 gap),
    num_buckets - 1), computed exactly on integers (the count of thresholds 2^0 .. 2^(K-2) it reaches), so
    no float rounding moves a gap across a bucket edge. int32, the shape of `gap`."""
    gap = ops.convert_to_tensor(gap)
    thresholds = ops.convert_to_tensor([2**i for i in range(num_buckets - 1)], dtype=gap.dtype)
    return ops.sum(ops.cast(ops.greater_equal(gap[..., None], thresholds), "int32"), axis=-1)


@keras.saving.register_keras_serializable(package="zoo")
class ExactSearchUnit(keras.layers.Layer):
    """SIM's exact search unit (Pi et al., Search-based User Interest Modeling with Lifelong Sequential
    Behavior Data for Click-Through Rate Prediction, CIKM 2020, §4.2): multi-head target attention of
    the candidate e_a over the k behaviours its general search unit picked.

        z_j = concat(e_j, e_t_j)            e_t_j: embedding of the time gap Δ_j between A's exposure and j
        att_i = softmax_j((W_bi z_j) · (W_ai e_a) / sqrt(d_att))          head i of H, over the picked j
        head_i = Σ_j att_i,j z_j
        U(A) = concat(head_1, ..., head_H)                                  [H (D + d_t)]

    Where the paper is silent: the logits are scaled by 1/sqrt(d_att) and the projections have no
    biases; Δ_j is bucketed by `time_gap_bucket` (log2 of the seconds, K = 32 buckets, the zoo's BST
    scheme) into a learned table of d_t; the heads pool z_j itself, with no value or output projection,
    as the paper writes head_i. Picked slots marked not allowed get weight 0; a candidate with none
    returns zeros.

    Args:
        num_heads: H.
        attention_dim: d_att, the width of W_ai e_a and W_bi z_j per head.
        time_embedding_dim: d_t.
        num_time_buckets: K.
    Call:
        candidates [B, M, D_a], behaviours [B, M, k, D], allowed [B, M, k] bool, gaps [B, M, k] integer
        seconds -> U [B, M, H (D + d_t)].
    """

    def __init__(self, num_heads=2, attention_dim=32, time_embedding_dim=8, num_time_buckets=32, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("attention_dim", attention_dim),
                            ("time_embedding_dim", time_embedding_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ZooError(f"ExactSearchUnit {name} is {value!r}; it must be an integer >= 1")
        buckets = num_time_buckets
        if isinstance(buckets, bool) or not isinstance(buckets, int) or not 2 <= buckets <= 32:
            raise ZooError(f"ExactSearchUnit num_time_buckets is {num_time_buckets!r}; it must be an integer in 2..32")
        self.num_heads = num_heads
        self.attention_dim = attention_dim
        self.time_embedding_dim = time_embedding_dim
        self.num_time_buckets = num_time_buckets
        self.time_embedding = keras.layers.Embedding(
            num_time_buckets, time_embedding_dim, dtype=self.dtype_policy, name="time_embedding"
        )

    def build(self, candidates_shape, behaviours_shape=None, allowed_shape=None, gaps_shape=None):
        width = int(behaviours_shape[-1]) + self.time_embedding_dim
        init = keras.initializers.GlorotUniform()
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(int(candidates_shape[-1]), self.num_heads, self.attention_dim), initializer=init
        )
        self.key_kernel = self.add_weight(
            name="key_kernel", shape=(width, self.num_heads, self.attention_dim), initializer=init
        )
        self.time_embedding.build(None)
        self.built = True

    def call(self, candidates, behaviours, allowed, gaps):
        e_t = self.time_embedding(time_gap_bucket(gaps, self.num_time_buckets))  # [B, M, k, d_t]
        z = ops.concatenate([behaviours, e_t], axis=-1)  # [B, M, k, D + d_t]
        query = ops.einsum("bmd,dhc->bmhc", candidates, self.query_kernel)
        keys = ops.einsum("bmjd,dhc->bmhjc", z, self.key_kernel)
        logits = ops.einsum("bmhc,bmhjc->bmhj", query, keys) / math.sqrt(self.attention_dim)
        weights = masked_softmax(logits, ops.cast(allowed, "bool")[:, :, None, :])  # [B, M, H, k]
        heads = ops.einsum("bmhj,bmjd->bmhd", weights, z)
        m = ops.shape(heads)[1]
        return ops.reshape(heads, (-1, m, self.num_heads * heads.shape[-1]))

    def compute_output_shape(self, candidates_shape, behaviours_shape=None, allowed_shape=None, gaps_shape=None):
        width = int(behaviours_shape[-1]) + self.time_embedding_dim
        return tuple(candidates_shape[:2]) + (self.num_heads * width,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "attention_dim": self.attention_dim,
                "time_embedding_dim": self.time_embedding_dim,
                "num_time_buckets": self.num_time_buckets,
            }
        )
        return config
