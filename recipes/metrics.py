"""The metrics the papers report: AUC and LogLoss (keras.metrics), GAUC, RelaImpr, a paired bootstrap;
and the calibration of the predicted CTR (expected calibration error over equal-frequency bins)."""

import keras
import numpy as np

from zoo.errors import ZooError


def default_metrics():
    """AUC and LogLoss (binary cross-entropy of the predicted probability), as every table reports."""
    return [keras.metrics.AUC(name="auc", num_thresholds=1000), keras.metrics.BinaryCrossentropy(name="logloss")]


def _as_1d(name, values):
    values = np.asarray(values, dtype="float64").reshape(-1)
    if not np.all(np.isfinite(values)):
        raise ZooError(f"{name} contains NaN or infinite values")
    return values


def _auc_of_counts(negatives, positives):
    """Exact AUC from the negatives and positives at each distinct score, scores ascending along the last
    axis: a positive wins against every negative with a lower score and half of those with its own (ties
    count half); NaN where a class is absent."""
    below = np.cumsum(negatives, axis=-1) - negatives  # negatives with a lower score
    wins = (positives * (2 * below + negatives)).sum(axis=-1) / 2
    total = positives.sum(axis=-1) * negatives.sum(axis=-1)
    return np.where(total > 0, wins / np.where(total > 0, total, 1), np.nan)


def auc(labels, scores):
    """Exact ROC AUC (ties count half); NaN when only one class is present."""
    labels, scores = _as_1d("labels", labels), _as_1d("scores", scores)
    rank = np.unique(scores, return_inverse=True)[1].reshape(-1)  # each row's distinct score, ascending
    return float(_auc_of_counts(np.bincount(rank, weights=1 - labels), np.bincount(rank, weights=labels)))


def logloss(labels, scores, epsilon=1e-7):
    """Binary cross-entropy of the predicted CTR, the scores clipped to [epsilon, 1 - epsilon] (as
    keras.metrics.BinaryCrossentropy clips them)."""
    labels, scores = _as_1d("labels", labels), np.clip(_as_1d("scores", scores), epsilon, 1 - epsilon)
    return float(-np.mean(labels * np.log(scores) + (1 - labels) * np.log(1 - scores)))


def gauc(user_ids, labels, scores):
    """Group AUC: the AUC of each user, weighted by the user's number of rows; users whose rows are all
    of one class are left out (their AUC is undefined), as in the DIN/SUAN papers."""
    user_ids = np.asarray(user_ids).reshape(-1)
    labels, scores = _as_1d("labels", labels), _as_1d("scores", scores)
    if not len(user_ids) == len(labels) == len(scores):
        raise ZooError(
            f"gauc needs one user id per row: {len(user_ids)} ids, {len(labels)} labels, {len(scores)} scores"
        )
    total, weight = 0.0, 0
    for user in np.unique(user_ids):
        rows = user_ids == user
        if 0 < labels[rows].sum() < rows.sum():
            total += rows.sum() * auc(labels[rows], scores[rows])
            weight += rows.sum()
    if weight == 0:
        raise ZooError("gauc is undefined: no user has both a positive and a negative row")
    return total / weight


CALIBRATION_BINS = 10


def calibration(labels, scores, bins=CALIBRATION_BINS):
    """How well the predicted CTR matches the observed one.

    The rows are split into `bins` equal-frequency bins of the score (edges at the score's quantiles
    k / bins; a row with score s falls in bin k when edge_k <= s < edge_{k+1}, the last bin closed, so
    equal scores share a bin and a bin may hold more or fewer rows than N / bins, or none). Equal
    frequency rather than equal width, because CTR scores crowd near 0: equal-width bins would put
    almost every row in the first.

        ECE = sum over non-empty bins b of (n_b / N) * |mean score in b - positive rate in b|

    Returns {"ece", "bins" (the number asked for), "binning": "equal-frequency", "mean_pctr" (mean
    score), "observed_ctr" (positive rate), "ratio" (mean_pctr / observed_ctr; None without positives),
    "per_bin": {"mean_pctr", "observed_ctr", "rows"} of the non-empty bins}.
    """
    labels, scores = _as_1d("labels", labels), _as_1d("scores", scores)
    if len(labels) != len(scores) or not len(labels):
        raise ZooError(f"calibration needs one score per label: {len(labels)} labels, {len(scores)} scores")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ZooError(f"calibration bins is {bins!r}; it must be an integer >= 1")
    edges = np.quantile(scores, np.linspace(0.0, 1.0, bins + 1))
    index = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, bins - 1)
    rows = np.bincount(index, minlength=bins)
    kept = rows > 0
    mean_pctr = np.bincount(index, weights=scores, minlength=bins)[kept] / rows[kept]
    observed = np.bincount(index, weights=labels, minlength=bins)[kept] / rows[kept]
    rows = rows[kept]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = scores.mean() / labels.mean()
    return {
        "ece": float(np.sum(rows / len(labels) * np.abs(mean_pctr - observed))),
        "bins": int(bins),
        "binning": "equal-frequency",
        "mean_pctr": float(scores.mean()),
        "observed_ctr": float(labels.mean()),
        "ratio": float(ratio) if np.isfinite(ratio) else None,
        "per_bin": {"mean_pctr": mean_pctr.tolist(), "observed_ctr": observed.tolist(), "rows": rows.tolist()},
    }


