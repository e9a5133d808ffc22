"""A tags cell -> its first S = max_tags ids: "Comedy|Romance" split at the column's separator, values
trimmed (Unicode white space at either end), empty ones skipped, the first S kept (a longer list is cut,
counted), 0 on the empty slots. The values share one vocabulary (vocabulary.py), fitted on the training
rows' kept values.

Options: `separator` (CSV; Parquet/JSON lists are native), `max_tags` S (default 8)."""

import numpy as np

from zoo.errors import ZooError

DEFAULT_MAX_TAGS = 8
OPTIONS = ("separator", "max_tags")


def checked_options(options, where, role, positive_int):
    """A spec's tags column's options (besides its vocabulary's), checked, with their defaults."""
    if role not in ("user", "cand", "ctx"):
        raise ZooError(f"spec {where}: tags are a feature of the row (role user, cand or ctx); a history "
                       "is a list column (role hist)")
    separator = options.get("separator")
    if separator is not None and (not isinstance(separator, str) or not separator):
        raise ZooError(f"spec {where}: 'separator' should be a non-empty string")
    return {"separator": separator,
            "max_tags": positive_int(options.get("max_tags", DEFAULT_MAX_TAGS), f"{where} 'max_tags'",
                                     budget="sequence_length")}

TRIMMED = r"^[\s\v\x{85}\p{Z}]+|[\s\v\x{85}\p{Z}]+$"  # Unicode white space at either end (pyarrow's utf8_trim_whitespace)


def token_positions(lengths):
    """(row [T], rank within its row [T]) of the flat tokens of lists of `lengths`."""
    row_of = np.repeat(np.arange(lengths.size), lengths)
    return row_of, np.arange(row_of.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def kept(lengths, size):
    """(bool [T]: the flat tokens kept (each row's first `size`), row [T], rank [T])."""
    row_of, rank = token_positions(lengths)
    return rank < size, row_of, rank


# ---------------------------------------------------------------------------------------- batch form
def ids(lookup, tokens, lengths, size):
    """(int32 ids [n, S], bool [n]: rows cut) of flat tokens [T] (the reader's split: spec_reading.token_lists)
    with `lengths` [n]; `lookup(tokens, rows)` gives the kept tokens' ids."""
    keep, row_of, rank = kept(lengths, size)
    out = np.zeros((lengths.size, size), np.int32)
    out[row_of[keep], rank[keep]] = lookup(tokens[keep], row_of[keep])
    return out, lengths > size


# ---------------------------------------------------------------------------------------- graph form
def graph_ids(lookup, text, options):
    """(int32 ids [..., S], int32 [B] values unknown, int32 [B] cells cut) of a tags column's tf.string texts
    ([B] or [B, M]); `lookup(flat texts)` gives (ids, unknown) (vocabulary.graph_ids)."""
    import tensorflow as tf

    size = options["max_tags"]
    tokens = tf.strings.regex_replace(tf.strings.split(text, options["separator"]), TRIMMED, "")
    tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(tokens, ""))
    found, oov = lookup(tokens.flat_values)
    batch, shape = tf.shape(text)[0], tf.concat([tf.shape(text), [size]], 0)
    found = tokens.with_flat_values(found).to_tensor(0, shape=shape)
    cut = tf.cast(tokens.row_lengths(axis=-1) > size, tf.int32)
    oov = tokens.with_flat_values(tf.cast(oov, tf.int32)).to_tensor(0, shape=shape)  # (the kept values only)
    return (found, tf.reduce_sum(tf.reshape(oov, (batch, -1)), axis=1),
            tf.reduce_sum(tf.reshape(cut, (batch, -1)), axis=1))
