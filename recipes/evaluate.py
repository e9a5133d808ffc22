"""`evaluate(model, dataset)`: the papers' metrics on a data set, a JSON report and figures."""

import json
from pathlib import Path

import keras
import numpy as np

from zoo.errors import ZooError
from zoo.recipes import plots
from zoo.recipes.metrics import auc, gauc, rela_impr


def predict_rows(model, dataset, user_key="user_user_id"):
    """Scores every row of a tf.data.Dataset of (features, labels); returns (labels, scores, user_ids)."""
    labels, scores, users = [], [], []
    for features, batch_labels in dataset.as_numpy_iterator():
        scores.append(keras.ops.convert_to_numpy(model.predict_on_batch(features)).reshape(-1))
        labels.append(np.asarray(batch_labels).reshape(-1))
        if user_key in features:
            m = np.asarray(batch_labels).reshape(len(batch_labels), -1).shape[1]
            users.append(np.repeat(np.asarray(features[user_key]).reshape(-1), m))
    return np.concatenate(labels), np.concatenate(scores), (np.concatenate(users) if users else None)


def evaluate(model, dataset, *, report_path=None, plots_dir=None, history=None, base_auc=None, user_key="user_user_id"):
    """AUC, LogLoss, GAUC (when rows carry `user_key`) and RelaImpr (given the base model's AUC).

    Writes a JSON report to `report_path` and, in `plots_dir`, the training curves (given the fit's
    `history`) and, for models that report their DeRes connector (`model.introspect`), the
    alpha heat map and gamma per layer. Returns the report dict.
    """
    labels, scores, users = predict_rows(model, dataset, user_key)
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
    if history is not None:
        report["history"] = {k: [float(v) for v in values] for k, values in history.items()}
    figures = []
    if plots_dir is not None:
        plots_dir = Path(plots_dir)
        plots_dir.mkdir(parents=True, exist_ok=True)
        if history:
            plots.training_curves(history, plots_dir / "training_curves.png")
            figures.append("training_curves.png")
        statistics = getattr(model, "introspect", None)
        if statistics is not None:
            features, _ = next(iter(dataset.as_numpy_iterator()))
            stats = statistics(features)
            report["connector"] = {k: np.asarray(v).tolist() for k, v in stats.items()}
            if stats.get("alpha") is not None:
                plots.alpha_heatmap(stats["alpha"], plots_dir / "alpha_heatmap.png")
                figures.append("alpha_heatmap.png")
            if stats.get("gamma_mean") is not None:
                plots.gate_per_layer(stats["gamma_mean"], plots_dir / "gamma_per_layer.png")
                figures.append("gamma_per_layer.png")
        report["figures"] = figures
    if report_path is not None:
        Path(report_path).parent.mkdir(parents=True, exist_ok=True)
        Path(report_path).write_text(json.dumps(report, indent=2))
    return report
