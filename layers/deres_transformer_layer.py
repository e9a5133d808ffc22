import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class DeResTransformerLayer(keras.layers.Layer):
    """One Pre-Norm Transformer layer of the DeRes backbone, returned as its residual branch f(X).

    DeRes eq 1 writes the Pre-Norm layer with LayerNorm as
        Y = X + MHA(LN(X)),    X' = Y + FFN(LN(Y)).
    This layer returns the branch f(X) = X' - X = MHA(LN(X)) + FFN(LN(Y)), the
    "TransformerLayer_l(.)" of Algorithm 1: the inter-layer connection (identity, block attention
    residual, depth-weighted average) is the connector's business (layers/deres.py,
    layers/denseformer_stack.py), not this layer's.

    The widths are free: the stream width w comes from the input; DeRes sets the heads' `key_dim`
    and the FFN's `ffn_units` so that its two d/2-wide paths cost what one d-wide layer costs
    (see layers/deres.py, "Budget").

    Args:
        num_heads: H, attention heads.
        key_dim: width of each head's queries, keys and values.
        ffn_units: hidden width of the FFN (GELU).
        epsilon: LayerNorm epsilon.
    Call:
        x [B, n, w], valid [B, n] bool (False = padding token, never attended to) -> f(x) [B, n, w].
    """

    def __init__(self, num_heads, key_dim, ffn_units, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.ffn_units = ffn_units
        self.epsilon = epsilon
        self.attention_norm = keras.layers.LayerNormalization(epsilon=epsilon, name="attention_norm")
        self.attention = keras.layers.MultiHeadAttention(num_heads, key_dim, name="attention")
        self.ffn_norm = keras.layers.LayerNormalization(epsilon=epsilon, name="ffn_norm")
        self.ffn_hidden = keras.layers.Dense(ffn_units, activation="gelu", name="ffn_hidden")
        self.ffn_output = None

    def build(self, x_shape, valid_shape=None):
        width = x_shape[-1]
        self.ffn_output = keras.layers.Dense(width, name="ffn_output")
        self.attention_norm.build(x_shape)
        self.attention.build(x_shape, x_shape)
        self.ffn_norm.build(x_shape)
        self.ffn_hidden.build(x_shape)
        self.ffn_output.build(tuple(x_shape[:-1]) + (self.ffn_units,))
        self.built = True

    def call(self, x, valid=None):
        allowed = None  # [B, n, n]: query i may attend to key j
        if valid is not None:
            n = ops.shape(x)[1]
            allowed = ops.repeat(ops.cast(valid, "bool")[:, None, :], n, axis=1)
        h = self.attention_norm(x)
        attended = self.attention(h, h, attention_mask=allowed)
        y = x + attended
        return attended + self.ffn_output(self.ffn_hidden(self.ffn_norm(y)))

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_heads": self.num_heads, "key_dim": self.key_dim, "ffn_units": self.ffn_units, "epsilon": self.epsilon}
        )
        return config
