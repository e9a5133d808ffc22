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


def _score_order(scores):
    """(order, ties) of a score vector: its rows in ascending score order (stable), and None when no two
    scores are equal, else (the positions in that order of the rows whose score another row shares, and for
    each the offset among those positions of the first and of the last row of its score)."""
    order = np.argsort(scores, kind="stable")
    ranked = scores[order]
    same_as_next = ranked[1:] == ranked[:-1]
    if not same_as_next.any():
        return order, None
    tied = np.flatnonzero(np.r_[same_as_next, False] | np.r_[False, same_as_next])
    new_score = np.r_[True, ~same_as_next[tied[1:] - 1]]
    firsts = np.flatnonzero(new_score)
    run = np.cumsum(new_score) - 1
    return order, (tied, firsts[run], (np.r_[firsts[1:], len(tied)] - 1)[run])


def _auc_in_order(positives, negatives, ties):
    """Exact AUC from each row's weight as a positive and as a negative, rows in ascending score order along
    the last axis (`_score_order`'s): a positive wins against every negative with a lower score and half of
    those with its own (ties count half); NaN where a class is absent. Every row is first scored against the
    rows before it in the order (its own negative weight half); the rows of a shared score are then set right
    against their score's whole count. Sums in float64 whatever the weights' dtype (the bootstrap's int32
    counts), so no product overflows."""
    through = np.cumsum(negatives, axis=-1, dtype=negatives.dtype)  # negative weight up to each row, itself included
    twice_wins = (2 * np.einsum("...g,...g->...", positives, through, dtype=np.float64)
                  - np.einsum("...g,...g->...", positives, negatives, dtype=np.float64))
    if ties is not None:
        tied, first, last = ties
        twice_wins += _tied_wins(np.take(positives, tied, axis=-1), np.take(negatives, tied, axis=-1), first, last)
    total = positives.sum(axis=-1, dtype=np.float64) * (through[..., -1] if through.shape[-1] else 0)
    return np.where(total > 0, twice_wins / 2 / np.where(total > 0, total, 1), np.nan)


def _tied_wins(tied_positives, tied_negatives, first, last):
    """Twice the wins to add for the rows of shared scores (`_score_order`'s ties: their weights in order, and
    the offsets of the first and last row of each one's score): each row was scored against the rows before
    it in the order only; it is set right against its score's whole negative weight (ties count half)."""
    running = np.cumsum(tied_negatives, axis=-1, dtype=tied_negatives.dtype)
    before = running - tied_negatives
    start = np.take(before, first, axis=-1)  # negative weight before each row's score
    whole, earlier = np.take(running, last, axis=-1) - start, before - start  # at its score; before it there
    return np.einsum("...g,...g->...", tied_positives, whole - 2 * earlier - tied_negatives, dtype=np.float64)


def auc(labels, scores):
    """Exact ROC AUC (ties count half); NaN when only one class is present."""
    labels, scores = _as_1d("labels", labels), _as_1d("scores", scores)
    if len(labels) != len(scores):
        raise ZooError(f"auc needs one score per label: {len(labels)} labels, {len(scores)} scores")
    order, ties = _score_order(scores)
    return float(_auc_in_order(labels[order], 1 - labels[order], ties))


def check_two_classes(labels, rows):
    """Refuses in one line `labels` of one class (or none): no AUC or GAUC ranks anything there. `rows`
    names the rows (\"the 3,000 rows of later.csv\")."""
    labels = _as_1d("labels", labels)
    positives = int(np.sum(labels == 1))
    if 0 < positives < labels.size:
        return
    if not labels.size:
        raise ZooError(f"{rows}: no labelled row, so no metric can be computed")
    one = "positive (label 1)" if positives else "negative (label 0)"
    raise ZooError(f"{rows}: all {labels.size:,} are {one}, so AUC and GAUC rank nothing: evaluate on rows of both "
                   "classes")


