"""Two streaming passes that turn a delimited file into `storage.Table` arrays.

Pass 1 parses every row (counting repairs and rows per split) and fits the encoders on the training
rows only; pass 2 parses again and writes the encoded rows, chunk by chunk, into memory-mapped arrays.
Readers supply a row parser (fields -> {key: raw value} and a label, or None to drop the row, counted
in `Repairs`), a split rule and one encoder per contract key.
"""

import math
import os

import numpy as np

from zoo.datasets import preprocess, storage
from zoo.datasets.reading import Repairs, read_rows

CHUNK = 65536
SPLIT_NAMES = storage.SPLITS


class Ids:
    """A categorical value -> id through a Vocabulary or HashedIds (shared objects fit once)."""

    shape, dtype = (), "int32"

    def __init__(self, table):
        self.table = table

    def fit(self, value):
        if isinstance(self.table, preprocess.Vocabulary):
            self.table.fit(value)

    def finalize(self):
        if isinstance(self.table, preprocess.Vocabulary) and self.table.index is None:
            self.table.finalize()

    def lookup(self, value):
        return self.table.lookup(value)

    @property
    def size(self):
        return self.table.size


class IdList(Ids):
    """A behaviour list -> the last `length` ids, left-padded with 0 (newest last)."""

    dtype = "int32"

    def __init__(self, table, length):
        super().__init__(table)
        self.shape = (length,)
        self.length = length

    def fit(self, values):
        if isinstance(self.table, preprocess.Vocabulary):
            self.table.fit_many(values[-self.length :])

    def lookup(self, values):
        ids = [self.table.lookup(v) for v in values[-self.length :]]
        return [0] * (self.length - len(ids)) + ids


class Number:
    """A numeric value -> float32; NaN (missing) -> the training mean."""

    shape, dtype = (), "float32"

    def __init__(self):
        self.total, self.count, self.mean = 0.0, 0, 0.0

    def fit(self, value):
        if not math.isnan(value):
            self.total += value
            self.count += 1

    def finalize(self):
        self.mean = self.total / self.count if self.count else 0.0

    def lookup(self, value):
        return self.mean if math.isnan(value) else value


class Raw:
    """A value written as-is (times: int64 seconds); `length` makes it a left-padded list."""

    dtype = "int64"

    def __init__(self, length=None):
        self.length = length
        self.shape = () if length is None else (length,)

    def fit(self, value):
        pass

    def finalize(self):
        pass

    def lookup(self, value):
        if self.length is None:
            return value
        values = list(value[-self.length :])
        return [0] * (self.length - len(values)) + values


def build_table(path, *, delimiter, num_fields, header, parse, split_of, encoders, out_dir, make_schema,
                info=None, verbose="auto"):
    """Runs the two passes over `path` and writes a `storage.Table` into `out_dir`.

    Args:
        path: one file, or a list of (file, split code) pairs (a data set shipped pre-split).
        parse: (line, fields, repairs) -> (values {key: raw}, label) or None (row dropped, counted).
        split_of: (line, data_index, values) -> 0 train, 1 validation, 2 test.
        encoders: {contract key: encoder}; fitted on train rows, in pass 1.
        make_schema: () -> Schema, called after fitting (encoders know their sizes).
        info: extra JSON-able facts for meta.json.
    Returns the account of pass 1 (already printed; also in the info as `repairs` and `accounting`).
    """
    sources = [(path, None)] if isinstance(path, str) else list(path)

    def rows_of(repairs_of, show):
        for file, fixed in sources:
            repairs = repairs_of[file]
            rows = read_rows(file, delimiter, num_fields, repairs, header=header, verbose=show)
            for index, (line, fields) in enumerate(rows):
                parsed = parse(line, fields, repairs)
                if parsed is not None:
                    values, label = parsed
                    yield file, (split_of(line, index, values) if fixed is None else fixed), values, label

    repairs_of = {file: Repairs(file) for file, _ in sources}
    rows = [0, 0, 0]
    written = dict.fromkeys(repairs_of, 0)
    for file, split, values, _ in rows_of(repairs_of, verbose):
        rows[split] += 1
        written[file] += 1
        if split == 0:
            for key, encoder in encoders.items():
                encoder.fit(values[key])
    for encoder in encoders.values():
        encoder.finalize()
    for file, repairs in repairs_of.items():
        repairs.finish(written[file]).report()

    spec = {key: (encoder.shape, encoder.dtype) for key, encoder in encoders.items()}
    spec["labels"] = ((), "float32")
    counts = dict(zip(SPLIT_NAMES, rows))
    writer = storage.TableWriter(out_dir, counts, spec)
    buffers = [{key: [] for key in spec} for _ in SPLIT_NAMES]

    def flush(split):
        buffer = buffers[split]
        writer.write(SPLIT_NAMES[split], {key: np.asarray(v, dtype=spec[key][1]) for key, v in buffer.items()})
        for values in buffer.values():
            values.clear()

    silent = {file: Repairs(file) for file, _ in sources}
    for _, split, values, label in rows_of(silent, False):
        buffer = buffers[split]
        for key, encoder in encoders.items():
            buffer[key].append(encoder.lookup(values[key]))
        buffer["labels"].append(label)
        if len(buffer["labels"]) >= CHUNK:
            flush(split)
    for split in range(3):
        if buffers[split]["labels"]:
            flush(split)
    writer.close()
    # The labels array is [n] on disk; the Table reader returns it as [n, 1].
    schema = make_schema()
    summary = " | ".join(r.summary() for r in repairs_of.values())
    accounting = {os.path.basename(file): r.accounting() for file, r in repairs_of.items()}
    storage.write_meta(out_dir, "table", schema, counts, dict(info or {}, repairs=summary, accounting=accounting))
    return summary


def order_split(total, fractions):
    """split_of for a split by row order (time order in the file): first fractions[0] train, then
    validation, then test."""
    train_end = int(total * fractions[0] + 1e-9)
    valid_end = int(total * (fractions[0] + fractions[1]) + 1e-9)
    return lambda line, index, values: 0 if index < train_end else (1 if index < valid_end else 2)


def random_split(total, fractions, seed):
    """split_of for a seeded random split by data-row index (BARS' 8:1:1)."""
    codes = np.random.default_rng(seed).choice(3, size=max(total, 1), p=list(fractions)).astype(np.int8)
    return lambda line, index, values: int(codes[index]) if index < codes.size else 0
