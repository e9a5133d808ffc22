"""Fit: a data spec's fit over its training rows, one batch of rows at a time.

The in-memory build (zoo.datasets.spec_engine) adds all its rows at once; the streaming build
(spec_streaming) adds one batch after another; a fit under a process group exchanges each column's
counts in turn. Either way the fitted states are the same function of the training rows:

    categorical, BARS numeric     vocabulary.py's state of the values' counts (or hashing)
    numeric                       numeric.py's state of the values' moments and order statistics
    tags                          a vocabulary of each training row's first max_tags values
    list                          a vocabulary of the newest L tokens of each training row's list, or the
                                  vocabulary of the candidate column of the same feature ("shared")

A fit that continues a preset (`base`: engine.build's grow_from) keeps its numeric states and grows its
vocabularies (vocabulary.vocabulary_state); a capped vocabulary (max_size) of a spec with a time keeps each
token's latest time, so a continued fit evicts the least recently seen tokens when new values arrive at
the cap.
"""

import numpy as np

from zoo.datasets.transforms import numeric, tags, vocabulary


def shared_column(columns, options):
    """The cand_ categorical column whose vocabulary a list column shares (same feature), or None."""
    return next((name for name, other in columns.items() if other["role"] == "cand"
                 and other["type"] == "categorical" and other["feature"] == options["feature"]), None)


def fitted_tokens(tokens, lengths, train, length):
    """bool [T]: the list tokens the vocabulary is fitted on: the newest `length` of each training row's list."""
    row_of, rank = tags.token_positions(lengths)
    return train[row_of] & (rank >= np.repeat(lengths, lengths) - length)


class Fit:
    """The spec's fit, batch by batch: `add(data, train)` per batch of read rows (zoo.datasets.spec_engine's
    columns: text, numeric, list), then `states(group, base)`."""

    def __init__(self, spec):
        self.spec, self.counts, self.moments = spec, {}, {}

    def add(self, data, train):
        import pyarrow as pa
        import pyarrow.compute as pc

        spec, mask = self.spec, pa.array(train)
        times = data.get("time") if getattr(spec, "time", None) is not None else None
        training_rows = np.flatnonzero(train) if times is not None else None  # (each value's row, for its time)
        for name, options in spec.columns.items():
            kind = options["type"]
            if options.get("hash_buckets") or kind == "list" and shared_column(spec.columns, options):
                continue
            rows = training_rows
            if kind == "categorical":
                values = pc.filter(data["text"][name], mask)
            elif kind == "numeric" and options.get("bars"):
                values = numeric.bars_tokens(data["numeric"][name][train])
            elif kind == "numeric":
                self.moments.setdefault(name, numeric.Moments(bool(options["buckets"]))).add(
                    numeric.transformed(options, data["numeric"][name][train]))
                continue
            elif kind == "tags":
                tokens, lengths = data["list"][name]
                keep, row_of, _ = tags.kept(lengths, options["max_tags"])
                values, rows = pa.array(tokens[keep & train[row_of]], pa.string()), row_of[keep & train[row_of]]
            else:
                tokens, lengths = data["list"][name]
                chosen = fitted_tokens(tokens, lengths, train, spec.sequence_length)
                values, rows = pa.array(tokens[chosen], pa.string()), tags.token_positions(lengths)[0][chosen]
            timed = times is not None and self._timed(options)
            self.counts.setdefault(name, vocabulary.Counts(timed)).add(values, times[rows] if timed else None)
        return self

    def _timed(self, options):
        """Whether a column's counts keep each value's latest time: a capped table (max_size) of a spec with a
        time (every process alike, whether it read rows or not)."""
        return getattr(self.spec, "time", None) is not None and options.get("max_size") is not None

    def _counts(self, name, options):
        return self.counts.get(name) or vocabulary.Counts(self._timed(options))

    def states(self, group, base=None):
        """{column: fitted state} over every process of `group` (each column's counts exchanged in turn), in
        the spec's column order with list columns last; continuing `base`'s where given."""
        base = base or {}
        columns, states = self.spec.columns, {}
        self.drift = {}  # a continued fit: how far each kept numeric state's new values moved (numeric.drift)
        for name, options in columns.items():
            if options["type"] == "list":
                continue
            if options["type"] == "numeric" and not options.get("bars"):
                moments = self.moments.get(name, numeric.Moments(bool(options["buckets"])))
                if name in base:
                    if group.size > 1:
                        moments.gather(group)
                    moved = numeric.drift(base[name], moments)
                    if moved is not None:
                        self.drift[name] = moved
                states[name] = base.get(name) or moments.state(options, group)
            else:
                states[name] = self._counts(name, options).state(options, group, base.get(name))
        for name, options in columns.items():
            if options["type"] == "list":
                shared = shared_column(columns, options)
                states[name] = ({"kind": "shared", "column": shared} if shared
                                else self._counts(name, options).state(options, group, base.get(name)))
        return states
