import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_attention


@keras.saving.register_keras_serializable(package="zoo")
class DeResTransformerLayer(keras.layers.Layer):
    """Pre-Norm Transformer layers of the DeRes backbone, returned as their residual branch f(X).

    DeRes eq 1 writes the Pre-Norm layer with LayerNorm as
        Y = X + MHA(LN(X)),    X' = Y + FFN(LN(Y)),    FFN(v) = GELU(v W_1 + c_1) W_2 + c_2.
    The paper names no FFN activation: GELU (exact, erf form) is this zoo's choice, the usual one of
    the Pre-Norm Transformers DeRes builds on (BARS / OneTrans backbones).
    This layer returns the branch f(X) = X' - X = MHA(LN(X)) + FFN(LN(Y)), the
    "TransformerLayer_l(.)" of Algorithm 1: the inter-layer connection (identity, block attention
    residual, depth-weighted average) is the connector's business (layers/deres.py,
    layers/denseformer_stack.py), not this layer's.

    MHA: per head h, softmax(Q_h K_h^T / sqrt(key_dim) + mask) V_h with biased Q, K, V projections,
    then a biased output projection over the concatenated heads; keys that are padding get no weight.

    Args:
        num_heads: H, attention heads.
        key_dim: width of each head's queries, keys and values.
        ffn_units: hidden width of the FFN.
        epsilon: LayerNorm epsilon.
        dropout: residual dropout on the MHA and FFN outputs while training (DeRes §4: 0.1).
    Call:
        x [B, n, w], valid [B, n] bool (False = padding token, never attended to) -> f(x) [B, n, w].
    """

    def __init__(self, num_heads, key_dim, ffn_units, epsilon=1e-6, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim), ("ffn_units", ffn_units)):
            if not isinstance(value, int) or value < 1:
                raise ZooError(f"DeResTransformerLayer {name} is {value!r}; it must be an integer >= 1")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.ffn_units = ffn_units
        self.epsilon = epsilon
        if not 0.0 <= float(dropout) < 1.0:
            raise ZooError(f"DeResTransformerLayer dropout is {dropout!r}; it must lie in [0, 1)")
        self.dropout = float(dropout)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy) if self.dropout else None

    def build(self, x_shape, valid_shape=None):
        width = x_shape[-1]
        H, K, F = self.num_heads, self.key_dim, self.ffn_units

        def weight(name, shape, initializer="glorot_uniform"):
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        self.attention_norm_gamma = weight("attention_norm_gamma", (width,), "ones")
        self.attention_norm_beta = weight("attention_norm_beta", (width,), "zeros")
        self.query_kernel = weight("query_kernel", (width, H, K))
        self.query_bias = weight("query_bias", (H, K), "zeros")
        self.key_kernel = weight("key_kernel", (width, H, K))
        self.key_bias = weight("key_bias", (H, K), "zeros")
        self.value_kernel = weight("value_kernel", (width, H, K))
        self.value_bias = weight("value_bias", (H, K), "zeros")
        self.output_kernel = weight("output_kernel", (H, K, width))
        self.output_bias = weight("output_bias", (width,), "zeros")
        self.ffn_norm_gamma = weight("ffn_norm_gamma", (width,), "ones")
        self.ffn_norm_beta = weight("ffn_norm_beta", (width,), "zeros")
        self.ffn_hidden_kernel = weight("ffn_hidden_kernel", (width, F))
        self.ffn_hidden_bias = weight("ffn_hidden_bias", (F,), "zeros")
        self.ffn_output_kernel = weight("ffn_output_kernel", (F, width))
        self.ffn_output_bias = weight("ffn_output_bias", (width,), "zeros")
        self.built = True

    def _norm(self, x, gamma, beta):
        """LayerNorm over the channels."""
        mean = ops.mean(x, axis=-1, keepdims=True)
        var = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) * ops.rsqrt(var + self.epsilon) * gamma + beta

    def _project(self, h, kernel, bias):  # [B, n, w] x [w, H, K] -> [B, n, H, K]
        return ops.einsum("bnw,whk->bnhk", h, kernel) + bias

    def call(self, x, valid=None):
        h = self._norm(x, self.attention_norm_gamma, self.attention_norm_beta)
        q = self._project(h, self.query_kernel, self.query_bias)
        k = self._project(h, self.key_kernel, self.key_bias)
        v = self._project(h, self.value_kernel, self.value_bias)
        allowed = None if valid is None else valid[:, None, None, :]  # masked_attention casts it
        heads = masked_attention(q, k, v, allowed, 1.0 / math.sqrt(self.key_dim))
        attended = self._drop(ops.einsum("bqhk,hkw->bqw", heads, self.output_kernel) + self.output_bias)
        y = self._norm(x + attended, self.ffn_norm_gamma, self.ffn_norm_beta)
        hidden = ops.gelu(ops.matmul(y, self.ffn_hidden_kernel) + self.ffn_hidden_bias, approximate=False)
        return attended + self._drop(ops.matmul(hidden, self.ffn_output_kernel) + self.ffn_output_bias)

    def _drop(self, x):
        return x if self.dropout_layer is None else self.dropout_layer(x)

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "ffn_units": self.ffn_units,
                "epsilon": self.epsilon,
                "dropout": self.dropout,
            }
        )
        return config
