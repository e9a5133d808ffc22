import keras

from zoo.models.deres_p import DeResP
from zoo.registry import register


@register(
    "deres_s",
    description="DeRes-S: CTR Transformer with the dual-path connector (identity + softmax block AttnRes, vector gate)",
    paper="DeRes: Decoupling Residual Stability and Adaptivity for Scalable CTR Prediction (Algorithm 1, eq 4)",
)
@keras.saving.register_keras_serializable(package="zoo")
class DeResS(DeResP):
    """DeRes-S: DeRes-P (zoo/models/deres_p.py) with softmax block weights
    alpha_{l,b} = softmax_b(w_l . RMSNorm(B_b)) (eq 4); the other arguments as in DeRes-P."""

    def __init__(
        self,
        schema,
        num_layers=8,
        width=128,
        num_heads=4,
        num_blocks=8,
        weighting="softmax",
        fusion="gated",
        feed="fused",
        residual_matrix="identity",
        dropout=0.1,
        **kwargs,
    ):
        super().__init__(
            schema,
            num_layers=num_layers,
            width=width,
            num_heads=num_heads,
            num_blocks=num_blocks,
            weighting=weighting,
            fusion=fusion,
            feed=feed,
            residual_matrix=residual_matrix,
            dropout=dropout,
            **kwargs,
        )
