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


def vocabulary_state(options, values, counts, base=None, last_seen=None):
    """A vocabulary from the training rows' distinct values (a pyarrow string array) and their counts: values
    seen at least min_count times, most frequent first (ties in text order), at most max_size; ids 1.. in
    that order. `last_seen` (int64 unix seconds of each value's latest training row; a capped column of a
    spec with a time) is kept beside the tokens ("last_seen"), for the eviction of a continued fit.

    With `base` (a preset's vocabulary that a fit continues), its tokens keep their ids 1..len(base) and the
    new values follow in that order, up to max_size tokens in all. When more new values arrive than the cap
    leaves room for and both fits know their values' times, the table keeps the max_size most recently seen
    of its tokens and the new values (ties: the preset's token stays, then the more frequent value): each
    evicted token's id goes to an admitted value (Monolith's expiry, TF Recommenders-Addons' restrict);
    without times (a spec without a time, a preset fitted before they were kept) a full table takes no new
    value (the values left out score through the OOV id). A first fit evicts nothing: it keeps the most
    frequent values."""
    tokens = np.asarray(values.to_numpy(zero_copy_only=False), dtype=object).astype(str)
    counts = np.asarray(counts, dtype=np.int64)
    last = None if last_seen is None else np.asarray(last_seen, dtype=np.int64)
    keep = counts >= options["min_count"]
    old = [] if base is None else list(base["tokens"])
    if base is not None:
        keep &= ~np.isin(tokens, np.asarray(old, dtype=str))
    order = np.flatnonzero(keep)[np.lexsort((tokens[keep], -counts[keep]))] if keep.any() else np.zeros(0, np.int64)
    cap = options.get("max_size")
    room = None if cap is None else max(cap - len(old), 0)
    kept = old + [str(t) for t in tokens[order[:room]]]
    if last is None:
        return {"kind": "vocabulary", "tokens": kept}
    seen = dict(zip(tokens.tolist(), last.tolist()))  # this fit's latest time of each value
    timed = base is None or len(base.get("last_seen") or []) == len(old)  # (a preset fitted without times: [])
    before = base.get("last_seen") if base is not None and timed else [0] * len(old)
    old_last = [max(t, seen.get(token, t)) for token, t in zip(old, before)]
    state = {"kind": "vocabulary", "tokens": kept, "last_seen": old_last + [seen[t] for t in kept[len(old):]]}
    waiting = order[room:] if room is not None else order[:0]
    if base is None or not timed or not waiting.size:  # (a first fit keeps the most frequent, evicting nothing)
        return state
    # the table keeps the cap's most recently seen of its tokens and the waiting values; (time, the preset's
    # token first, then its lower id (the more frequent when fitted), a waiting value's frequency)
    candidates = [(t, 1, -i) for i, t in enumerate(state["last_seen"])] + [
        (int(last[j]), 0, -k) for k, j in enumerate(waiting)]
    ranked = sorted(range(len(candidates)), key=candidates.__getitem__, reverse=True)
    chosen = set(ranked[:cap])
    evicted = sorted(i for i in range(len(kept)) if i not in chosen)
    admitted = [waiting[c - len(kept)] for c in sorted(c for c in chosen if c >= len(kept))]
    for slot, j in zip(evicted, admitted):  # (one admitted value per evicted token: the table was full)
        state["tokens"][slot], state["last_seen"][slot] = str(tokens[j]), int(last[j])
    return state


def summed_counts(pairs):
    """(values, counts[, last seen]) of several (values, counts[, last seen]) tuples: counts summed per value,
    the latest time kept."""
    import pyarrow as pa

    timed = len(pairs[0]) == 3
    merged = pa.table({"v": pa.chunked_array([part[0] for part in pairs], pa.string()),
                       "c": pa.chunked_array([part[1] for part in pairs], pa.int64()),
                       **({"t": pa.chunked_array([part[2] for part in pairs], pa.int64())} if timed else {})})
    merged = merged.group_by("v").aggregate([("c", "sum")] + ([("t", "max")] if timed else []))
    out = merged["v"].combine_chunks(), merged["c_sum"].combine_chunks()
    return out + (merged["t_max"].combine_chunks(),) if timed else out


class Counts:
    """The fit's distinct values with their counts (pyarrow), batch by batch, and (`timed`) each value's latest
    time; merged when the unmerged batches outgrow the merged (memory: the distinct values)."""

    def __init__(self, timed=False):
        self.timed = timed
        self.pairs, self.merged_rows, self.pending_rows = [], 0, 0

    def add(self, values, times=None):
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.timed:
            table = pa.table({"v": pa.array(values, pa.string()) if not isinstance(values, (pa.Array, pa.ChunkedArray))
                              else values.cast(pa.string()), "t": pa.array(np.asarray(times, np.int64))})
            grouped = table.group_by("v").aggregate([("t", "count"), ("t", "max")])
            part = (grouped["v"].combine_chunks(), grouped["t_count"].combine_chunks().cast(pa.int64()),
                    grouped["t_max"].combine_chunks())
        else:
            counts = pc.value_counts(values)
            part = (counts.field("values").cast(pa.string()), counts.field("counts").cast(pa.int64()))
        self.pairs.append(part)
        self.pending_rows += len(part[0])
        if self.pending_rows > max(self.merged_rows, 2**16):
            self._merge()

    def _merge(self):
        if len(self.pairs) > 1:
            self.pairs = [summed_counts(self.pairs)]
        self.merged_rows = sum(len(part[0]) for part in self.pairs)
        self.pending_rows = 0

    def totals(self, group=None):
        """(values, counts[, last seen]) pyarrow arrays (over every process of `group`)."""
        import pyarrow as pa

        self._merge()
        empty = (pa.array([], pa.string()), pa.array([], pa.int64())) + ((pa.array([], pa.int64()),) if self.timed else ())
        mine = self.pairs[0] if self.pairs else empty
        return summed_counts(group.allgather(mine)) if group is not None and group.size > 1 else mine

    def state(self, options, group, base=None):
        """The column's fitted state (over every process of `group`: the counts summed per value)."""
        if options.get("hash_buckets"):
            return hashed_state(options)
        values, counts, *last_seen = self.totals(group)
        return vocabulary_state(options, values, counts, base, last_seen[0] if last_seen else None)


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
