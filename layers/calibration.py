import math

import keras
from keras import ops

from zoo.errors import ZooError

METHODS = ("platt", "temperature")
EPSILON = 1e-7  # logit's input is clipped to [EPSILON, 1 - EPSILON] (float32 keeps both apart from 0 and 1)


@keras.saving.register_keras_serializable(package="zoo")
class Calibration(keras.layers.Layer):
    """Post-hoc calibration of a click probability, fitted on the validation split after training.

        p' = sigmoid(a * logit(p) + b),    logit(p) = log(p) - log(1 - p),  p clipped to [1e-7, 1 - 1e-7]

    Platt scaling (Platt 1999, "Probabilistic outputs for support vector machines"): a and b fitted by
    minimising the log loss of p' on held-out rows. Temperature scaling (Guo et al. 2017, "On calibration
    of modern neural networks", eq 9): b = 0, a = 1 / T. A monotone map: it leaves AUC and GAUC as they
    are and moves LogLoss and ECE. The zoo's models output probabilities (each ends in a sigmoid), so the
    logit is recovered from p; with a = 1, b = 0 the layer is the identity up to that clipping.

    The values are constants of the layer's config (no weights), so a calibrated preset's weights file
    is the uncalibrated one's and training never moves them. `zoo.recipes.calibration` fits them;
    `ZooModel` puts the layer after the model's output (`calibration=` of any registered model).

    Args:
        slope: a (> 0: the map keeps the order of the scores).
        intercept: b (0 for temperature scaling).
        method: "platt" or "temperature" (the fit that produced a and b; recorded, not used by `call`).

    Call: p [...] in [0, 1] -> p' [...] (same shape and dtype).
    """

    def __init__(self, slope=1.0, intercept=0.0, method="platt", **kwargs):
        super().__init__(**kwargs)
        for name, value in (("slope", slope), ("intercept", intercept)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ZooError(f"calibration {name} is {value!r}; it must be a finite number")
        if slope <= 0:
            raise ZooError(f"calibration slope is {slope!r}; it must be > 0 (a negative slope reverses the ranking)")
        if method not in METHODS:
            raise ZooError(f"calibration method is {method!r}; it must be one of {', '.join(map(repr, METHODS))}")
        if method == "temperature" and intercept != 0:
            raise ZooError(f"calibration intercept is {intercept!r}; temperature scaling has none (0)")
        self.slope, self.intercept, self.method = float(slope), float(intercept), method

    def call(self, probability):
        p = ops.clip(ops.cast(probability, "float32"), EPSILON, 1.0 - EPSILON)
        logit = ops.log(p) - ops.log1p(-p)
        return ops.cast(ops.sigmoid(self.slope * logit + self.intercept), probability.dtype)

    def compute_output_spec(self, probability):
        return keras.KerasTensor(probability.shape, dtype=probability.dtype)

    def get_config(self):
        return {**super().get_config(), "slope": self.slope, "intercept": self.intercept, "method": self.method}
