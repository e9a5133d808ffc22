import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_softmax


@keras.saving.register_keras_serializable(package="zoo")
class PFKVDecoderLayer(keras.layers.Layer):
    """One layer of ReST's light cross decoder C (§2.2): PF-KV cross-attention + token-specific FFN.

        CrossAttn(Z, H) = [softmax((Z W_Q^i) H^T / sqrt(d_h)) H ⊙ σ(Z W_go^i)] W_o
        F_i(x_i) = F(x_i; W_i),  i = 1..K

    The encoder memory H is both key and value ("prefix-free K/V": no W_K, no W_V, no value gate), split
    into heads of width d_h = d / num_heads. Each query token type i ([CLS], context, user, candidate)
    has its own W_Q^i, output gate W_go^i and SwiGLU FFN W_1^i, W_3^i, W_2^i (token-specific
    parameters, TSP); W_o is shared. Query tokens do not attend to each other, so a token's output
    depends only on itself and H. The residual form is Pre-LN (the paper does not specify C's):

        z <- z + CrossAttn(LN(z), H);   z <- z + F_i(LN(z))

    Query m attends only to the memory positions `allowed[b, m]` (real behaviours before the sample's
    time: the prefix-valid mask of user-level shared-prefix training); none allowed gives a zero
    attention output.

    Args:
        num_heads: heads of the cross-attention.
        num_token_types: K, the query token types (token axis 2 of z holds them in a fixed order).
        ffn_dim: inner width of the token-specific SwiGLU FFNs.
        epsilon: LayerNorm epsilon.
    Call:
        z [B, M, K, d], memory H [B, L, d], allowed [B, M, L] bool -> [B, M, K, d].
    """

    def __init__(self, num_heads, num_token_types, ffn_dim, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.num_token_types = num_token_types
        self.ffn_dim = ffn_dim
        self.epsilon = epsilon
        self.attention_norm, self.ffn_norm = (
            keras.layers.LayerNormalization(epsilon=epsilon, dtype=self.dtype_policy, name=name)
            for name in ("attention_norm", "ffn_norm")
        )

    def build(self, z_shape, memory_shape=None, allowed_shape=None):
        k, d, f = self.num_token_types, z_shape[-1], self.ffn_dim
        if z_shape[-2] != k or d % self.num_heads:
            raise ZooError(
                f"PFKVDecoderLayer: the query tokens must be [B, M, {k}, d] with d divisible by "
                f"{self.num_heads} heads, got {list(z_shape)}"
            )
        shapes = {"w_q": (k, d, d), "w_go": (k, d, d), "w_o": (d, d), "w_1": (k, d, f), "w_3": (k, d, f), "w_2": (k, f, d)}
        for name, shape in shapes.items():
            initializer = keras.initializers.GlorotUniform()
            if len(shape) == 3:  # one Glorot matrix per token type
                initializer = _PerTypeGlorot()
            setattr(self, name, self.add_weight(shape=shape, initializer=initializer, name=name))
        self.attention_norm.build(z_shape)
        self.ffn_norm.build(z_shape)
        self.built = True

    def cross_attention(self, z, memory, allowed):
        b, m, k = (ops.shape(z)[i] for i in range(3))
        d = z.shape[-1]
        d_h = d // self.num_heads
        q = ops.einsum("bmkd,kde->bmke", z, self.w_q)
        q = ops.reshape(q, (b, m, k, self.num_heads, d_h))
        h = ops.reshape(memory, (b, ops.shape(memory)[1], self.num_heads, d_h))  # K = V = H
        logits = ops.einsum("bmkhe,blhe->bmkhl", q, h) * ops.cast(1.0 / d_h**0.5, q.dtype)
        allowed = allowed[:, :, None, None, :]  # [B, M, 1, 1, L]
        weights = masked_softmax(logits, allowed)
        context = ops.reshape(ops.einsum("bmkhl,blhe->bmkhe", weights, h), (b, m, k, d))
        gate = ops.sigmoid(ops.einsum("bmkd,kde->bmke", z, self.w_go))
        return ops.matmul(context * gate, self.w_o)

    def token_ffn(self, z):
        hidden = ops.silu(ops.einsum("bmkd,kdf->bmkf", z, self.w_1)) * ops.einsum("bmkd,kdf->bmkf", z, self.w_3)
        return ops.einsum("bmkf,kfd->bmkd", hidden, self.w_2)

    def call(self, z, memory, allowed):
        z = z + self.cross_attention(self.attention_norm(z), memory, allowed)
        return z + self.token_ffn(self.ffn_norm(z))

    def compute_output_shape(self, z_shape, memory_shape=None, allowed_shape=None):
        return z_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "num_token_types": self.num_token_types,
                "ffn_dim": self.ffn_dim,
                "epsilon": self.epsilon,
            }
        )
        return config


class _PerTypeGlorot(keras.initializers.Initializer):
    """Glorot-uniform over the last two axes of a [K, fan_in, fan_out] stack of per-type matrices."""

    def __call__(self, shape, dtype=None):
        limit = (6.0 / (shape[-2] + shape[-1])) ** 0.5
        return keras.random.uniform(shape, -limit, limit, dtype=dtype)
