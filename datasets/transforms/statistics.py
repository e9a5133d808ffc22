"""Running statistics: the industry's oldest CTR features, from rows strictly earlier in time only.

For a key (the user, the item, a category), each row gets the number of the key's earlier rows, their
positives and a smoothed rate; a data spec's `statistics` section turns them into three features per key
(zoo.datasets.spec):

    seen      = rows before
    positives = positives before
    rate      = (positives before + a p) / (rows before + a)     (a = prior_rows, p = the training rate)

then each cut into equal-frequency buckets fitted on the training rows: ids of the key's group (a
candidate's key, the item: ids that each of M candidates carries; the user's: profile features).
"Before" is strictly earlier in time: rows at one time do not see each other, and no row sees its own label (zoo.recipes.baselines' user
running rate is the same count). The arithmetic lives here once, for the engine, the raw signature's
constants and the baselines.

State (in preprocessing.json): {"kind": "statistics", "edges": [3 lists]} per key's group; a key other
than the user also keeps its table of counts over the fitted log ("values", "rows", "positives"), the
counts a scored row of that key reads (batch form: `table_counts`; graph form: `graph_table_counts`).
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


def matching_counts(values, positive, own, start, end):
    """(rows [n], positives [n]) float64: for each row i, how many of values[start_i:end_i] equal own_i, and
    how many of those are `positive` (values, positive: [S], a store of entries in order; own, start, end:
    [n]). A user x category pair's counts: the entries are the user's strictly earlier rows."""
    values, own = np.asarray(values, np.int64), np.asarray(own, np.int64).reshape(-1)
    size = len(values) + 1
    keyed = values * size + np.arange(len(values))  # each entry by (its value, its place): sorted, one range per row
    order = np.argsort(keyed)
    keyed = keyed[order]
    before = np.r_[0, np.cumsum(np.asarray(positive, bool)[order])]
    low = np.searchsorted(keyed, own * size + np.asarray(start, np.int64))
    high = np.searchsorted(keyed, own * size + np.asarray(end, np.int64))
    return (high - low).astype(np.float64), (before[high] - before[low]).astype(np.float64)


def smoothed_rate(positives, rows, prior, prior_rows):
    """(positives + a p) / (rows + a): the rate pulled toward the prior p by a = prior_rows pseudo-rows."""
    return (positives + prior_rows * prior) / (rows + prior_rows)


def raw_values(rows, positives, prior, prior_rows):
    """[n, 3] float64: (rows, positives, smoothed rate) before the transform."""
    rows, positives = np.asarray(rows, np.float64), np.asarray(positives, np.float64)
    return np.stack([rows, positives, smoothed_rate(positives, rows, prior, prior_rows)], axis=1)


def fit(values, train, buckets):
    """{"edges": [3 lists]}: equal-frequency bucket edges of each raw value on the training rows (np.quantile's,
    zoo.datasets.transforms.numeric.bucket_edges; on whole counts, so the raw signature's buckets are exact)."""
    from zoo.datasets.transforms.numeric import bucket_edges

    chosen = values[train]
    return {"edges": [bucket_edges(len(column), buckets, lambda k, c=np.sort(column): c[k]) for column in chosen.T]}


def transformed(values, state):
    """[n, 3] int32 bucket ids 1..len(edges)+1 of raw values under a fitted state."""
    return np.stack([1 + np.searchsorted(np.asarray(edges), values[:, i], side="right")
                     for i, edges in enumerate(state["edges"])], axis=1).astype(np.int32)


def table_counts(state, text):
    """(rows, positives) [n] float64 of each value of `text` (a pyarrow string array) in a key's table of
    counts; 0 for a value the table lacks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = np.asarray(pc.index_in(text, pa.array(state["values"], pa.string())).fill_null(-1))
    known = index >= 0
    rows = np.where(known, np.asarray(state["rows"], np.float64)[np.where(known, index, 0)], 0.0)
    positives = np.where(known, np.asarray(state["positives"], np.float64)[np.where(known, index, 0)], 0.0)
    return rows, positives


# ---------------------------------------------------------------------------------------- graph form
def table(state):
    """The lookup table of a key's values (row 1.. of its counts; 0 for a value it lacks), built at export."""
    import tensorflow as tf

    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(state["values"] or [""], tf.string), tf.range(1, max(len(state["values"]), 1) + 1, dtype=tf.int64))
    return tf.lookup.StaticHashTable(initializer, default_value=0)


def graph_table_counts(state, lookup, text):
    """(rows, positives) float64 of tf.string texts in a key's table of counts (`table`); 0 where it lacks one."""
    import tensorflow as tf

    index = lookup.lookup(text)
    rows = tf.gather(tf.constant(np.r_[0.0, np.asarray(state["rows"], np.float64)]), index)
    positives = tf.gather(tf.constant(np.r_[0.0, np.asarray(state["positives"], np.float64)]), index)
    return rows, positives


def graph_bucketed(values, state):
    """int32 bucket ids of the raw values [rows, positives, rate] (tensors) under a fitted state: `transformed`'s
    ids, one tensor per value."""
    from zoo.datasets.transforms.numeric import graph_bucket_ids

    return [graph_bucket_ids(value, edges) for value, edges in zip(values, state["edges"])]
