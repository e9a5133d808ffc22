"""Post-hoc calibration: Platt or temperature scaling fitted on the validation split, kept when it lowers
the validation LogLoss.

    fitted = fit_calibration(labels, scores, method="platt")    # {"method", "slope", "intercept"}
    model, report = calibrate(model, val)                          # a calibrated copy (or `model` itself)

The map is `zoo.layers.Calibration` (p' = sigmoid(a * logit(p) + b)); `calibrate` returns a copy of the
model built with it (`ZooModel.with_calibration`), so predict, `score`, `evaluate` and every export of
the copy (and of the preset it is saved as: config.json holds the calibration) return calibrated
probabilities. The fit is the maximum-likelihood one: Newton's method on the mean log loss of (a, b)
(or of a alone for temperature scaling), a convex problem in two unknowns, from the identity (a = 1,
b = 0), halving a step that does not lower the loss.
"""

import numpy as np

from zoo.errors import ZooError
from zoo.layers.calibration import EPSILON, METHODS


def _logit(scores):
    p = np.clip(np.asarray(scores, np.float64), EPSILON, 1.0 - EPSILON)
    return np.log(p) - np.log1p(-p)


def _loss(labels, z):
    """Mean binary log loss of sigmoid(z) against `labels`, computed from the logit (no log(0))."""
    return float(np.mean(np.logaddexp(0.0, z) - labels * z))


def mean_logloss(labels, scores):
    """Mean log loss of probabilities `scores` (clipped as the layer clips them)."""
    return _loss(np.asarray(labels, np.float64), _logit(scores))


def fit_calibration(labels, scores, method="platt"):
    """The calibration {"method", "slope", "intercept"} minimising the log loss of
    sigmoid(a * logit(scores) + b) against `labels` (0/1): Platt scaling fits a and b, temperature scaling
    a = 1/T alone (b = 0). One-line ZooError when the rows cannot identify it (no rows, labels not 0/1,
    one class only) or when the best slope is not positive (scores that rank worse than chance)."""
    slope, intercept = _maximum_likelihood(labels, scores, method)
    if slope <= 0:
        raise ZooError(_worse_than_chance(slope))
    return {"method": method, "slope": slope, "intercept": intercept}


def _worse_than_chance(slope):
    return (f"calibration: the best slope on these rows is {slope:.4g} (<= 0): the scores rank no better than "
            "chance there, so no monotone calibration helps")


def _maximum_likelihood(labels, scores, method, max_steps=100, tolerance=1e-10):
    """(a, b) of the least log loss (b = 0 for temperature scaling), a of any sign."""
    if method not in METHODS:
        raise ZooError(f"calibration method is {method!r}; it must be one of {', '.join(map(repr, METHODS))}")
    labels = np.asarray(labels, np.float64).reshape(-1)
    x = _logit(scores).reshape(-1)
    if len(labels) != len(x) or not len(labels):
        raise ZooError(f"calibration needs one score per label: {len(labels)} labels, {len(x)} scores")
    if not np.isin(labels, (0.0, 1.0)).all():
        raise ZooError("calibration labels must be 0 or 1")
    if labels.min() == labels.max():
        raise ZooError(f"calibration needs both clicks and non-clicks; every validation label is {labels[0]:g}")
    features = np.stack([x, np.ones_like(x)], axis=1) if method == "platt" else x[:, None]
    theta = np.array([1.0, 0.0] if method == "platt" else [1.0])
    loss = _loss(labels, features @ theta)
    for _ in range(max_steps):
        p = 1.0 / (1.0 + np.exp(-(features @ theta)))
        gradient = features.T @ (p - labels) / len(labels)
        hessian = (features * (p * (1.0 - p))[:, None]).T @ features / len(labels)
        step = np.linalg.lstsq(hessian + 1e-12 * np.eye(len(theta)), gradient, rcond=None)[0]
        shrink = 1.0
        while shrink > 1e-6:
            candidate = theta - shrink * step
            new_loss = _loss(labels, features @ candidate)
            if new_loss <= loss:
                break
            shrink /= 2
        else:
            break  # no step lowers the loss: at the minimum to float precision
        theta, improvement, loss = candidate, loss - new_loss, new_loss
        if improvement < tolerance:
            break
    return float(theta[0]), (float(theta[1]) if method == "platt" else 0.0)


def apply_calibration(calibration, scores):
    """NumPy twin of `zoo.layers.Calibration`: the calibrated probabilities of `scores`."""
    z = calibration["slope"] * _logit(scores) + calibration["intercept"]
    return 1.0 / (1.0 + np.exp(-z))


def calibrate(model, val, method="platt", user_key="user_user_id", verbose=0, keep="if_better"):
    """Fits `method` on `model`'s scores of the validation set `val` (a tf.data.Dataset of (features,
    labels), as `evaluate` takes) and returns (model, report).

    The model's own calibration (if any) is taken off first: the fit is on the raw scores. The calibrated
    copy is returned when its validation LogLoss is lower than the uncalibrated model's (`keep=
    "if_better"`, the default) or always (`keep="always"`); otherwise the uncalibrated model. report:
    {"method", "slope", "intercept", "rows", "logloss_before", "logloss_after", "ece_before", "ece_after",
    "kept"} (ECE over `zoo.recipes.metrics.calibration`'s bins). Scores that rank worse than chance on
    `val` (the best slope <= 0, a model barely trained) are not calibrated: with "if_better" the
    uncalibrated model is returned, its report saying why ("reason"); with "always" a ZooError.
    """
    from zoo.recipes.evaluate import predict_rows
    from zoo.recipes.metrics import calibration as reliability

    if keep not in ("if_better", "always"):
        raise ZooError(f"calibrate keep is {keep!r}; it must be 'if_better' or 'always'")
    base = model.with_calibration(None) if model.calibration is not None else model
    labels, scores, _ = predict_rows(base, val, user_key, verbose)
    slope, intercept = _maximum_likelihood(labels, scores, method)
    if slope <= 0:
        if keep == "always":
            raise ZooError(_worse_than_chance(slope))
        before = mean_logloss(labels, scores)
        ece = reliability(labels, scores)["ece"]
        return base, {"method": method, "slope": slope, "intercept": intercept, "rows": int(len(labels)),
                      "logloss_before": before, "logloss_after": before, "ece_before": ece, "ece_after": ece,
                      "kept": False, "reason": _worse_than_chance(slope)}
    fitted = {"method": method, "slope": slope, "intercept": intercept}
    calibrated = apply_calibration(fitted, scores)
    before, after = mean_logloss(labels, scores), mean_logloss(labels, calibrated)
    kept = keep == "always" or after < before
    report = {
        **fitted,
        "rows": int(len(labels)),
        "logloss_before": before,
        "logloss_after": after,
        "ece_before": reliability(labels, scores)["ece"],
        "ece_after": reliability(labels, calibrated)["ece"],
        "kept": bool(kept),
    }
    return (base.with_calibration(fitted) if kept else base), report
