"""The readers whose every row is a sample (Avazu, Taobao ads, Eleme): `events.read_log`'s columns ->
the arrays of a `storage.Table`, vectorised.

A reader states its rules row-wise and applies them to whole columns: a value is parsed once per distinct
token (`per_token`), a check is a mask over the rows and `first_fault` raises for the earliest row that
fails one (the check it meets first in that row, as a row-by-row reader would), drops and repairs are
counted with `Repairs.tally`, vocabularies are fitted on the training rows (`fit_ids`, the rule of
preprocess.Vocabulary) and `write` stores the rows of each split in file order.
"""

import numpy as np

from zoo.datasets import preprocess, storage

EMPTY, OTHER = -1, -2  # zero_one's codes of an empty value and of one that is neither 0 nor 1


def per_token(interner, convert, dtype=object):
    """[len(interner)] array: `convert(token)` of each distinct token, in the interner's order (index by
    a column's dense ints to get the rows' values)."""
    return np.array([convert(token) for token in interner.index], dtype=dtype)


def zero_one(interner, codes):
    """int8 [n]: a 0/1 column's values; EMPTY where a value is empty, OTHER where it is neither."""
    return per_token(interner, lambda t: {"": EMPTY, "0": 0, "1": 1}.get(t, OTHER), np.int8)[codes]


def shown(interner, code):
    """One dense int's token, stripped and cut to 40 characters, as an error message shows it."""
    return repr(list(interner.index)[int(code)].strip()[:40])


def first_fault(repairs, lines, checks):
    """Raises `repairs.error` for the earliest row that fails a check; `checks` [(bad [n] bool,
    message(row) -> str)] in the order a row is checked, so the first check a row fails is named."""
    found = None
    for bad, message in checks:
        rows = np.flatnonzero(bad)
        if rows.size and (found is None or rows[0] < found[0]):
            found = (int(rows[0]), message)
    if found is not None:
        repairs.error(int(lines[found[0]]), found[1](found[0]))


def fit_ids(columns, min_count=1, max_size=None):
    """One preprocess.Vocabulary fitted on the training values of one or more columns, and their ids.

    Args:
        columns: [(tokens, codes [N], train [N] bool)] sharing the vocabulary: a column's values are
            tokens[codes] (a token may be listed twice), `train` marks those it is fitted on.
        min_count, max_size: the Vocabulary's (ids 1..n by descending training count, ties by token;
            rarer tokens -> OOV; more than `max_size` tokens -> hashed).

    Returns:
        ([ids [N] int32 of each column], vocabulary_size, whether it is hashed).
    """
    index = {}
    maps = [np.fromiter((index.setdefault(t, len(index)) for t in tokens), np.int64, len(tokens))
            for tokens, _, _ in columns]
    counts = np.zeros(len(index), np.int64)
    for to_index, (_, codes, train) in zip(maps, columns):
        counts += np.bincount(to_index[codes[train]], minlength=len(index))
    vocabulary = preprocess.Vocabulary(min_count, max_size)
    vocabulary.fit_counts(index, counts.tolist())
    vocabulary.finalize()
    lookup = np.fromiter((vocabulary.lookup(t) for t in index), np.int32, len(index))
    ids = [lookup[to_index[codes]] for to_index, (_, codes, _) in zip(maps, columns)]
    return ids, vocabulary.size, vocabulary.hashed is not None


def newest(lengths, length):
    """bool [T]: whether each token of the lists (flat, `lengths` [n]) is among its list's newest `length`."""
    rank = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return rank >= np.repeat(lengths, lengths) - length


def padded(values, lengths, length):
    """[n, length]: each list's newest `length` values (flat `values` [T], `lengths` [n]), left-padded
    with 0 (newest last)."""
    ends = np.cumsum(lengths)
    position = ends[:, None] - length + np.arange(length)[None, :]  # [n, length] index into values
    valid = position >= (ends - lengths)[:, None]
    if not values.size:
        return np.zeros((lengths.size, length), values.dtype)
    return np.where(valid, values[np.clip(position, 0, values.size - 1)], 0).astype(values.dtype)


def fill_mean(values, train):
    """float32 [n]: NaN (missing) -> the mean of the present training values, summed in row order."""
    present = values[train & ~np.isnan(values)]
    mean = float(np.cumsum(present)[-1]) / present.size if present.size else 0.0
    return np.where(np.isnan(values), mean, values).astype(np.float32)


def order_split(total, fractions):
    """Split codes [total] by row order (time order in the file): the first fractions[0] train, then
    validation, then test."""
    train_end = int(total * fractions[0] + 1e-9)
    valid_end = int(total * (fractions[0] + fractions[1]) + 1e-9)
    return np.repeat(np.array([0, 1, 2], np.int8), [train_end, valid_end - train_end, total - valid_end])


def random_split(total, fractions, seed):
    """Split codes [total] drawn with `seed` (BARS' 8:1:1), by data-row index."""
    return np.random.default_rng(seed).choice(3, size=max(total, 1), p=list(fractions)).astype(np.int8)[:total]


def write(out_dir, schema, split, features, info):
    """Writes a storage.Table: the rows of each split (`split` [n] codes; `features` {key: [n, ...]} with
    "labels") in file order."""
    samples = {}
    for code, name in enumerate(storage.SPLITS):
        rows = np.flatnonzero(split == code)
        samples[name] = {key: values[rows] for key, values in features.items()}
    storage.write_table(out_dir, schema, samples, info)
