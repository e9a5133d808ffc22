import keras

from zoo.layers.deres import DeRes
from zoo.models.deres_backbone import connector_statistics, ctr_transformer_graph
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "attnres",
    description="Block Attention Residuals alone (no identity path) on DeRes' CTR Transformer backbone",
    paper="Attention Residuals (Kimi), as re-implemented for CTR in DeRes (attention-residual-only ablation, eq 3-5)",
)
@keras.saving.register_keras_serializable(package="zoo")
class AttnRes(ZooModel):
    """The attention-residual-only CTR Transformer: DeRes' backbone with Path 2 alone over the full
    width d: B_0 = X^(0), acc <- acc + g_l(d_{l-1}), d_l = sum_b alpha_{l,b} B_b (eq 3-5), output d_L.

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: d.  num_heads: attention heads.
        num_blocks: B, a divisor of L.
        weighting: "softmax" (AttnRes, eq 4), "silu" (pointwise, eq 8) or "relu".
        dropout: residual dropout in every Transformer layer while training (DeRes §4: 0.1).
    `introspect(features)` returns the alpha_{l,b} matrix (gamma entries are None).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's pass over [CLS], its F field tokens and L behaviour tokens."""
        return M * (1 + F + L) ** 2

    def __init__(self, schema, num_layers=8, width=128, num_heads=4, num_blocks=8, weighting="softmax", dropout=0.1, **kwargs):
        connector = DeRes(
            num_layers=num_layers,
            num_heads=num_heads,
            num_blocks=num_blocks,
            weighting=weighting,
            paths="attnres-only",
            dropout=dropout,
            name="connector",
        )
        schema, inputs, pctr = ctr_transformer_graph(schema, connector, width)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)

    def introspect(self, features):
        """alpha [L, B+1] and alpha_negative_fraction [L, B+1] (NumPy); gamma entries are None."""
        return connector_statistics(self, features)
