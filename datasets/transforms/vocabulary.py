"""Categorical values -> ids: a vocabulary fitted on the training rows, or hashing.

State (in preprocessing.json): {"kind": "vocabulary", "tokens": [...]} (ids 1..len(tokens) in that order,
0 is padding, len(tokens) + 1 the OOV id) or {"kind": "hashed", "buckets": n, "hash": "farmhash64"} (ids
1..n, FarmHash64 of the text, TensorFlow's `to_hash_bucket_fast` in both forms).

Fit: the training rows' values seen at least `min_count` times, most frequent first (ties in text order),
at most `max_size`; a fit that continues a preset's vocabulary keeps its ids and appends.

Options (a spec's categorical, list or tags column): `min_count` (default 1), `max_size`, or
`hash_buckets` N instead of a vocabulary.
"""

import numpy as np

from zoo.errors import ZooError

OPTIONS = ("min_count", "max_size", "hash_buckets")


def checked_options(options, where, positive_int):
    """A spec's categorical (list, tags) column's vocabulary options, checked, with their defaults."""
    checked = {"min_count": positive_int(options.get("min_count", 1), f"{where} 'min_count'"),
               "max_size": positive_int(options.get("max_size"), f"{where} 'max_size'", allow_none=True,
                                        budget="max_size"),
               "hash_buckets": positive_int(options.get("hash_buckets"), f"{where} 'hash_buckets'", allow_none=True,
                                            budget="hash_buckets")}
    if checked["hash_buckets"] and (options.get("max_size") or options.get("min_count", 1) != 1):
        raise ZooError(f"spec {where}: hash_buckets replaces the vocabulary (no min_count or max_size)")
    return checked


def hashed_state(options):
    return {"kind": "hashed", "buckets": options["hash_buckets"], "hash": "farmhash64"}


def vocabulary_state(options, values, counts, base=None):
    """A vocabulary from the training rows' distinct values (a pyarrow string array) and their counts: values
    seen at least min_count times, most frequent first (ties in text order), at most max_size; ids 1.. in
    that order. With `base` (a preset's vocabulary that a fit continues), its tokens keep their ids
    1..len(base) and the new values follow in that order, up to max_size tokens in all (a full table takes
    no new value: the values left out score through the OOV id, as any unseen value does)."""
    tokens = np.asarray(values.to_numpy(zero_copy_only=False), dtype=object).astype(str)
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts >= options["min_count"]
    if base is not None:
        keep &= ~np.isin(tokens, np.asarray(base["tokens"], dtype=str))
    tokens, counts = tokens[keep], counts[keep]
    order = np.lexsort((tokens, -counts)) if tokens.size else np.zeros(0, np.int64)
    kept = [] if base is None else list(base["tokens"])
    room = None if options.get("max_size") is None else max(options["max_size"] - len(kept), 0)
    return {"kind": "vocabulary", "tokens": kept + [str(t) for t in tokens[order[:room]]]}


def summed_counts(pairs):
    """(values, counts) of several (values, counts) pairs, summed per value."""
    import pyarrow as pa

    merged = pa.table({"v": pa.chunked_array([values for values, _ in pairs], pa.string()),
                       "c": pa.chunked_array([counts for _, counts in pairs], pa.int64())})
    merged = merged.group_by("v").aggregate([("c", "sum")])
    return merged["v"].combine_chunks(), merged["c_sum"].combine_chunks()


class Counts:
    """The fit's distinct values with their counts (pyarrow), batch by batch; merged when the unmerged
    batches outgrow the merged (memory: the distinct values)."""

    def __init__(self):
        self.pairs, self.merged_rows, self.pending_rows = [], 0, 0

    def add(self, values):
        import pyarrow as pa
        import pyarrow.compute as pc

        counts = pc.value_counts(values)
        self.pairs.append((counts.field("values").cast(pa.string()), counts.field("counts").cast(pa.int64())))
        self.pending_rows += len(counts)
        if self.pending_rows > max(self.merged_rows, 2**16):
            self._merge()

    def _merge(self):
        if len(self.pairs) > 1:
            self.pairs = [summed_counts(self.pairs)]
        self.merged_rows = sum(len(values) for values, _ in self.pairs)
        self.pending_rows = 0

    def totals(self, group=None):
        """(values, counts) pyarrow arrays (summed over every process of `group`)."""
        import pyarrow as pa

        self._merge()
        mine = self.pairs[0] if self.pairs else (pa.array([], pa.string()), pa.array([], pa.int64()))
        return summed_counts(group.allgather(mine)) if group is not None and group.size > 1 else mine

    def state(self, options, group, base=None):
        """The column's fitted state (over every process of `group`: the counts summed per value)."""
        if options.get("hash_buckets"):
            return hashed_state(options)
        return vocabulary_state(options, *self.totals(group), base)


# ---------------------------------------------------------------------------------------- batch form
def ids(state, values):
    """int32 ids [n] of values (a pyarrow string array) under a fitted state; an unknown value -> the OOV id."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
    if state["kind"] == "hashed":
        import tensorflow as tf

        if not len(array):
            return np.zeros(0, np.int32)
        text = np.asarray(array.to_numpy(zero_copy_only=False), dtype=object)
        return (tf.strings.to_hash_bucket_fast(text, state["buckets"]).numpy() + 1).astype(np.int32)
    tokens = state["tokens"]
    index = pc.index_in(array, value_set=pa.array(tokens, pa.string()))
    return np.asarray(pc.fill_null(index, len(tokens)).to_numpy(zero_copy_only=False), dtype=np.int32) + 1


def oov_id(state):
    return len(state["tokens"]) + 1


# ---------------------------------------------------------------------------------------- graph form
def table(state):
    """The lookup table of a vocabulary (built once, at export); None for a hashed state."""
    import tensorflow as tf

    if state["kind"] != "vocabulary":
        return None
    tokens = state["tokens"]
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(tokens or [""], tf.string), tf.range(1, max(len(tokens), 1) + 1, dtype=tf.int64))
    return tf.lookup.StaticHashTable(initializer, default_value=len(tokens) + 1)


def graph_ids(state, lookup, text):
    """(int32 ids, bool unknown) of tf.string texts under a fitted state and its `table`."""
    import tensorflow as tf

    if state["kind"] == "hashed":
        found = tf.strings.to_hash_bucket_fast(text, state["buckets"]) + 1
        return tf.cast(found, tf.int32), tf.zeros_like(found, tf.bool)
    found = tf.ones_like(text, tf.int64) if not state["tokens"] else lookup.lookup(text)
    return tf.cast(found, tf.int32), tf.equal(found, oov_id(state))
