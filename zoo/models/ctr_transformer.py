import keras

from zoo.layers.deres import DeRes
from zoo.models.deres_backbone import ctr_transformer_graph
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "ctr_transformer",
    description="Residual-only Pre-Norm CTR Transformer over field tokens (OneTrans-style; DeRes' baseline)",
    paper="DeRes (residual-only ablation, eq 1); OneTrans-style unified token Transformer",
)
@keras.saving.register_keras_serializable(package="zoo")
class CTRTransformer(ZooModel):
    """The residual-only CTR Transformer: DeRes' backbone (zoo/models/deres_backbone.py) with the
    standard Pre-Norm residual x_l = x_{l-1} + f_l(x_{l-1}) (eq 1) over the full width d.

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: d.  num_heads: attention heads.
        residual_matrix: "identity" (eq 1) or "learnable" (x_l = H_l x_{l-1} + f_l(x_{l-1}),
            H_l initialised to I: the learnable-residual ablation of Table 3a).
        dropout: residual dropout in every Transformer layer while training (DeRes §4: 0.1).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's pass over [CLS], its F field tokens and L behaviour tokens."""
        return M * (1 + F + L) ** 2

    def __init__(self, schema, num_layers=8, width=128, num_heads=4, residual_matrix="identity", dropout=0.1, **kwargs):
        connector = DeRes(
            num_layers=num_layers,
            num_heads=num_heads,
            num_blocks=1,
            paths="residual-only",
            residual_matrix=residual_matrix,
            dropout=dropout,
            name="connector",
        )
        schema, inputs, pctr = ctr_transformer_graph(schema, connector, width)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
