"""Event-log data sets (one behaviour per row) -> `storage.Events`.

The readers of MovieLens, Amazon Books and Taobao UserBehavior stream their file into integer
columns (`EventColumns`: raw tokens interned to dense ints, so memory is a few bytes per event, never
the text), then filter, sort by (user, time), split, fit vocabularies on the training events only
and write the events plus per-sample history pointers (`write_events`).
"""

import numpy as np

from zoo.datasets import preprocess, storage


class Interner:
    """Raw token -> dense int 0..n-1 in first-seen order."""

    def __init__(self):
        self.index = {}

    def __call__(self, token):
        index = self.index
        value = index.get(token)
        if value is None:
            value = index[token] = len(index)
        return value

    def __len__(self):
        return len(self.index)


class EventColumns:
    """Columns of parsed events, appended row by row and stored in NumPy chunks."""

    CHUNK = 65536

    def __init__(self, dtypes):
        self.dtypes = dtypes
        self.rows = {name: [] for name in dtypes}
        self.chunks = {name: [] for name in dtypes}

    def append(self, **values):
        for name, value in values.items():
            self.rows[name].append(value)
        if len(self.rows[name]) >= self.CHUNK:
            self._flush()

    def _flush(self):
        for name, rows in self.rows.items():
            self.chunks[name].append(np.asarray(rows, dtype=self.dtypes[name]))
            rows.clear()

    def arrays(self):
        self._flush()
        return {
            name: np.concatenate(chunks) if chunks else np.zeros(0, self.dtypes[name])
            for name, chunks in self.chunks.items()
        }


def fit_ids(dense, train, size, min_count=1):
    """Vocabulary fitted on the training events: (lookup [size] dense -> id, vocabulary_size).

    Ids 1..n by descending training count (ties by first appearance); values never (or too rarely)
    seen in training map to the OOV id n + 1.
    """
    counts = np.bincount(dense[train], minlength=size)
    kept = np.flatnonzero(counts >= max(min_count, 1))
    kept = kept[np.argsort(-counts[kept], kind="stable")]
    lookup = np.full(size, kept.size + 1, dtype=np.int32)
    lookup[kept] = np.arange(1, kept.size + 1, dtype=np.int32)
    return lookup, kept.size + 2


def fit_vocabulary(interner, dense, train):
    """`fit_ids` on interned tokens: (the fitted preprocess.Vocabulary, lookup [len(interner)] -> id)."""
    lookup, size = fit_ids(dense, train, len(interner))
    tokens = np.empty(size - 2, dtype=object)
    fitted = lookup < size - 1
    tokens[lookup[fitted] - 1] = np.asarray(list(interner.index), dtype=object)[fitted]
    return preprocess.Vocabulary.from_tokens(tokens.tolist()), lookup


def apply_vocabulary(vocabulary, interner, dense):
    """A fitted vocabulary applied to interned tokens: (ids of `dense`, {"rows", "values"}: how many
    of them, and how many distinct tokens, are unknown to it and map to the OOV id)."""
    lookup = np.fromiter((vocabulary.lookup(t) for t in interner.index), dtype=np.int32, count=len(interner))
    ids = lookup[dense]
    unknown = ids == vocabulary.oov
    return ids, {"rows": int(unknown.sum()), "values": int(np.unique(dense[unknown]).size)}


UNKNOWN = "mapped the %s of {n} row(s) to the OOV id (unknown to the fitted vocabulary)"


def note_unknown(repairs, unknown_ids):
    """Notes, in the file's account, the rows whose id `apply_vocabulary` mapped to OOV, per field."""
    for name, unknown in unknown_ids.items():
        repairs.note(UNKNOWN % name, unknown["rows"])


def order_events(columns, user="user", time="time"):
    """Sorts every column by (user, time, file order); returns the sorted columns."""
    order = preprocess.sort_events(columns[user], columns[time])
    return {name: values[order] for name, values in columns.items()}


def write_events(out_dir, schema, events, samples, info):
    """Writes an Events store.

    Args:
        events: {hist key: [E] array} sorted by (user, time).
        samples: {split: {"start", "end", "user", "labels", and user_/cand_/ctx_/num_ keys: [S]}}; the
            splits are train, validation and test, or "all" when a fitted preprocessing is applied.
    """
    for key, values in events.items():
        storage.save(out_dir, f"events.{key}", values)
    rows = {}
    for split, part in samples.items():
        rows[split] = int(part["labels"].shape[0])
        for key, values in part.items():
            storage.save(out_dir, f"{split}.{key}", values)
    storage.write_meta(out_dir, "events", schema, rows, info)


def select(arrays, mask):
    return {key: values[mask] for key, values in arrays.items()}
