import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.manifold_hyper_connection import ManifoldHyperConnection


@keras.saving.register_keras_serializable(package="zoo")
class MHCStack(keras.layers.Layer):
    """L Pre-Norm Transformer layers joined by manifold-constrained hyper-connections (mHC).

    mHC (Xie et al., DeepSeek 2025, §4; Hyper-Connections: Zhu et al., 2024), the inter-layer
    baseline DeRes re-implements for CTR (DeRes Table 2). The token's residual stream is widened
    into n streams x in R^{n x C}: X^(0) is copied into every stream, and each sublayer F is wired
    in by one hyper-connection (layers/manifold_hyper_connection.py, mHC eq 3, 7-8):

        x <- H^res x + H^post^T F(H^pre x),    H^res doubly stochastic (Sinkhorn-Knopp)

    The output is the sum of the n streams (Hyper-Connections' read-out), [B, T, C].

    The sublayers are DeRes eq 1's, the shared backbone's: F_attn(h) = MHA(LN(h)) and
    F_ffn(h) = FFN(LN(h)) with FFN(v) = GELU(v W_1 + c_1) W_2 + c_2 (hidden 4C, exact GELU),
    LayerNorm epsilon 1e-6, biased Q/K/V/O projections, num_heads heads of C / num_heads channels,
    keys that are padding get no weight, and residual dropout on each sublayer output.

    Decisions where the papers are silent:
    - Every sublayer gets its own hyper-connection, 2L per stack: mHC wraps each attention and FFN
      layer, and DeRes' account of mHC counts "each MHA and FFN sublayer as a separate transition
      (L = 8 layers, 16 applications)" (DeRes, Proposition 2's instantiation).
    - The sublayers are Keras' LayerNormalization, MultiHeadAttention and Dense: the same
      computation as layers/deres_transformer_layer.py, but as two separate branches, which that
      layer (one residual branch per layer) cannot give.

    Args:
        num_layers: L (each layer = an attention and an FFN sublayer).
        num_heads: attention heads.
        expansion_rate: n, the number of residual streams (mHC: 4).
        sinkhorn_iterations: t_max (mHC: 20).
        dropout: residual dropout on every sublayer output while training.
    Call:
        x [B, T, C], valid [B, T] bool (False = padding token) -> [B, T, C].
    """

    def __init__(self, num_layers=8, num_heads=4, expansion_rate=4, sinkhorn_iterations=20, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, value, low in (
            ("num_layers", num_layers, 1),
            ("num_heads", num_heads, 1),
            ("expansion_rate", expansion_rate, 2),
            ("sinkhorn_iterations", sinkhorn_iterations, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ZooError(f"MHCStack {name} is {value!r}; it must be an integer >= {low}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ZooError(f"MHCStack dropout is {dropout!r}; it must lie in [0, 1)")
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.expansion_rate = expansion_rate
        self.sinkhorn_iterations = sinkhorn_iterations
        self.dropout = float(dropout)
        self.sublayers = []

    def build(self, x_shape, valid_shape=None):
        c = x_shape[-1]
        if c % self.num_heads:
            raise ZooError(f"MHCStack width d = {c} is not divisible by num_heads = {self.num_heads}")
        policy = self.dtype_policy
        streams_shape = tuple(x_shape[:-1]) + (self.expansion_rate, c)
        self.sublayers = []
        for l in range(1, self.num_layers + 1):
            layer = {
                "attention_connection": ManifoldHyperConnection(
                    self.expansion_rate, self.sinkhorn_iterations, name=f"attention_connection_{l}", dtype=policy
                ),
                "attention_norm": keras.layers.LayerNormalization(
                    epsilon=1e-6, name=f"attention_norm_{l}", dtype=policy
                ),
                "attention": keras.layers.MultiHeadAttention(
                    self.num_heads, c // self.num_heads, name=f"attention_{l}", dtype=policy
                ),
                "ffn_connection": ManifoldHyperConnection(
                    self.expansion_rate, self.sinkhorn_iterations, name=f"ffn_connection_{l}", dtype=policy
                ),
                "ffn_norm": keras.layers.LayerNormalization(epsilon=1e-6, name=f"ffn_norm_{l}", dtype=policy),
                "ffn_hidden": keras.layers.Dense(4 * c, activation="gelu", name=f"ffn_hidden_{l}", dtype=policy),
                "ffn_output": keras.layers.Dense(c, name=f"ffn_output_{l}", dtype=policy),
            }
            layer["attention_connection"].build(streams_shape)
            layer["ffn_connection"].build(streams_shape)
            layer["attention_norm"].build(x_shape)
            layer["attention"].build(x_shape, x_shape)
            layer["ffn_norm"].build(x_shape)
            layer["ffn_hidden"].build(x_shape)
            layer["ffn_output"].build(tuple(x_shape[:-1]) + (4 * c,))
            self.sublayers.append(layer)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=policy) if self.dropout else None
        self.built = True

    @staticmethod
    def hyper_connection_step(connection, branch, streams):
        """One mHC step (mHC eq 3): x <- H^res x + H^post^T F(H^pre x); streams [B, T, n, C]."""
        h_pre, h_post, h_res = connection(streams)
        branch_output = branch(ops.einsum("btk,btkc->btc", h_pre, streams))  # F(H^pre x) [B, T, C]
        return ops.einsum("btij,btjc->btic", h_res, streams) + h_post[..., None] * branch_output[:, :, None, :]

    def _drop(self, x):
        return x if self.dropout_layer is None else self.dropout_layer(x)

    def call(self, x, valid=None):
        mask = None
        if valid is not None:
            valid = ops.cast(valid, "bool")
            mask = ops.logical_and(valid[:, None, :], ops.ones_like(valid)[:, :, None])  # allowed [B, T, T]
        streams = ops.repeat(x[:, :, None, :], self.expansion_rate, axis=2)  # [B, T, n, C]
        for layer in self.sublayers:

            def attention(h, layer=layer):
                h = layer["attention_norm"](h)
                return self._drop(layer["attention"](h, h, attention_mask=mask))

            def ffn(h, layer=layer):
                return self._drop(layer["ffn_output"](layer["ffn_hidden"](layer["ffn_norm"](h))))

            streams = self.hyper_connection_step(layer["attention_connection"], attention, streams)
            streams = self.hyper_connection_step(layer["ffn_connection"], ffn, streams)
        return ops.sum(streams, axis=2)

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "expansion_rate": self.expansion_rate,
                "sinkhorn_iterations": self.sinkhorn_iterations,
                "dropout": self.dropout,
            }
        )
        return config
