import keras

from zoo.models.suan import SUAN
from zoo.registry import register


@register(
    "lightsuan",
    description="LightSUAN: SUAN with sparse (local window + dilated) self-attention and parallel candidate scoring",
    paper="Exploring Scaling Laws of CTR Model for Online Performance Improvement (Meituan, 2025)",
    signatures=("parallel_candidates",),
)
@keras.saving.register_keras_serializable(package="zoo")
class LightSUAN(SUAN):
    """LightSUAN (SUAN §3.3.1): SUAN (zoo/models/suan.py) whose self-attention is sparse, a local
    window of k = 8 keys plus every r = 2nd earlier key (only those pairs computed), and which scores
    m2 = 32 candidates per parallel pass; the other arguments as in SUAN.

    It serves the "parallel_candidates" export signature (zoo/serving/parallel_candidates.py:
    `serving_default` and `score_all`, any m1 in passes of m2). Its distilled preset (SUAN
    §3.3.2, eq 17: trained with `zoo.recipes.OnlineDistillation` from a SUAN teacher) is a preset of
    this model, not another class.
    """

    defaults = {"window_size": 8, "dilation": 2, "parallel_candidates": 32}
