import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_attention
from zoo.layers.rote import RotaryPositionTime
from zoo.layers.swiglu import SwiGLU

NORMS = ("layer", "rms")
NORM_POSITIONS = ("pre", "post")
FFNS = ("gelu", "relu", "leaky_relu", "swiglu")


@keras.saving.register_keras_serializable(package="zoo")
class CausalTransformerBlock(keras.layers.Layer):
    """One causal Transformer layer over a behaviour sequence, in the variants of the zoo's sequence baselines.

    Multi-head self-attention (Vaswani et al., 2017, "Attention Is All You Need", §3.2):

        MH(X) = [head_1; ...; head_H] W^O,   head_h = A_h (X W_h^V),
        A_h = softmax(Q_h K_h^T / sqrt(d_h)) over the allowed keys,   Q_h = X W_h^Q,  K_h = X W_h^K

    with token i allowed to read token j when j <= i (causal: the sequence is chronological, newest
    last) and token j is valid; a token that may read no key gets zero attention output. With `rope`,
    Q_h and K_h are rotated by RoPE (RoFormer, Su et al. 2021) at their sequence index before the
    product (`RotaryPositionTime` with every head τ_h = 0: the half-split layout, base 10000).

    The layer, with N_1, N_2 = `norm` (LayerNorm or RMSNorm) and Dropout the residual dropout:
        norm_position="pre":   Y = X + Dropout(MH(N_1(X))),     X' = Y + Dropout(FFN(N_2(Y)))
        norm_position="post":  Y = N_1(X + Dropout(MH(X))),     X' = N_2(Y + Dropout(FFN(Y)))
    and FFN one of
        "gelu":        GELU(x W_1 + b_1) W_2 + b_2       (exact erf GELU)
        "relu":        ReLU(x W_1 + b_1) W_2 + b_2       (SASRec §3.2, its point-wise FFN)
        "leaky_relu":  LeakyReLU(x W_1 + b_1) W_2 + b_2  (BST's FFN; slope 0.2, Keras' default: BST names none)
        "swiglu":      (SiLU(x W_1) ⊙ x W_3) W_2          (LLaMA; the zoo's SwiGLU layer, no biases)

    The baselines built from it: the ReST "Trans." baseline (pre, LayerNorm, GELU, RoPE), LLaMA (pre,
    RMSNorm, SwiGLU, RoPE, no biases), SASRec (pre, LayerNorm, ReLU: SASRec's stacked blocks are
    g(x) = x + Dropout(g(LayerNorm(x)))), BST (post, LayerNorm, LeakyReLU: BST's
    S' = LayerNorm(S + Dropout(MH(S))), F = LayerNorm(S' + Dropout(LeakyReLU(S'W^(1) + b^(1))W^(2) + b^(2)))).
    Where those papers are silent: no dropout on the attention probabilities (residual dropout only), the
    biases of Q, K, V, O and the dense FFN follow `use_bias`, LayerNorm/RMSNorm epsilon 1e-6.

    Args:
        num_heads: H; the input width d must be divisible by H (d_h = d / H).
        ffn_dim: the FFN's inner width.
        norm: "layer" (LayerNormalization) or "rms" (RMSNormalization).
        norm_position: "pre" or "post".
        ffn: "gelu", "relu", "leaky_relu" or "swiglu".
        rope: rotate queries and keys by RoPE at their sequence index.
        use_bias: biases in the Q/K/V/O projections and the dense FFNs.
        dropout: residual dropout rate while training.
        epsilon: the norms' epsilon.
    Call:
        x [B, n, d], valid [B, n] bool (False: a key no token reads) -> [B, n, d].
    """

    def __init__(
        self,
        num_heads,
        ffn_dim,
        norm="layer",
        norm_position="pre",
        ffn="gelu",
        rope=False,
        use_bias=True,
        dropout=0.0,
        epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("ffn_dim", ffn_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ZooError(f"CausalTransformerBlock {name} is {value!r}; it must be an integer >= 1")
        for name, value, allowed in (("norm", norm, NORMS), ("norm_position", norm_position, NORM_POSITIONS),
                                     ("ffn", ffn, FFNS)):
            if value not in allowed:
                raise ZooError(f"CausalTransformerBlock {name} is {value!r}; it must be one of {', '.join(allowed)}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ZooError(f"CausalTransformerBlock dropout is {dropout!r}; it must lie in [0, 1)")
        self.num_heads = num_heads
        self.ffn_dim = ffn_dim
        self.norm = norm
        self.norm_position = norm_position
        self.ffn = ffn
        self.rope = bool(rope)
        self.use_bias = bool(use_bias)
        self.dropout = float(dropout)
        self.epsilon = epsilon
        policy = self.dtype_policy
        norm_cls = keras.layers.LayerNormalization if norm == "layer" else keras.layers.RMSNormalization
        self.attention_norm = norm_cls(epsilon=epsilon, dtype=policy, name="attention_norm")
        self.ffn_norm = norm_cls(epsilon=epsilon, dtype=policy, name="ffn_norm")
        self.rotary = RotaryPositionTime([0] * num_heads, dtype=policy, name="rotary") if self.rope else None
        if ffn == "swiglu":
            self.swiglu = SwiGLU(ffn_dim, dtype=policy, name="ffn_swiglu")
        else:
            self.ffn_hidden = keras.layers.Dense(
                ffn_dim, activation=ffn, use_bias=self.use_bias, dtype=policy, name="ffn_hidden"
            )  # Keras' "gelu" is the exact erf form; "leaky_relu" has slope 0.2
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=policy) if self.dropout else None

    def build(self, x_shape, valid_shape=None):
        width = int(x_shape[-1])
        if width % self.num_heads:
            raise ZooError(
                f"CausalTransformerBlock: the width {width} is not divisible by num_heads {self.num_heads}"
            )
        H, K = self.num_heads, width // self.num_heads
        if self.rope and K % 2:
            raise ZooError(
                f"CausalTransformerBlock: RoPE needs an even head width, got {K} (width {width} / {H} heads)"
            )
        self.head_dim = K

        def weight(name, shape, initializer="glorot_uniform"):
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        self.query_kernel = weight("query_kernel", (width, H, K))
        self.key_kernel = weight("key_kernel", (width, H, K))
        self.value_kernel = weight("value_kernel", (width, H, K))
        self.output_kernel = weight("output_kernel", (H, K, width))
        if self.use_bias:
            self.query_bias = weight("query_bias", (H, K), "zeros")
            self.key_bias = weight("key_bias", (H, K), "zeros")
            self.value_bias = weight("value_bias", (H, K), "zeros")
            self.output_bias = weight("output_bias", (width,), "zeros")
        self.attention_norm.build(x_shape)
        self.ffn_norm.build(x_shape)
        if self.ffn == "swiglu":
            self.swiglu.build(x_shape)
        else:
            self.ffn_hidden.build(x_shape)
            self.ffn_output = keras.layers.Dense(width, use_bias=self.use_bias, dtype=self.dtype_policy,
                                                 name="ffn_output")
            self.ffn_output.build(tuple(x_shape[:-1]) + (self.ffn_dim,))
        self.built = True

    def _project(self, x, kernel, bias_name):  # [B, n, d] x [d, H, K] -> [B, n, H, K]
        y = ops.einsum("bnd,dhk->bnhk", x, kernel)
        return y + getattr(self, bias_name) if self.use_bias else y

    def _attention(self, x, valid):
        q = self._project(x, self.query_kernel, "query_bias")
        k = self._project(x, self.key_kernel, "key_bias")
        v = self._project(x, self.value_kernel, "value_bias")
        if self.rope:
            index_only = ops.zeros(ops.shape(valid), "int32")  # τ_h = 0 in every head: no time is read
            q = self.rotary(q, index_only, valid)
            k = self.rotary(k, index_only, valid)
        n = ops.shape(x)[1]
        earlier = ops.greater_equal(ops.arange(n)[:, None], ops.arange(n)[None, :])  # j <= i, [n, n]
        allowed = ops.logical_and(earlier[None, :, :], ops.cast(valid, "bool")[:, None, :])  # [B, n, n]
        heads = masked_attention(q, k, v, allowed[:, None, :, :], 1.0 / math.sqrt(self.head_dim))  # [B, n, H, K]
        out = ops.einsum("bqhk,hkd->bqd", heads, self.output_kernel)
        return out + self.output_bias if self.use_bias else out

    def _feed_forward(self, x):
        return self.swiglu(x) if self.ffn == "swiglu" else self.ffn_output(self.ffn_hidden(x))

    def _drop(self, x, training):
        return x if self.dropout_layer is None else self.dropout_layer(x, training=training)

    def call(self, x, valid, training=None):
        if self.norm_position == "pre":
            y = x + self._drop(self._attention(self.attention_norm(x), valid), training)
            return y + self._drop(self._feed_forward(self.ffn_norm(y)), training)
        y = self.attention_norm(x + self._drop(self._attention(x, valid), training))
        return self.ffn_norm(y + self._drop(self._feed_forward(y), training))

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "ffn_dim": self.ffn_dim,
                "norm": self.norm,
                "norm_position": self.norm_position,
                "ffn": self.ffn,
                "rope": self.rope,
                "use_bias": self.use_bias,
                "dropout": self.dropout,
                "epsilon": self.epsilon,
            }
        )
        return config
