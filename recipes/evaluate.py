"""`evaluate(model, dataset)`: the papers' metrics and the calibration on a data set, a JSON report and
figures."""

import json
import math
from pathlib import Path

import keras
import numpy as np

from zoo.errors import ZooError
from zoo.recipes import plots
from zoo.recipes.data_check import check_dataset
from zoo.recipes.metrics import auc, calibration, gauc, rela_impr


def _batches(dataset):
    """The number of batches of a tf.data dataset when it is known, else None."""
    cardinality = getattr(dataset, "cardinality", None)
    count = int(cardinality()) if cardinality is not None else -1
    return count if count >= 0 else None


SCORING_TOKENS = 2**18  # the most rows x (L + 1) of a scoring batch


def scoring_batch(batch_size, sequence_length=0):
    """The rows of a batch that is scored, not trained on: 4x the training batch (no backward pass and no
    optimizer state to hold; fewer calls: 100,000 Criteo rows through DCN-v2 on TensorFlow in 1.4 s instead
    of 1.8-2.4 s at 1024), fewer for long histories (at most SCORING_TOKENS behaviour tokens a batch), never
    fewer than the training batch."""
    return max(batch_size, min(4 * batch_size, SCORING_TOKENS // (1 + sequence_length)))


def predict_rows(model, dataset, user_key="user_user_id", verbose=0):
    """Scores every row of a tf.data.Dataset of (features, labels); returns (labels, scores, user_ids).
    `verbose=1` shows a Keras progress bar over the batches (with their total when the dataset knows it); 2
    prints one line at the end (for logs)."""
    labels, scores, users = [], [], []
    progress = keras.utils.Progbar(_batches(dataset), unit_name="batch", verbose=verbose) if verbose else None
    for step, (features, batch_labels) in enumerate(dataset.as_numpy_iterator(), 1):
        scores.append(keras.ops.convert_to_numpy(model.predict_on_batch(features)).reshape(-1))
        labels.append(np.asarray(batch_labels).reshape(-1))
        if user_key in features:
            m = np.asarray(batch_labels).reshape(len(batch_labels), -1).shape[1]
            users.append(np.repeat(np.asarray(features[user_key]).reshape(-1), m))
        if progress is not None:
            progress.update(step)
    if progress is not None and progress.target is None:
        progress.update(len(scores), finalize=True)
    if not labels:
        raise ZooError("the data set to evaluate on has no rows")
    return np.concatenate(labels), np.concatenate(scores), (np.concatenate(users) if users else None)


class StepLog(keras.callbacks.Callback):
    """Records what Keras reports during training (its running means over the epoch so far) at about
    `points` steps per epoch, and the step at each epoch's end: training curves within an epoch, e.g.
    for a one-epoch recipe. Pass `callbacks=[log]` to fit, then `evaluate(..., step_history=log.history)`.
    """

    def __init__(self, points=200):
        super().__init__()
        self.points = points
        self.history = {"step": [], "epoch_end": []}
        self._first_step = self._step = 0

    def on_epoch_begin(self, epoch, logs=None):
        steps = self.params.get("steps")
        if steps:  # resumed runs (BackupAndRestore) start at a later epoch
            self._first_step = epoch * steps

    def on_train_batch_end(self, batch, logs=None):
        steps = self.params.get("steps")
        every = max(1, steps // self.points) if steps else 1
        self._step = self._first_step + batch + 1
        if (batch + 1) % every and batch + 1 != steps:
            return
        self.history["step"].append(self._step)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))

    def on_epoch_end(self, epoch, logs=None):
        self.history["epoch_end"].append(self._step)
        self._first_step = self._step


def _jsonable(value):
    """NumPy arrays and scalars as JSON values (NaN as null)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def model_figures(model, dataset, plots_dir, report):
    """The figures of the model's own `introspect(features)` on the data's first batch: DeRes' alpha
    heat map and gate per layer, SUAN's attention over a request's history, ReST's RoTE positions."""
    introspect = getattr(model, "introspect", None)
    if introspect is None:
        return []
    features, *_ = next(iter(dataset.as_numpy_iterator()))
    stats = introspect(features)
    figures = []
    if "gamma_mean" in stats or "alpha" in stats:  # the DeRes family's connector (Figure 3)
        report["connector"] = _jsonable(stats)
        if stats.get("alpha") is not None:
            plots.alpha_heatmap(stats["alpha"], plots_dir / "alpha_heatmap.png")
            figures.append("alpha_heatmap.png")
        if stats.get("gamma_mean") is not None:
            plots.gate_per_layer(stats["gamma_mean"], plots_dir / "gamma_per_layer.png", stats.get("gamma_std"))
            figures.append("gamma_per_layer.png")
    elif "attention" in stats:  # SUAN / LightSUAN
        report["introspection"] = _jsonable(stats)
        plots.history_attention(stats, plots_dir / "history_attention.png")
        figures.append("history_attention.png")
    elif "positions" in stats:  # ReST
        report["introspection"] = _jsonable(stats)
        plots.rote_positions(stats, plots_dir / "rote_positions.png")
        figures.append("rote_positions.png")
    return figures


def evaluate(model, dataset, *, report_path=None, plots_dir=None, history=None, step_history=None, base_auc=None,
             user_key="user_user_id", verbose=0, predicted=None):
    """AUC, LogLoss, GAUC (when rows carry `user_key`), RelaImpr (given the base model's AUC) and the
    calibration: ECE over 10 equal-frequency bins of pCTR, mean pCTR vs observed CTR
    (`zoo.recipes.metrics.calibration`).

    The model's schema is checked against the data's features first (one line says what differs).
    Writes a JSON report to `report_path` and, in `plots_dir`, the ROC curve, the reliability diagram,
    the score histograms per label, the training curves (given the fit's `history`, and `step_history`
    from a `StepLog` for curves within an epoch) and the figures of the model's `introspect` (DeRes
    alpha/gamma, SUAN/LightSUAN attention over a request's history, ReST's RoTE positions).
    `verbose=1` shows a progress bar. `predicted`: `predict_rows(model, dataset, user_key)` already made by
    the caller (who needs the scores too), so the rows are not scored twice. Returns the report dict.
    """
    check_dataset(model, dataset)
    labels, scores, users = predicted if predicted is not None else predict_rows(model, dataset, user_key, verbose)
    clipped = np.clip(scores, 1e-7, 1 - 1e-7)
    report = {
        "model": getattr(model, "registered_name", None) or model.name,
        "rows": int(len(labels)),
        "positive_rate": float(labels.mean()),
        "auc": auc(labels, scores),
        "logloss": float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped))),
    }
    if users is not None:
        try:
            report["gauc"] = gauc(users, labels, scores)
        except ZooError:  # no user has both a positive and a negative row (a tiny split): undefined
            report["gauc"] = None
    if base_auc is not None:
        report["rela_impr"] = rela_impr(report["auc"], base_auc)
    calibrated = calibration(labels, scores)
    report["calibration"] = calibrated
    if history is not None:
        report["history"] = {k: [float(v) for v in values] for k, values in history.items()}
    if plots_dir is not None:
        plots_dir = Path(plots_dir)
        plots_dir.mkdir(parents=True, exist_ok=True)
        figures = ["roc_curve.png", "calibration.png", "score_histograms.png"]
        plots.roc_curve(labels, scores, plots_dir / "roc_curve.png")
        plots.reliability_diagram(calibrated, plots_dir / "calibration.png")
        plots.score_histograms(labels, scores, plots_dir / "score_histograms.png")
        if history:
            plots.training_curves(history, plots_dir / "training_curves.png", step_history)
            figures.append("training_curves.png")
        report["figures"] = figures + model_figures(model, dataset, plots_dir, report)
    if report_path is not None:
        write_report(report, report_path)
    return report


def write_report(report, path):
    """Writes a report dict as indented JSON to `path` (its folder made when missing), whole or not at all
    (zoo.outputs.new_file: a failure leaves no partial file and names `path`)."""
    from zoo.outputs import new_file

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with new_file(path) as stream:
        stream.write(json.dumps(_jsonable(report), indent=2))
