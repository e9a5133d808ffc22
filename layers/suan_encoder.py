import keras
from keras import ops

from zoo.layers.relative_attention_bias import RelativeAttentionBias
from zoo.layers.uab import UAB


@keras.saving.register_keras_serializable(package="zoo")
class SuanEncoder(keras.layers.Layer):
    """SUAN's encoder (§3.1-3.2): the target-aware sequence through l stacked UABs.

    The history tokens [B, L, d] take positions 0..L-1 and the M candidate tokens all take
    position L (each candidate is scored as if it alone followed the behaviours visible to it,
    LightSUAN §3.3.1). Candidate m reads the behaviours `history_visible[m]` allows (real and before
    its exposure time, FeatureEmbedding's hist_visible), so nothing from its label's future reaches
    its score. As in the authors' code a learned absolute position table is added, plus Dense(time
    embedding) of log(1 + gap): for a behaviour the seconds since the previous behaviour, for a
    candidate the seconds since the newest behaviour visible to it (0 where none is). Both are causal
    and work on time differences, so int64 seconds survive JAX's int32 and a behaviour never sees a
    later one. The blocks get int32 seconds relative to the newest behaviour (integers: under mixed
    precision Keras would cast float inputs to float16, which cannot hold a day in seconds).

    The eq 4 relative bias (`RelativeAttentionBias`, a position and a time table) is by default one
    layer shared by every block, as in the authors' code, which computes the bias once and adds it in
    every layer; `share_relative_bias=False` gives each block its own tables (l times the bias
    parameters; eq 4 does not say whether f1, f2 are per layer).

    `encode_history` runs the history once and returns a cache; `encode_candidates` scores any
    number of candidates on it, each with its own visibility. With alignment_pool="causal", `call`
    equals the two chained.

    Args:
        num_layers: l.
        num_heads: h.
        sequence_length: L.
        window_size, dilation: LightSUAN's k and r (None, 1: full attention).
        alignment_pool: "causal" or "global" (see AFNet).
        share_relative_bias: one eq 4 bias for all blocks (True) or one per block (False).
    """

    def __init__(self, num_layers, num_heads, sequence_length, window_size=None, dilation=1,
                 alignment_pool="causal", share_relative_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.sequence_length = int(sequence_length)
        self.window_size = window_size
        self.dilation = int(dilation)
        self.alignment_pool = alignment_pool
        self.share_relative_bias = bool(share_relative_bias)
        self.relative_bias = None
        if self.share_relative_bias:
            self.relative_bias = RelativeAttentionBias(
                self.sequence_length + 1, dtype=self.dtype_policy, name="relative_bias"
            )
        self.blocks = [
            UAB(num_heads, sequence_length, window_size, dilation, alignment_pool, relative_bias=self.relative_bias,
                dtype=self.dtype_policy, name=f"uab_{i}")
            for i in range(self.num_layers)
        ]

    def build(self, history_shape, candidates_shape=None, history_valid_shape=None, history_visible_shape=None,
              history_time_shape=None, candidate_time_shape=None, profile_shape=None):
        d = int(history_shape[-1])
        self.position_table = self.add_weight(
            name="position_table", shape=(self.sequence_length + 1, d),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        )
        # log(1 + gap) reaches ~15 for a day-long gap: a small start keeps the time embedding from
        # swamping the behaviour embeddings (themselves ~0.05) before training has begun.
        self.time_kernel = self.add_weight(
            name="time_kernel", shape=(1, d), initializer=keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self.time_bias = self.add_weight(name="time_bias", shape=(d,), initializer="zeros")
        if self.relative_bias is not None:
            self.relative_bias.build()
        for block in self.blocks:
            block.build(history_shape, profile_shape=profile_shape)
        self.built = True

    def _positions(self):
        """The position table in the compute dtype (`encode_history` and `encode_candidates` also run
        outside __call__, where Keras does not autocast weights)."""
        return ops.cast(self.position_table, self.compute_dtype)

    def _time_embedding(self, gap):
        """Dense(1 -> d) of log(1 + gap seconds); the log in float32, the Dense in the compute dtype."""
        feature = ops.log1p(ops.maximum(ops.cast(gap, "float32"), 0.0))[..., None]
        kernel, bias = ops.cast(self.time_kernel, self.compute_dtype), ops.cast(self.time_bias, self.compute_dtype)
        return ops.matmul(ops.cast(feature, self.compute_dtype), kernel) + bias

    def _embed_history(self, history, history_valid, history_time):
        """Adds the position and time embeddings: (x [B, L, d], valid, relative times, reference)."""
        valid = ops.cast(history_valid, "bool")
        history_time = ops.convert_to_tensor(history_time)
        reference = ops.max(history_time, axis=1, keepdims=True)  # newest behaviour, [B, 1]
        times = ops.cast(history_time - reference, "int32")  # seconds before the newest behaviour
        previous = ops.concatenate([times[:, :1], times[:, :-1]], axis=1)
        previous_valid = ops.concatenate([ops.zeros_like(valid[:, :1]), valid[:, :-1]], axis=1)
        gap = ops.where(ops.logical_and(valid, previous_valid), times - previous, 0)
        x = history + self._positions()[None, : self.sequence_length] + self._time_embedding(gap)
        return x, valid, times, reference

    def _embed_candidates(self, candidates, candidate_time, history_visible, history_times, reference):
        """Adds the shared position L and the time embedding of the gap since the newest behaviour
        visible to each candidate: (x [B, M, d], relative times [B, M])."""
        times = ops.cast(ops.convert_to_tensor(candidate_time) - reference, "int32")
        gaps = times[:, :, None] - history_times[:, None, :]  # [B, M, L], > 0 where visible
        visible = ops.cast(history_visible, "bool")
        newest = ops.min(ops.where(visible, gaps, ops.cast(2**31 - 1, gaps.dtype)), axis=-1)
        gap = ops.where(ops.any(visible, axis=-1), newest, 0)
        return candidates + self._positions()[None, self.sequence_length :] + self._time_embedding(gap), times

    def encode_history(self, history, history_valid, history_time, profile, history_output=True):
        """History [B, L, d] through every block: (last block's history output, cache). NumPy arrays are
        accepted (a public entry point, also run outside __call__). `history_output=False`: (None, cache),
        without the last block's history output, which scoring does not read (see UAB.encode_history)."""
        history, history_valid, history_time, profile = (
            ops.convert_to_tensor(x) for x in (history, history_valid, history_time, profile)
        )
        x, valid, times, reference = self._embed_history(history, history_valid, history_time)
        cache = {"reference": reference, "times": times, "profile": profile}
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x, cache[f"state_{i}"] = block.encode_history(x, profile, valid, times, history_output or i < last)
        return x, cache

    def encode_candidates(self, candidates, candidate_time, history_visible, cache):
        """Candidates [B, M, d] on a history cache, history_visible [B, M, L]: the last block's
        candidate output [B, M, d]. NumPy arrays are accepted, in the cache too."""
        candidates, candidate_time, history_visible = (
            ops.convert_to_tensor(x) for x in (candidates, candidate_time, history_visible)
        )
        cache = keras.tree.map_structure(ops.convert_to_tensor, cache)
        x, times = self._embed_candidates(
            candidates, candidate_time, history_visible, cache["times"], cache["reference"]
        )
        for i, block in enumerate(self.blocks):
            x = block.encode_candidates(x, cache["profile"], cache[f"state_{i}"], history_visible, times)
        return x

    def call(self, history, candidates, history_valid, history_visible, history_time, candidate_time, profile):
        """The candidates' last-block output [B, M, d]."""
        if self.alignment_pool == "causal":
            _, cache = self.encode_history(history, history_valid, history_time, profile, history_output=False)
            return self.encode_candidates(candidates, candidate_time, history_visible, cache)
        x, valid, times, reference = self._embed_history(history, history_valid, history_time)
        c, c_times = self._embed_candidates(candidates, candidate_time, history_visible, times, reference)
        for block in self.blocks:
            x, c = block(x, c, profile, valid, history_visible, times, c_times)
        return c

    def compute_output_spec(self, history, candidates, *args):
        return keras.KerasTensor(candidates.shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "sequence_length": self.sequence_length,
                "window_size": self.window_size,
                "dilation": self.dilation,
                "alignment_pool": self.alignment_pool,
                "share_relative_bias": self.share_relative_bias,
            }
        )
        return config