def logloss(labels, scores, epsilon=1e-7):
    """Binary cross-entropy of the predicted CTR, the scores clipped to [epsilon, 1 - epsilon] (as
    keras.metrics.BinaryCrossentropy clips them)."""
    labels, scores = _as_1d("labels", labels), np.clip(_as_1d("scores", scores), epsilon, 1 - epsilon)
    return float(-np.mean(labels * np.log(scores) + (1 - labels) * np.log(1 - scores)))


def gauc(user_ids, labels, scores):
    """Group AUC: the AUC of each user, weighted by the user's number of rows; users whose rows are all
    of one class are left out (their AUC is undefined), as in the DIN/SUAN papers. Every user at once:
    the rows sorted by (user, score), each user's AUC counted as `auc` counts all rows."""
    user_ids = np.asarray(user_ids).reshape(-1)
    labels, scores = _as_1d("labels", labels), _as_1d("scores", scores)
    if not len(user_ids) == len(labels) == len(scores):
        raise ZooError(
            f"gauc needs one user id per row: {len(user_ids)} ids, {len(labels)} labels, {len(scores)} scores"
        )
    if not len(labels):
        raise ZooError("gauc is undefined: no rows")
    user = np.unique(user_ids, return_inverse=True)[1].reshape(-1)
    order = np.lexsort((scores, user))
    user, score, label = user[order], scores[order], labels[order]
    new_user = np.r_[True, user[1:] != user[:-1]]
    group = np.cumsum(new_user | np.r_[True, score[1:] != score[:-1]]) - 1  # each (user, distinct score)
    negatives, positives = np.bincount(group, weights=1 - label), np.bincount(group, weights=label)
    owner = user[np.r_[True, np.diff(group) > 0]]  # each group's user
    through = np.cumsum(negatives)  # negatives up to each group, then made per user
    through -= (through - negatives)[np.searchsorted(owner, owner)]
    wins = np.bincount(owner, weights=positives * (2 * through - negatives) / 2)
    users_positive, users_negative = np.bincount(owner, weights=positives), np.bincount(owner, weights=negatives)
    rows = np.bincount(user)
    both = (users_positive > 0) & (users_negative > 0)
    if not both.any():
        raise ZooError("gauc is undefined: no user has both a positive and a negative row")
    per_user = wins[both] / (users_positive[both] * users_negative[both])
    return float(np.sum(rows[both] * per_user) / rows[both].sum())


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
    summary scores each (row, seed) once instead of once per comparison. Labels are read as 0/1 (a label
    above 1/2 is a positive). A resample is counted once (how many times it drew each row: one bincount,
    shared by the vectors); a vector reads those counts in its own score order and scores them as `auc`
    scores 0/1 labels, each row weighing its count. A vector whose rows mostly share scores (a baseline's
    rates) counts the drawn positives and negatives per distinct score instead (one bincount of its own),
    which is faster there; both give the same AUC. A constant vector (the global rate) scores 1/2 on every
    resample holding both classes. `chunk` resamples are drawn at a time (default: about four million
    drawn rows); the draws, and the result, do not depend on it."""
    labels = _as_1d("labels", labels)
    scores = np.asarray(scores, "float64")
    if scores.ndim != 2 or scores.shape[1] != len(labels):
        raise ZooError(f"bootstrap_aucs needs scores [M, {len(labels)}] on the labels' rows, got {list(scores.shape)}")
    if not np.all(np.isfinite(scores)):
        raise ZooError("bootstrap_aucs: the scores contain NaN or infinite values")
    rng = np.random.default_rng(seed)
    n = len(labels)
    chunk = chunk or max(1, min(resamples, 4_000_000 // max(n, 1)))
    block = max(1, (1 << 19) // max(n, 1))  # resamples counted at once: their counts (int32) stay in cache
    positive = (labels > 0.5).astype(np.int32)
    plans = []  # per vector: how a resample's AUC is counted
    for vector in scores:
        order, ties = _score_order(vector)
        if vector[order[0]] == vector[order[-1]]:  # one score for every row (the global rate): 1/2
            plans.append(("constant",))
        elif ties is not None and len(ties[0]) > n // 4:  # many shared scores: count the rows drawn per distinct score
            rank = np.empty(n, np.int64)  # each row's distinct score, ascending
            rank[order] = np.cumsum(np.r_[True, vector[order][1:] != vector[order][:-1]]) - 1
            groups = int(rank.max()) + 1
            plans.append(("per score", groups, positive.astype(np.int64) * groups + rank))
        else:  # read each row's count in score order, shared scores set right after
            label = positive[order]
            before = np.cumsum(1 - label) - (1 - label)  # per row in the order: negative rows before it
            plans.append(("per row", order[label == 0], order[label == 1], before[label == 1], order, label, ties))
    aucs = np.empty((len(scores), resamples))
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        drawn = rng.integers(0, n, size=(count, n), dtype=np.int64)
        for first in range(0, count, block):
            rows, times = drawn[first:first + block], None
            at = slice(start + first, start + first + len(rows))
            if ("constant",) in plans:  # a constant vector's AUC is 1/2 where a resample holds both classes
                drawn_positives = positive[rows].sum(axis=1)
                halves = np.where((drawn_positives > 0) & (drawn_positives < n), 0.5, np.nan)
            for i, plan in enumerate(plans):
                if plan[0] == "constant":
                    aucs[i, at] = halves
                    continue
                if plan[0] == "per score":  # [resamples, 2, distinct scores]: negatives, then positives
                    _, groups, key = plan
                    offsets = np.arange(len(rows), dtype=np.int64)[:, None] * (2 * groups)
                    counts = np.bincount((key[rows] + offsets).ravel(), minlength=len(rows) * 2 * groups)
                    counts = counts.reshape(len(rows), 2, groups)
                    aucs[i, at] = _auc_in_order(counts[:, 1], counts[:, 0], None)
                    continue
                if times is None:  # [resamples, rows]: how often each row was drawn (shared by the vectors)
                    offsets = np.arange(len(rows), dtype=np.int64)[:, None] * n
                    times = np.bincount((rows + offsets).ravel(), minlength=len(rows) * n).reshape(len(rows), n)
                    times = times.astype(np.int32)
                aucs[i, at] = _drawn_auc(times, *plan[1:])
    return aucs


def _drawn_auc(times, negative_rows, positive_rows, negatives_before, order, label, ties):
    """`_auc_in_order` of 0/1 labels on resamples (times [R, N]: how often each row was drawn), counted on
    the negative rows and the positive rows apart: a positive row wins against the drawn negatives before
    it in the score order (a cumulative count over the negative rows only, read at its place) and never
    against itself, so no product of a row's positive and negative weight is formed; rows of a shared score
    are then set right as `_auc_in_order` does. About a third of the passes over [R, N] of scoring every
    row's two weights; the same integer sums, so the same AUCs."""
    through = np.zeros((len(times), len(negative_rows) + 1), times.dtype)  # drawn negatives up to each one
    np.cumsum(np.take(times, negative_rows, axis=1), axis=1, out=through[:, 1:])
    positives = np.take(times, positive_rows, axis=1)
    twice_wins = 2 * np.einsum("rp,rp->r", positives, np.take(through, negatives_before, axis=1), dtype=np.float64)
    if ties is not None:
        tied, first, last = ties
        tied_times = np.take(times, order[tied], axis=1)
        tied_positives = tied_times * label[tied]
        twice_wins += _tied_wins(tied_positives, tied_times - tied_positives, first, last)
    total = positives.sum(axis=-1, dtype=np.float64) * through[:, -1]
    return np.where(total > 0, twice_wins / 2 / np.where(total > 0, total, 1), np.nan)


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
