import keras

from zoo.errors import ZooError
from zoo.layers.dga import DualGatedAttention
from zoo.layers.rote import default_granularities
from zoo.layers.srn import SRN, switch_layer
from zoo.layers.swiglu import SwiGLU


@keras.saving.register_keras_serializable(package="zoo")
class ReSTEncoder(keras.layers.Layer):
    """The behaviour encoder T of ReST (§2.1, Figure 1 left), computed once per user: H = T(S_u).

        x = Dense_d(behaviour tokens)
        for l = 1..depth:  x = SRN_l(DGA_l, FFN_l)(x)      (one α_l for both residual paths)
        H = LN(x)

    DGA_l is causal dual-gated self-attention over the real behaviours (`valid`), its heads rotated by
    RoPE (τ_h = 0) or RoTE (τ_h > 0 seconds) with `time_granularities` (default: one RoPE head, then
    s/min/h/day/week/quarter/year); FFN_l is the SwiGLU FFN (SiLU(x W_1) ⊙ x W_3) W_2. Layers
    l <= L_switch = `switch_layer(depth)` (about 25% of the depth, at least 1) take SRN's Post-LN form,
    the deeper ones its Pre-LN form. The final LN is not given by the paper; it normalises the memory
    for the decoder whichever form the last layer has.

    H_i depends only on behaviours 1..i (causal), so one pass over a user's history serves every
    sample of the user (ReST §2.4).

    Args:
        model_dim: d, the width of T.
        num_heads: attention heads.
        depth: the number of layers.
        ffn_dim: the inner width of the SwiGLU FFNs.
        time_granularities: τ_h in seconds per head (0 = RoPE), or None for the default.
        alpha_initial: the initial α_l of SRN (0.01 in the paper).
        epsilon: LayerNorm epsilon.
    Call:
        hist_tokens [B, L, D], valid [B, L] bool (False on padding), hist_time [B, L] int seconds
        -> H [B, L, d].
    """

    def __init__(
        self,
        model_dim,
        num_heads,
        depth,
        ffn_dim,
        time_granularities=None,
        alpha_initial=0.01,
        epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if time_granularities is not None and len(time_granularities) != num_heads:
            raise ZooError(
                f"ReSTEncoder: time_granularities has {len(time_granularities)} entries but num_heads is {num_heads}"
            )
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.depth = depth
        self.ffn_dim = ffn_dim
        self.time_granularities = None if time_granularities is None else [int(t) for t in time_granularities]
        self.alpha_initial = alpha_initial
        self.epsilon = epsilon
        granularities = self.time_granularities or default_granularities(num_heads)
        policy = self.dtype_policy
        self.behaviour_projection = keras.layers.Dense(model_dim, dtype=policy, name="behaviour_projection")
        self.encoder_layers = []
        for l in range(1, depth + 1):
            attention = DualGatedAttention(
                num_heads, causal=True, time_granularities=granularities, dtype=policy, name=f"attention_{l}"
            )
            ffn = SwiGLU(ffn_dim, dtype=policy, name=f"ffn_{l}")
            self.encoder_layers.append(
                SRN(attention, ffn, post_norm=l <= switch_layer(depth), alpha_initial=alpha_initial,
                    epsilon=epsilon, dtype=policy, name=f"layer_{l}")
            )
        self.memory_norm = keras.layers.LayerNormalization(epsilon=epsilon, dtype=policy, name="memory_norm")

    def build(self, hist_tokens_shape, valid_shape=None, hist_time_shape=None):
        self.behaviour_projection.build(hist_tokens_shape)
        shape = tuple(hist_tokens_shape[:-1]) + (self.model_dim,)
        for layer in self.encoder_layers:
            layer.build(shape)
        self.memory_norm.build(shape)
        self.built = True

    def call(self, hist_tokens, valid, hist_time):
        x = self.behaviour_projection(hist_tokens)
        for layer in self.encoder_layers:
            x = layer(x, valid=valid, time=hist_time)
        return self.memory_norm(x)

    def compute_output_shape(self, hist_tokens_shape, valid_shape=None, hist_time_shape=None):
        return tuple(hist_tokens_shape[:-1]) + (self.model_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "model_dim": self.model_dim,
                "num_heads": self.num_heads,
                "depth": self.depth,
                "ffn_dim": self.ffn_dim,
                "time_granularities": self.time_granularities,
                "alpha_initial": self.alpha_initial,
                "epsilon": self.epsilon,
            }
        )
        return config
