import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class RelativeAttentionBias(keras.layers.Layer):
    """SUAN eq 4: bias_ij = f1(Δt_ij) + f2(Δp_ij), one bias shared by every head.

    f2 is a learned table of 2N + 1 entries read at (N - 1) + p_j - p_i (the SUAN authors' code, as in
    HSTU); f1 is a learned table of `num_time_buckets` + 1 entries read at
    clip(floor(log(max(|t_i - t_j|, 1)) / 0.301), 0, num_time_buckets).

    The layer takes positions and times of queries and keys in any two shapes that broadcast together,
    so a dense [L, L] bias and the bias of only the allowed pairs of sparse attention (§3.3.1) come
    from the same tables. Times are float seconds relative to any common reference (only |t_i - t_j|
    matters; subtract a reference before casting so int64 seconds survive JAX's int32). Pass times
    as integers: the gap is computed in float32 under every dtype policy, but under mixed precision
    Keras casts float inputs to float16 before `call` (float16 cannot hold a day in seconds). The bias
    comes out in the compute dtype.

    SuanEncoder computes this bias from one layer shared by all its blocks, as the authors' code does
    (`share_relative_bias=True`), or from one layer per block.

    Args:
        max_length: N, the number of positions (history length L plus the candidates' shared one).
        num_time_buckets: the last time bucket (128 in the authors' code: a table of 129 entries).
    """

    def __init__(self, max_length, num_time_buckets=128, **kwargs):
        super().__init__(**kwargs)
        self.max_length = int(max_length)
        self.num_time_buckets = int(num_time_buckets)

    def build(self, input_shape=None):
        init = keras.initializers.TruncatedNormal(stddev=0.02)
        self.position_table = self.add_weight(name="position_table", shape=(2 * self.max_length + 1,), initializer=init)
        self.time_table = self.add_weight(name="time_table", shape=(self.num_time_buckets + 1,), initializer=init)
        self.built = True

    def time_bucket(self, delta_t):
        """clip(floor(log(max(|Δt|, 1)) / 0.301), 0, num_time_buckets) as int32."""
        log_gap = ops.log(ops.maximum(ops.abs(delta_t), 1.0)) / 0.301
        return ops.cast(ops.clip(ops.floor(log_gap), 0, self.num_time_buckets), "int32")

    def call(self, query_positions, key_positions, query_times, key_times):
        delta_p = ops.cast(key_positions, "int32") - ops.cast(query_positions, "int32")
        position_index = ops.clip(self.max_length - 1 + delta_p, 0, 2 * self.max_length)
        delta_t = ops.cast(query_times, "float32") - ops.cast(key_times, "float32")
        bias = ops.take(self.position_table, position_index) + ops.take(self.time_table, self.time_bucket(delta_t))
        return ops.cast(bias, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length, "num_time_buckets": self.num_time_buckets})
        return config
