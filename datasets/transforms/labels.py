"""The label rule -> 0/1 labels, and the history's feedback ids from earlier rows' labels.

A label is a 0/1 column, or a rule {column, op, value} on any column: numbers compared as numbers
(==, !=, >=, >, <=, <), texts compared as texts (==, !=; "in": the stripped text among the listed
values, numbers written as the file does). A row with an empty label is dropped (counted). In a
history with feedback, each earlier row's label reads as an id: 1 negative, 2 positive, 3 unknown
(empty, or not a value the label reads).
"""

import numpy as np

from zoo.datasets.spec_reading import as_numbers, as_text


# ---------------------------------------------------------------------------------------- batch form
def rule_text(rule):
    """A label or history rule as a user reads it: "kind in ['order']", "stars >= 4", or the column alone."""
    return rule["column"] + (f" {rule['op']} {rule['value']!r}" if "op" in rule else "")


def seen_values(texts, shown=8):
    """"'no' 194, 'yes' 46": the distinct (stripped) texts of an array and their counts, most frequent first."""
    values, counts = np.unique(np.char.strip(np.asarray(texts, dtype=object).astype(str)), return_counts=True)
    order = np.argsort(-counts, kind="stable")[:shown]
    return ", ".join(f"{str(values[i])!r} {int(counts[i]):,}" for i in order)


def rule_holds(chunk, rule):
    """bool [n]: the rule {column, op, value} on each row (numbers compared as numbers, else as text)."""
    import operator

    ops = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge, ">": operator.gt, "<=": operator.le,
           "<": operator.lt}
    if rule["op"] == "in":  # the column's text among the listed values (numbers written as the file does)
        values = np.asarray(as_text(chunk.columns[rule["column"]]).to_numpy(zero_copy_only=False), dtype=object)
        wanted = [v if isinstance(v, str) else f"{v:g}" for v in rule["value"]]
        return np.isin(np.char.strip(values.astype(str)), wanted)
    if isinstance(rule["value"], str):
        values = np.asarray(as_text(chunk.columns[rule["column"]]).to_numpy(zero_copy_only=False), dtype=object)
        return np.asarray(ops[rule["op"]](values, rule["value"]), dtype=bool)
    values = as_numbers(chunk, rule["column"])
    return ops[rule["op"]](values, rule["value"]) & ~np.isnan(values)


def read(chunk, label, repairs):
    """(float32 labels [n], kept [n] bool): an empty label drops its row (counted); a 0/1 column's other
    values are refused with one line."""
    if label.get("events"):
        return np.ones(chunk.rows, np.float32), np.ones(chunk.rows, bool)
    column = label["column"]
    if "op" in label and (label["op"] == "in" or isinstance(label["value"], str)):  # a rule on text values
        text = np.char.strip(np.asarray(as_text(chunk.columns[column]).to_numpy(zero_copy_only=False),
                                        dtype=object).astype(str))
        empty = text == ""
        repairs.drop(f"dropped {{n}} row(s) with an empty '{column}'", int(empty.sum()))
        return rule_holds(chunk, label).astype(np.float32), ~empty
    values = as_numbers(chunk, column, "a number" if "op" in label else "0 or 1")
    empty = np.isnan(values)
    repairs.drop(f"dropped {{n}} row(s) with an empty '{column}'", int(empty.sum()))
    if "op" in label:
        return rule_holds(chunk, label).astype(np.float32), ~empty
    bad = ~empty & (values != 0) & (values != 1)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        chunk.error(index, column, f"should be 0 or 1, found {chunk.columns[column].slice(index, 1).to_pylist()[0]!r} "
                                   "(give the label a rule: {\"column\", \"op\", \"value\"})")
    return values.astype(np.float32), ~empty


# ---------------------------------------------------------------------------------------- graph form
def feedback_ids(text, label):
    """int32 hist_feedback ids of tf.string label texts under the spec's label (`labels`' rule): 1 negative,
    2 positive, 3 unknown (empty, or not a value the label reads)."""
    import tensorflow as tf

    from zoo.datasets.transforms.numeric import parsed_numbers
    from zoo.errors import ZooError

    stripped = tf.strings.strip(text)
    if "op" not in label:  # a 0/1 column
        values = parsed_numbers(text)
        known, positive = tf.equal(values, 0.0) | tf.equal(values, 1.0), tf.equal(values, 1.0)
    elif label["op"] == "in" or isinstance(label["value"], str):
        wanted = [v if isinstance(v, str) else f"{v:g}" for v in
                  (label["value"] if label["op"] == "in" else [label["value"]])]
        if label["op"] == "in":  # ("in" compares stripped texts, == and != the texts, as rule_holds)
            positive = tf.reduce_any(tf.stack([tf.equal(stripped, w) for w in wanted]), axis=0)
        elif label["op"] in ("==", "!="):
            positive = tf.equal(text, wanted[0]) if label["op"] == "==" else tf.not_equal(text, wanted[0])
        else:
            raise ZooError(f"the raw signature reads text labels with in, == and !=, not {label['op']!r}")
        known = tf.not_equal(stripped, "")
    else:
        values = parsed_numbers(text)
        compare = {"==": tf.equal, "!=": tf.not_equal, ">=": tf.greater_equal, ">": tf.greater,
                   "<=": tf.less_equal, "<": tf.less}[label["op"]]
        known, positive = ~tf.math.is_nan(values), compare(values, tf.constant(float(label["value"]), tf.float64))
    return tf.where(known, tf.where(positive, 2, 1), 3)
