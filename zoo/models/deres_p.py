import keras

from zoo.layers.deres import DeRes
from zoo.models.deres_backbone import connector_statistics, ctr_transformer_graph
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "deres_p",
    description="DeRes-P: CTR Transformer with the dual-path connector (identity + pointwise SiLU block AttnRes, vector gate)",
    paper="DeRes: Decoupling Residual Stability and Adaptivity for Scalable CTR Prediction (Algorithm 1, eq 8)",
)
@keras.saving.register_keras_serializable(package="zoo")
class DeResP(ZooModel):
    """DeRes-P: the CTR Transformer (zoo/models/deres_backbone.py) with the DeRes connector,
    pointwise SiLU block weights alpha_{l,b} = SiLU(w_l . RMSNorm(B_b)) (eq 8).

    Output `pctr` [B, M]; each candidate is scored by its own [CLS] pass. `introspect(features)`
    returns the alpha_{l,b} matrix and the per-layer gamma_l statistics of a batch (Figure 3).

    Args:
        schema: the input contract (needs cand_ features; hist_, user_, ctx_, num_ become tokens).
        num_layers: L.  width: d.  num_heads: attention heads (even: each path takes half of them).
        num_blocks: B, a divisor of L.
        weighting: "silu" (eq 8), "softmax" (eq 4) or "relu" (ablation).
        fusion: "gated" (eq 6-7) or "additive" (ablation).
        feed: "fused" (the identity path continues from x_{l-1}) or "paths" (Algorithm 1 literally).
        residual_matrix: "identity" (eq 2) or "learnable" (Proposition 2 ablation).
        dropout: residual dropout in every Transformer layer while training (DeRes §4: 0.1, the
            `deres` recipe's value, hence the default).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's pass over [CLS], its F field tokens and L behaviour tokens."""
        return M * (1 + F + L) ** 2

    def __init__(
        self,
        schema,
        num_layers=8,
        width=128,
        num_heads=4,
        num_blocks=8,
        weighting="silu",
        fusion="gated",
        feed="fused",
        residual_matrix="identity",
        dropout=0.1,
        **kwargs,
    ):
        connector = DeRes(
            num_layers=num_layers,
            num_heads=num_heads,
            num_blocks=num_blocks,
            weighting=weighting,
            fusion=fusion,
            feed=feed,
            residual_matrix=residual_matrix,
            dropout=dropout,
            name="connector",
        )
        schema, inputs, pctr = ctr_transformer_graph(schema, connector, width)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)

    def introspect(self, features):
        """alpha [L, B+1], alpha_negative_fraction [L, B+1], gamma_mean [L], gamma_std [L] (NumPy)."""
        return connector_statistics(self, features)
