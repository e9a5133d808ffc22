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

    defaults = {"weighting": "softmax"}