def rela_impr(auc_model, auc_base):
    """RelaImpr = ((AUC(model) - 0.5) / (AUC(base) - 0.5) - 1) * 100 %, the DIN paper's measure."""
    if auc_base <= 0.5:
        raise ZooError(f"RelaImpr needs a base AUC above 0.5, got {auc_base}")
    return ((auc_model - 0.5) / (auc_base - 0.5) - 1.0) * 100.0


def bootstrap_aucs(labels, scores, resamples=10_000, seed=0, chunk=None):
    """The AUC of every score vector on the same bootstrap resamples of the rows: [M, resamples] for
    `scores` [M, N] (NaN where a resample holds one class only).

    Each resample draws N row indices uniformly with replacement (seeded); every vector is scored on each
    resample, which is what pairs them. The resamples are drawn once for all M vectors, so a table's
    summary scores each (row, seed) once instead of once per comparison. A vector's AUC on a resample
    counts, per distinct score, the positives and negatives drawn there (one bincount over the drawn
    rows) and scores them as `auc` scores all rows. `chunk` resamples are drawn at a time (default: about four
    million drawn rows); the draws, and the result, do not depend on it."""
    labels = _as_1d("labels", labels)
    scores = np.asarray(scores, "float64")
    if scores.ndim != 2 or scores.shape[1] != len(labels):
        raise ZooError(f"bootstrap_aucs needs scores [M, {len(labels)}] on the labels' rows, got {list(scores.shape)}")
    if not np.all(np.isfinite(scores)):
        raise ZooError("bootstrap_aucs: the scores contain NaN or infinite values")
    rng = np.random.default_rng(seed)
    n = len(labels)
    chunk = chunk or max(1, min(resamples, 4_000_000 // max(n, 1)))
    positive = (labels > 0.5).astype(np.int64)
    keyed = []  # per vector: (its distinct scores' count G, each row's key = 2 * rank of its score + label)
    for vector in scores:
        distinct, rank = np.unique(vector, return_inverse=True)
        keyed.append((len(distinct), rank.reshape(-1).astype(np.int64) * 2 + positive))
    aucs = np.empty((len(scores), resamples))
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        drawn = rng.integers(0, n, size=(count, n), dtype=np.int64)
        for i, (groups, key) in enumerate(keyed):
            block = max(1, (1 << 18) // max(2 * groups, n))  # resamples at once: rows and counters stay in cache
            for first in range(0, count, block):
                rows = drawn[first:first + block]
                offsets = np.arange(len(rows), dtype=np.int64)[:, None] * (2 * groups)
                counts = np.bincount((key[rows] + offsets).ravel(), minlength=len(rows) * 2 * groups)
                counts = counts.reshape(len(rows), groups, 2)
                aucs[i, start + first:start + first + len(rows)] = _auc_of_counts(counts[..., 0], counts[..., 1])
    return aucs


def paired_bootstrap(labels, scores_a, scores_b, resamples=10_000, seed=0, chunk=None, aucs=None):
    """Paired bootstrap of AUC(a) - AUC(b) on the same rows.

    Each resample draws the rows with replacement (seeded; see bootstrap_aucs) and computes both AUCs
    on it. `scores_a` and `scores_b` are [N], or [S, N] for S seeds of each model (paired by seed): the
    statistic is then the mean over seeds of AUC(a_s) - AUC(b_s), every seed on the same resample.
    `aucs` = (a's, b's) `bootstrap_aucs` [S, R] reuses resamples already scored (same seed and count).
    Returns {"difference": the statistic on all rows, "mean", "ci95": [lo, hi], "p_value": share of
    resamples with a difference <= 0 (one-sided, a better than b), "resamples"}.
    """
    labels = _as_1d("labels", labels)
    scores_a, scores_b = np.asarray(scores_a, "float64"), np.asarray(scores_b, "float64")
    if not (np.all(np.isfinite(scores_a)) and np.all(np.isfinite(scores_b))):
        raise ZooError("paired_bootstrap: the scores contain NaN or infinite values")
    if scores_a.ndim == 1:
        scores_a, scores_b = scores_a[None], scores_b[None]
    if scores_a.ndim != 2 or scores_a.shape != scores_b.shape or scores_a.shape[1] != len(labels):
        raise ZooError("paired_bootstrap needs the two models' scores on the same rows (and the same seeds)")
    if aucs is None:
        both = bootstrap_aucs(labels, np.concatenate([scores_a, scores_b]), resamples, seed, chunk)
        aucs = both[: len(scores_a)], both[len(scores_a):]
    aucs_a, aucs_b = (np.asarray(x, "float64") for x in aucs)
    if aucs_a.shape != aucs_b.shape or aucs_a.shape[0] != len(scores_a):
        raise ZooError("paired_bootstrap: the resampled AUCs do not match the scores (one row per seed of each)")
    differences = (aucs_a - aucs_b).mean(axis=0)
    differences = differences[np.isfinite(differences)]
    if not differences.size:
        raise ZooError(f"no bootstrap resample of the {len(labels)} row(s) holds both classes: too few rows to compare")
    return {
        "difference": float(np.mean([auc(labels, a) - auc(labels, b) for a, b in zip(scores_a, scores_b)])),
        "mean": float(differences.mean()),
        "ci95": [float(np.percentile(differences, 2.5)), float(np.percentile(differences, 97.5))],
        "p_value": float(np.mean(differences <= 0)),
        "resamples": int(len(differences)),
    }
