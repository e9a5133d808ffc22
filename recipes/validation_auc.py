"""The validation AUC that training decides by, computed exactly."""

import math

import keras

from zoo.recipes.evaluate import predict_rows
from zoo.recipes.metrics import auc


class ExactValidationAUC(keras.callbacks.Callback):
    """Replaces Keras' `val_auc` at each epoch's end by the exact ROC AUC of the model's scores on the
    validation rows (zoo.recipes.metrics.auc, ties counted half: what every report shows), so that early
    stopping, the kept best epoch and the checkpoint decide by the number the report prints.

    Keras' AUC metric sums a 1000-threshold histogram: scores closer than 0.001 (a model's first epochs,
    all near the positive rate) share a bucket, and on a small log its "best val_auc 0.4643" was printed
    beside an exact 0.3571 for the same weights. Costs one pass of scoring over the validation rows per
    epoch. Listed before the callbacks that read `val_auc`. A validation set of one class keeps Keras' value.
    """

    def __init__(self, validation_data, model=None):
        super().__init__()
        self.validation_data = validation_data
        self.scored = model  # the network that scores (a trainer's inner model); default: the trained model

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or "val_auc" not in logs:
            return
        labels, scores, _ = predict_rows(self.scored if self.scored is not None else self.model, self.validation_data)
        exact = auc(labels, scores)
        if not math.isnan(exact):
            logs["val_auc"] = exact
