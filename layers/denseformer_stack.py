import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError
from zoo.layers.deres_transformer_layer import DeResTransformerLayer


@keras.saving.register_keras_serializable(package="zoo")
class DenseFormerStack(keras.layers.Layer):
    """L Pre-Norm Transformer layers joined by DenseFormer's depth-weighted averaging (DWA).

    DenseFormer (Pagliardini et al., 2024, §3), the static inter-layer baseline of DeRes Table 2:

        X_0 = X^(0);   X_l = Y_{l-1} + f_l(Y_{l-1});   Y_l = sum_{j=0}^{l} a_{l,j} X_j,   Y_0 = X_0

    with f_l the layer's residual branch (layers/deres_transformer_layer.py) and a_{l,j} static
    scalars learned per (l, j), independent of the input (unlike DeRes' alpha_{l,b}). The weights
    start at a_{l,l} = 1, a_{l,j<l} = 0, so the stack starts as the residual-only Transformer.
    The output is Y_L.

    Args:
        num_layers: L.
        num_heads: attention heads (d / num_heads channels each; FFN hidden 4d).
        dropout: residual dropout inside every Transformer layer while training.
    Call:
        x [B, n, d], valid [B, n] bool (False = padding token) -> [B, n, d].
    """

    def __init__(self, num_layers=8, num_heads=4, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ZooError(f"DenseFormerStack num_layers is {num_layers!r}; it must be an integer >= 1")
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ZooError(f"DenseFormerStack num_heads is {num_heads!r}; it must be an integer >= 1")
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout = float(dropout)
        self.transformer_layers = []
        self.dwa_weights = []

    def build(self, x_shape, valid_shape=None):
        d = x_shape[-1]
        if d % self.num_heads:
            raise ZooError(f"DenseFormerStack width d = {d} is not divisible by num_heads = {self.num_heads}")
        self.transformer_layers = [
            DeResTransformerLayer(
                self.num_heads, d // self.num_heads, 4 * d, dropout=self.dropout, name=f"layer_{l}", dtype=self.dtype_policy
            )
            for l in range(1, self.num_layers + 1)
        ]
        for layer in self.transformer_layers:
            layer.build(x_shape)
        self.dwa_weights = [
            self.add_weight(
                shape=(l + 1,),
                initializer=keras.initializers.Constant(np.eye(l + 1)[l]),
                name=f"dwa_{l}",
            )
            for l in range(1, self.num_layers + 1)
        ]
        self.built = True

    def call(self, x, valid=None):
        outputs = [x]  # X_0 .. X_l
        y = x
        for layer, weights in zip(self.transformer_layers, self.dwa_weights):
            outputs.append(y + layer(y, valid=valid))
            y = ops.einsum("j,bnjd->bnd", ops.cast(weights, y.dtype), ops.stack(outputs, axis=2))
        return y

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, "num_heads": self.num_heads, "dropout": self.dropout})
        return config
