import keras

from zoo.layers.denseformer_stack import DenseFormerStack
from zoo.models.deres_backbone import ctr_transformer_graph
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "denseformer",
    description="DenseFormer's static depth-weighted averaging on DeRes' CTR Transformer backbone",
    paper="Pagliardini et al., DenseFormer (2024), as re-implemented for CTR in DeRes (Table 2 baseline)",
)
@keras.saving.register_keras_serializable(package="zoo")
class DenseFormer(ZooModel):
    """DeRes' CTR Transformer backbone (zoo/models/deres_backbone.py) whose layers are joined by
    DenseFormer's depth-weighted averaging Y_l = sum_{j<=l} a_{l,j} X_j (layers/denseformer_stack.py).

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: d.  num_heads: attention heads.
        dropout: residual dropout in every Transformer layer while training (DeRes §4: 0.1).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's pass over [CLS], its F field tokens and L behaviour tokens."""
        return M * (1 + F + L) ** 2

    def __init__(self, schema, num_layers=8, width=128, num_heads=4, dropout=0.1, **kwargs):
        connector = DenseFormerStack(num_layers=num_layers, num_heads=num_heads, dropout=dropout, name="connector")
        schema, inputs, pctr = ctr_transformer_graph(schema, connector, width)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
