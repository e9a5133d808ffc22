"""The trivial baselines a model's result stands beside, scored on the same rows (issue #36).

A CTR model that does not beat these has learned nothing a count could not; each is computed from the
labels of rows strictly earlier than the scored one, or of the training split, never from its own:

- `global rate`: the training split's positive rate, one score for every row (AUC 0.5 by construction);
- `item rate`: the item's positive rate on the training split, smoothed toward the global rate,
  (positives + a g) / (rows + a) with a = PRIOR_ROWS;
- `user running rate`: the user's rate over their rows strictly earlier in time (training rows, then the
  scored rows before this one), smoothed the same way;
- `item + user`: a logistic regression on the logits of those two rates, fitted on the scored rows
  themselves (three parameters; in-sample, so an optimistic baseline: a model that beats it beats it).

`baseline_scores` takes the arrays of the rows (the item and user ids, times and labels); `compare`
scores a model's result against them: the AUC and LogLoss of each, the best baseline, and a paired
bootstrap of the model's AUC against it (zoo.recipes.metrics.paired_bootstrap).
"""

import numpy as np

from zoo.datasets.transforms.statistics import earlier_counts, smoothed_rate
from zoo.recipes.metrics import auc, logloss, paired_bootstrap

PRIOR_ROWS = 10.0  # the smoothing's pseudo-rows at the global rate


def _smoothed(positives, rows, prior):
    return smoothed_rate(positives, rows, prior, PRIOR_ROWS)


def _logistic(x, y, steps=200):
    """Weights of a logistic regression of y on [1, x] by Newton's method (a small ridge keeps it finite)."""
    design = np.column_stack([np.ones(len(x)), x])
    w = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ w))
        gradient = design.T @ (p - y) + 1e-6 * w
        hessian = (design * (p * (1 - p))[:, None]).T @ design + 1e-6 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def baseline_scores(train, rows):
    """{baseline name: scores [n]} for the scored `rows`. Each argument is a dict of arrays: "labels" [n],
    and where known "item" [n] and "user" [n] ids and "time" [n]; `train` holds the training split's.
    A baseline whose inputs are absent (no item, no user or no time) is left out."""
    labels = np.asarray(rows["labels"], np.float64).reshape(-1)
    prior = float(np.mean(train["labels"]))
    scores = {"global rate": np.full(len(labels), prior)}
    logits = []
    if "item" in rows and "item" in train:
        items, inverse = np.unique(np.concatenate([train["item"], rows["item"]]), return_inverse=True)
        seen = inverse[: len(train["item"])]
        counts = np.bincount(seen, minlength=len(items)).astype(np.float64)
        positives = np.bincount(seen, weights=np.asarray(train["labels"], np.float64), minlength=len(items))
        scores["item rate"] = _smoothed(positives, counts, prior)[inverse[len(train["item"]):]]
        logits.append(scores["item rate"])
    if all(key in rows and key in train for key in ("user", "time")):
        users = np.concatenate([train["user"], rows["user"]])
        times = np.concatenate([train["time"], rows["time"]])
        both = np.concatenate([np.asarray(train["labels"], np.float64), labels])
        counts, positives = (v[len(train["user"]):] for v in earlier_counts(users, times, both))
        scores["user running rate"] = _smoothed(positives, counts, prior)
        logits.append(scores["user running rate"])
    if len(logits) == 2:
        x = np.column_stack([np.log(p / (1 - p)) for p in logits])
        w = _logistic(x, labels)
        scores["item + user"] = 1 / (1 + np.exp(-(w[0] + x @ w[1:])))
    return scores


# Bootstrap resamples of the scored rows, for `compare` here and zoo.recipes.compare's leaderboard. On the
# own-data log's 15,000 later rows (benchmarks/own_data_compare.py) the 95% interval's ends moved by 0.00008
# (s.d. over 12 bootstrap seeds) at 1,000 resamples and at 2,000 alike, on an interval 0.004 wide; each
# resample costs its share of the time after training (issue #36: compare within 5% of its models'
# training; issue #39: `fit` on 1M Criteo rows spent 14 of its 19 s after the epochs in 2 x 2,000).
RESAMPLES = 1_000


def compare(labels, model_scores, baselines, resamples=None):
    """{"rows": [{"name", "auc", "logloss"}], "best": the best baseline's name, "lead": the model's AUC minus
    the best baseline's, "bootstrap": paired bootstrap of that difference, "beats": whether its 95% interval
    lies above 0} of a model's scores against the baselines' on the same rows (`RESAMPLES` resamples unless
    `resamples` says)."""
    labels = np.asarray(labels, np.float64).reshape(-1)
    rows = [{"name": name, "auc": auc(labels, s), "logloss": logloss(labels, s)} for name, s in baselines.items()]
    best = max(rows, key=lambda r: r["auc"])
    model_auc = auc(labels, model_scores)
    bootstrap = paired_bootstrap(labels, np.asarray(model_scores, np.float64).reshape(-1), baselines[best["name"]],
                                 resamples=RESAMPLES if resamples is None else resamples)
    return {"rows": rows, "best": best["name"], "lead": model_auc - best["auc"], "bootstrap": bootstrap,
            "beats": bootstrap["ci95"][0] > 0}


def summary_line(model_name, result):
    """One line: the model against the best baseline, flagged when it does not beat it."""
    lo, hi = result["bootstrap"]["ci95"]
    shown = ", ".join(f"{r['name']} {r['auc']:.4f}" for r in result["rows"])
    verdict = "beats" if result["beats"] else "does NOT beat"
    return (f"baselines (AUC on the same rows): {shown}; {model_name} {verdict} the best ({result['best']}) by "
            f"{result['lead']:+.4f} (95% CI {lo:+.4f} .. {hi:+.4f})")


def split_arrays(processed, split, user_key=None, item_key=None):
    """The arrays `baseline_scores` reads, of one split of a processed data set (zoo.datasets.prepare):
    its labels, and the user and item keys and candidate times where it has them. The keys are the raw
    values' hashes a data spec's read keeps ("raw_user", "raw_item": every unseen user its own), else the
    contract's ids `user_key` and `item_key`."""
    arrays = {"labels": processed.column(split, "labels")}
    keys = set(processed.schema.keys())
    for name, raw, key in (("user", "raw_user", user_key), ("item", "raw_item", item_key), ("time", None, "cand_time")):
        if raw is not None and processed.has_column(split, raw):
            arrays[name] = processed.column(split, raw)
        elif key in keys:
            arrays[name] = processed.column(split, key)
    return arrays


def against_baselines(model, processed, split, dataset, user_key=None, item_key=None, resamples=None,
                      predicted=None):
    """`compare` of `model`'s scores on `dataset` (the split's rows in order, as make_dataset reads them
    unshuffled) against the baselines of that split, fitted on the training split. `predicted`: the
    caller's `predict_rows(model, dataset)`, when it has scored the rows already."""
    from zoo.recipes.evaluate import predict_rows

    labels, scores, _ = predicted if predicted is not None else predict_rows(model, dataset)
    rows = split_arrays(processed, split, user_key, item_key)
    if len(labels) != len(rows["labels"]) or not np.array_equal(labels.reshape(-1), rows["labels"].reshape(-1)):
        raise ValueError(f"the {split} rows scored are not the split's rows in order")
    baselines = baseline_scores(split_arrays(processed, "train", user_key, item_key), rows)
    return compare(labels, scores, baselines, resamples=resamples)
