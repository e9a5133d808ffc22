"""Scaling-law fits of AUC against compute C (model grade x data), as SUAN and DeRes plot them.

    SUAN  (§4.2):  AUC(C) = E - A / (C - B)^alpha
    DeRes (§4.4):  AUC(C) = alpha - beta * C^(-gamma)
"""

import numpy as np
from scipy.optimize import curve_fit

from zoo.errors import ZooError


def suan_law(c, e, a, b, alpha):
    return e - a / np.power(c - b, alpha)


def deres_law(c, alpha, beta, gamma):
    return alpha - beta * np.power(c, -gamma)


LAWS = {
    "suan": (suan_law, ("E", "A", "B", "alpha")),
    "deres": (deres_law, ("alpha", "beta", "gamma")),
}
FORMULAS = {"suan": "E - A / (C - B)^alpha", "deres": "alpha - beta * C^(-gamma)"}


def fit_scaling_law(compute, auc, law="suan"):
    """Least-squares fit of a law to (compute, AUC) points; returns {"law", "coefficients", "r2", "points",
    "at_bounds"}. `at_bounds` names the coefficients the fit pushed onto (within 1 % of) a bound of their
    range (alpha or gamma at 10, A or beta at 0, B at the smallest compute): the points do not determine
    those, so the fitted curve is not a law the data support, whatever its R²."""
    if law not in LAWS:
        raise ZooError(f"unknown scaling law '{law}' (laws: {', '.join(LAWS)})")
    function, names = LAWS[law]
    c = np.asarray(compute, dtype="float64")
    y = np.asarray(auc, dtype="float64")
    if c.shape != y.shape or c.ndim != 1 or len(c) <= len(names):
        raise ZooError(f"the {law} law has {len(names)} coefficients: it needs more than {len(names)} (compute, AUC) points")
    if np.any(c <= 0):
        raise ZooError("compute values must be positive")
    scale = c.min()  # fit on C / min(C) so the exponents stay well conditioned
    x = c / scale
    if law == "suan":
        start = (y.max() + 0.01, 0.05, 0.0, 0.5)
        bounds = ([-np.inf, 0, -np.inf, 0], [np.inf, np.inf, x.min() * (1 - 1e-6), 10])
    else:
        start = (y.max() + 0.01, 0.05, 0.5)
        bounds = ([-np.inf, 0, 0], [np.inf, np.inf, 10])
    try:
        params, _ = curve_fit(function, x, y, p0=start, bounds=bounds, maxfev=20_000)
    except RuntimeError as error:
        raise ZooError(f"the {law} law did not converge on these points ({error})") from None
    lower, upper = bounds
    at_bounds = [name for name, value, low, high in zip(names, params, lower, upper)
                 if any(np.isfinite(b) and np.isclose(value, b, rtol=1e-2, atol=1e-9) for b in (low, high))]
    residual = y - function(x, *params)
    r2 = 1.0 - (residual**2).sum() / ((y - y.mean()) ** 2).sum()
    coefficients = dict(zip(names, map(float, params)))
    # Undo the compute scaling: C/s - B' = (C - s B')/s.
    if law == "suan":
        coefficients["A"] *= scale ** coefficients["alpha"]
        coefficients["B"] *= scale
    else:
        coefficients["beta"] *= scale ** coefficients["gamma"]
    return {"law": law, "coefficients": coefficients, "r2": float(r2), "at_bounds": at_bounds,
            "points": {"compute": c.tolist(), "auc": y.tolist()}}


def predict(fit, compute):
    """The fitted law's AUC at `compute`."""
    function, names = LAWS[fit["law"]]
    return function(np.asarray(compute, dtype="float64"), *[fit["coefficients"][n] for n in names])
