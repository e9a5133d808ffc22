"""Running statistics: the industry's oldest CTR features, from rows strictly earlier in time only.

For a key (the user, the item, a category), each row gets the number of the key's earlier rows, their
positives and a smoothed rate; a data spec's `statistics` section turns them into three numeric features
per key (zoo.datasets.spec):

    seen      = log1p(rows before)
    positives = log1p(positives before)
    rate      = (positives before + a p) / (rows before + a)     (a = prior_rows, p = the training rate)

then each standardised with its training rows' mean and deviation, or (a candidate's key, the item) cut
into equal-frequency buckets fitted on the training rows, ids that each of M candidates carries. "Before" is strictly earlier in time:
rows at one time do not see each other, and no row sees its own label (zoo.recipes.baselines' user
running rate is the same count). The arithmetic lives here once, for the engine, the raw signature's
constants and the baselines.
"""

import numpy as np


def earlier_counts(keys, times, labels):
    """(rows [n], positives [n]) float64: for each row, the rows of its key strictly earlier in time and
    how many of them are positive, over all the rows given (keys: any sortable ids)."""
    keys, times = np.asarray(keys), np.asarray(times)
    if not len(keys):
        return np.zeros(0), np.zeros(0)
    order = np.lexsort((times, keys))
    k, t, y = keys[order], times[order], np.asarray(labels, np.float64)[order]
    index = np.arange(len(k))
    new_key = np.r_[True, k[1:] != k[:-1]]
    new_time = new_key | np.r_[True, t[1:] != t[:-1]]
    key_start = np.maximum.accumulate(np.where(new_key, index, 0))
    time_start = np.maximum.accumulate(np.where(new_time, index, 0))  # rows at one time do not see each other
    before = np.r_[0.0, np.cumsum(y)]  # positives before each position
    rows = (time_start - key_start).astype(np.float64)
    positives = before[time_start] - before[key_start]
    back = np.empty_like(order)
    back[order] = index
    return rows[back], positives[back]


def raw_values(rows, positives, prior, prior_rows):
    """[n, 3] float64: (rows, positives, smoothed rate) before the transform."""
    rows, positives = np.asarray(rows, np.float64), np.asarray(positives, np.float64)
    return np.stack([rows, positives, (positives + prior_rows * prior) / (rows + prior_rows)], axis=1)


def _logged(values):
    """The counts through log1p (the rate as it is): what is standardised."""
    return np.concatenate([np.log1p(values[:, :2]), values[:, 2:]], axis=1)


def fit(values, train, buckets=None):
    """The transform of raw values fitted on the training rows: {"mean": [3], "std": [3]} of the logged values
    (a constant column: deviation 1), or with `buckets` {"edges": [3 lists]} of equal-frequency buckets of
    the values themselves (np.quantile's; on whole counts, so that the raw signature's buckets are exact)."""
    from zoo.datasets.spec_engine import bucket_edges

    chosen = values[train]
    if buckets:
        return {"edges": [bucket_edges(len(column), buckets, lambda k, c=np.sort(column): c[k]) for column in chosen.T]}
    chosen = _logged(chosen)
    mean = chosen.mean(axis=0) if len(chosen) else np.zeros(values.shape[1])
    std = chosen.std(axis=0) if len(chosen) else np.ones(values.shape[1])
    return {"mean": [float(v) for v in mean], "std": [float(v) if v > 0 else 1.0 for v in std]}


def transformed(values, state):
    """[n, 3] of raw values under a fitted state: int32 bucket ids 1..len(edges)+1, or float32 standardised
    logged values."""
    if "edges" in state:
        return np.stack([1 + np.searchsorted(np.asarray(edges), values[:, i], side="right")
                         for i, edges in enumerate(state["edges"])], axis=1).astype(np.int32)
    return ((_logged(values) - np.asarray(state["mean"])) / np.asarray(state["std"])).astype(np.float32)
