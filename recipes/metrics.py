"""The metrics the papers report, from keras.metrics."""

import keras


def default_metrics():
    """AUC and LogLoss (binary cross-entropy of the predicted probability), as every table reports."""
    return [keras.metrics.AUC(name="auc"), keras.metrics.BinaryCrossentropy(name="logloss")]
