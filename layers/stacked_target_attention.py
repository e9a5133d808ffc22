import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.swiglu import SwiGLU
from zoo.layers.target_cross_attention import TargetCrossAttention


@keras.saving.register_keras_serializable(package="zoo")
class StackedTargetAttention(keras.layers.Layer):
    """STCA, stacked target-to-history cross attention (Guan et al., "Make It Long, Keep It Fast: End-to-End
    10k-Sequence Modeling at Billion Scale on Douyin", ByteDance, arXiv:2511.06077, 2025; ReST's "STCA"
    baseline).

    No self-attention over the history: the target is the only query, and N stacked layers refine it.
    With X [L, d] the behaviour tokens and x_t [d] the target token:

        q^(1)   = LN(SwiGLU_t(x_t))
        X~^(i)  = LN_i(SwiGLU_i(X))                                   the history as layer i reads it
        z^(i)   = MHA_i(q^(i), X~^(i), X~^(i))                        single-query cross attention
        q^(i+1) = W_f^(i+1) [z^(1); ...; z^(i); x_t]                  the fused query of the next layer
        output  = z^(N)

    Cost O(N L d) per candidate, linear in L. Every candidate m is its own target and reads only the
    behaviours `allowed[m]` (FeatureEmbedding's hist_visible), so candidates never see each other or
    a behaviour at or after their own time.

    Where the paper is silent or ambiguous: "previous layer outputs" in the fused query is read as all
    of z^(1..i) (with x_t, the target token before its SwiGLU); W_f has a bias; the SwiGLU FFNs are the
    zoo's (no biases, inner width `ffn_dim`), the norms LayerNorm with epsilon 1e-6, the cross attention
    `TargetCrossAttention` with biases; the stack's output is the last layer's z^(N).

    Args:
        num_layers: N, stacked cross-attention layers.
        num_heads: H, heads of each cross attention (d divisible by H).
        ffn_dim: inner width of the SwiGLU transforms.
        epsilon: LayerNorm epsilon.
    Call:
        target [B, M, d], history [B, L, d], allowed [B, M, L] bool -> z^(N) [B, M, d].
    """

    def __init__(self, num_layers, num_heads, ffn_dim, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_layers", num_layers), ("num_heads", num_heads), ("ffn_dim", ffn_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ZooError(f"StackedTargetAttention {name} is {value!r}; it must be an integer >= 1")
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.ffn_dim = ffn_dim
        self.epsilon = epsilon
        policy = self.dtype_policy
        self.target_ffn = SwiGLU(ffn_dim, dtype=policy, name="target_ffn")
        self.target_norm = keras.layers.LayerNormalization(epsilon=epsilon, dtype=policy, name="target_norm")
        self.history_ffns, self.history_norms, self.attentions, self.fusions = [], [], [], []
        for i in range(1, num_layers + 1):
            self.history_ffns.append(SwiGLU(ffn_dim, dtype=policy, name=f"history_ffn_{i}"))
            self.history_norms.append(
                keras.layers.LayerNormalization(epsilon=epsilon, dtype=policy, name=f"history_norm_{i}")
            )
            self.attentions.append(TargetCrossAttention(num_heads, dtype=policy, name=f"cross_attention_{i}"))

    def build(self, target_shape, history_shape=None, allowed_shape=None):
        width = int(target_shape[-1])
        if int(history_shape[-1]) != width:
            raise ZooError(f"StackedTargetAttention: the target width {width} and history width "
                           f"{history_shape[-1]} differ")
        if width % self.num_heads:
            raise ZooError(f"StackedTargetAttention: the width {width} is not divisible by num_heads {self.num_heads}")
        self.target_ffn.build(target_shape)
        self.target_norm.build(target_shape)
        for ffn, norm, attention in zip(self.history_ffns, self.history_norms, self.attentions):
            ffn.build(history_shape)
            norm.build(history_shape)
            attention.build(target_shape, history_shape, allowed_shape)
        for i in range(2, self.num_layers + 1):  # W_f^(i) reads [z^(1); ...; z^(i-1); x_t]
            fusion = keras.layers.Dense(width, dtype=self.dtype_policy, name=f"fusion_{i}")
            fusion.build(tuple(target_shape[:-1]) + (i * width,))
            self.fusions.append(fusion)
        self.built = True

    def call(self, target, history, allowed):
        query = self.target_norm(self.target_ffn(target))  # q^(1)
        outputs = []
        for i in range(self.num_layers):
            if i:
                query = self.fusions[i - 1](ops.concatenate(outputs + [target], axis=-1))
            memory = self.history_norms[i](self.history_ffns[i](history))  # X~^(i)
            outputs.append(self.attentions[i](query, memory, allowed))  # z^(i)
        return outputs[-1]

    def compute_output_shape(self, target_shape, history_shape=None, allowed_shape=None):
        return target_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_layers": self.num_layers, "num_heads": self.num_heads, "ffn_dim": self.ffn_dim,
             "epsilon": self.epsilon}
        )
        return config
