import keras
from keras import ops

from zoo.errors import ZooError


@keras.saving.register_keras_serializable(package="zoo")
class TimeGapEmbedding(keras.layers.Layer):
    """BST's positional feature (Chen et al. 2019, the embedding layer): the time gap to the target, bucketed
    and embedded.

        pos(v_i) = t(v_t) - t(v_i)                    (seconds; v_t the target item, pos(v_t) = 0)
        bucket(Δ) = 0                                 for Δ < 1 (the target itself)
                  = min(1 + floor(log2 Δ), K - 1)     for Δ >= 1
        p_i = P[bucket(pos(v_i))],   P a learned K x d_p table

    BST embeds pos(v_i) but says neither how it is discretised nor the table's size: log2 buckets are
    the zoo's choice (a gap's order of magnitude: 1 s, 2-3 s, 4-7 s, ..., the last bucket holding every
    gap of 2^(K-2) s or more; K = 32 reaches 2^30 s, 34 years). The bucket is computed exactly on
    integers, as the count of thresholds 2^0, ..., 2^(K-2) the gap reaches, so no float rounding moves
    a gap across a bucket edge.

    For M candidates, each candidate m is its own target: the sequence [v_1, ..., v_L, v_t] gets
    positions relative to t(cand_time[m]).

    Args:
        num_buckets: K, 2..32 (thresholds up to 2^30 s stay inside int32 seconds).
        output_dim: d_p, the embedding width.
    Call:
        hist_time [B, L], cand_time [B, M] int seconds -> [B, M, L + 1, d_p]: p_1..p_L, then p_t = P[0].
    """

    def __init__(self, num_buckets=32, output_dim=8, embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_buckets, int) or isinstance(num_buckets, bool) or not 2 <= num_buckets <= 32:
            raise ZooError(f"TimeGapEmbedding num_buckets is {num_buckets!r}; it must be an integer in 2..32")
        if not isinstance(output_dim, int) or isinstance(output_dim, bool) or output_dim < 1:
            raise ZooError(f"TimeGapEmbedding output_dim is {output_dim!r}; it must be an integer >= 1")
        self.num_buckets = num_buckets
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.table = keras.layers.Embedding(
            num_buckets, output_dim, embeddings_initializer=self.embeddings_initializer, dtype=self.dtype_policy,
            name="table",
        )

    def build(self, hist_time_shape=None, cand_time_shape=None):
        self.table.build(None)
        self.built = True

    def buckets(self, hist_time, cand_time):
        """bucket(t(v_t) - t(v_i)) for the sequence [v_1..v_L, v_t] of each candidate: [B, M, L + 1] int32."""
        hist_time = ops.convert_to_tensor(hist_time)
        cand_time = ops.cast(cand_time, hist_time.dtype)
        gap = cand_time[:, :, None] - hist_time[:, None, :]  # pos(v_i), [B, M, L]
        thresholds = ops.convert_to_tensor([2**k for k in range(self.num_buckets - 1)], dtype=hist_time.dtype)
        reached = ops.cast(ops.greater_equal(gap[..., None], thresholds), "int32")
        history = ops.sum(reached, axis=-1)  # [B, M, L], 0..K-1
        target = ops.zeros_like(history[:, :, :1])  # pos(v_t) = 0
        return ops.concatenate([history, target], axis=-1)

    def call(self, hist_time, cand_time):
        return self.table(self.buckets(hist_time, cand_time))

    def compute_output_shape(self, hist_time_shape, cand_time_shape=None):
        length = None if hist_time_shape[1] is None else hist_time_shape[1] + 1
        return (hist_time_shape[0], cand_time_shape[1], length, self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_buckets": self.num_buckets,
                "output_dim": self.output_dim,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
