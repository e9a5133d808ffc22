import keras

from zoo.models.lightsuan import LightSUAN
from zoo.registry import register


@register(
    "distilsuan",
    description="DistilSUAN: a LightSUAN student trained by online distillation from a SUAN teacher",
    paper="Exploring Scaling Laws of CTR Model for Online Performance Improvement (Meituan, 2025)",
)
@keras.saving.register_keras_serializable(package="zoo")
class DistilSUAN(LightSUAN):
    """A LightSUAN (same graph and hyperparameters) whose shipped preset was trained by online
    distillation (§3.3.2, eq 17) with `zoo.recipes.OnlineDistillation` from a higher-grade SUAN
    teacher (scripts/build_presets.py). A fresh `zoo.get("distilsuan", schema=...)` is an untrained
    LightSUAN; train it with OnlineDistillation to get what the name promises.
    """
