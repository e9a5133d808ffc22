"""The `raw` signature: a preset's whole data contract inside the SavedModel, so TF Serving clients send
what their logs hold and nothing has to be re-implemented on the client.

    zoo.export("runs/my_din/preset", "export/my_din/1", signature="raw")
    python -m zoo export runs/my_din/preset export/my_din/1 --signature raw
    python -m zoo request runs/my_din/preset later.csv --rows 8      # the REST body for 8 rows

It exists for presets trained on a data spec (their preprocessing.json carries the spec and its fit).
Every input is text (tf.string), as the file holds it, named after the spec's column (lower-cased,
other characters -> "_"):

    <user/ctx/num column>          [B]      a user's key, a context value, a number ("" = missing), tags
                                            as the file writes them ("Comedy|Romance": split in the graph)
    <cand column>                  [B, M]   the candidates (any M for lightsuan and rest, M = 1 otherwise)
    <time column>                  [B]      the request's time (unix s/ms digits or ISO 8601, as the spec)
    history_<field column>         [B, H]   (history from the log) the user's earlier rows, any H, padded
    history_<time column>          [B, H]   with "" (padding), in any order; with `history.feedback`
    history_<label column>         [B, H]   also each earlier row's label as the log writes it ("" unknown)
    <list column>                  [B, H]   (history from list columns) the list, oldest first, "" padding

The graph applies the fitted preprocessing with TensorFlow's own machinery: a `tf.lookup.StaticHashTable`
per vocabulary (a value it does not know -> the OOV id, counted), `tf.strings.to_hash_bucket_fast` for
hashed columns (the engine hashes with the same FarmHash64), the fitted fill, log1p, standardisation and
bucket edges (`tf.searchsorted`), and the history's preparation: entries at or after the request's time
are dropped (nothing from a label's future), the rest ordered by time (ties keep the client's order),
the newest L kept (the cut counted) and left-padded; the spec's running statistics come from the same
entries (the user's: every entry before the request's time, before the cut to L, and those whose label
is positive: send all of the user's earlier rows) and from the fitted tables (any other key: the counts
of the whole fitted log per value), bucketed as the engine buckets them. Outputs, per row: `pctr` [B, M] (and
`rectified_pctr` for SUAN-family models), `unknown_ids` [B] (values mapped to OOV), `history_cut` [B]
(history entries dropped: beyond L, not before the request's time, or with an unreadable time),
`repaired` [B] (numbers that are not finite numbers, "abc", "inf" or "1e400", filled as missing values
with the fitted fill; numbers beyond +-1e9 once transformed, clipped to it, as the engine does; tag lists
longer than their column's max_tags, cut to it). A request time that is not a time from 1990 to 2100
("", "-5", "1e20") stops
the call with one line naming the input (the engine refuses such a row alike). As the id signatures do
(zoo/serving/shapes.py), it refuses a request of another rank, mismatched batch sizes, candidate columns
of different M or history columns of different H with one line naming the key; M = 0 gives pctr [B, 0].

A spec whose time is a strptime format cannot be served raw (TensorFlow has no strptime op): the
export refuses it with one line; unix seconds, milliseconds and ISO 8601 are parsed in the graph.
"""

import numpy as np

from zoo.datasets.spec import DataSpec, feature_name, statistics_state
from zoo.datasets.spec_reading import EARLIEST_TIME, LATEST_TIME
from zoo.datasets.statistics import smoothed_rate
from zoo.errors import ZooError
from zoo.schema import NUMERIC_LIMIT

ISO_ZONE = r"(Z|[+-]\d\d:?\d\d)$"
TRIMMED = r"^[\s\v\x{85}\p{Z}]+|[\s\v\x{85}\p{Z}]+$"  # Unicode white space at either end (pyarrow's utf8_trim_whitespace)


def check_state(state):
    """The DataSpec of a preprocessing state that can be served raw; a one-line ZooError otherwise."""
    if state is None or "spec" not in state:
        raise ZooError("the raw signature needs a preset trained on a data spec (its preprocessing.json carries "
                       "the spec); this one has none")
    spec = DataSpec.read(state["spec"])
    for column, options in spec.columns.items():
        if options["type"] == "tags" and options["separator"] is None:
            raise ZooError(f"the raw signature takes a tags column as text: give column '{column}' a 'separator' (its "
                           "values are read as native lists)")
    if spec.time is not None and spec.time["format"] not in ("unix_s", "unix_ms", "iso8601"):
        raise ZooError(f"the raw signature parses unix_s, unix_ms and iso8601 times in the graph, not the strptime "
                       f"format {spec.time['format']!r} of this spec")
    return spec


def input_names(spec):
    """{raw input name: (column, kind)}: kind is "row", "cand", "time", "history" or "list"."""
    names = {}
    for column, options in spec.columns.items():
        if options["type"] == "list":
            names[feature_name(column)] = (column, "list")
        elif options["role"] == "cand":
            names[feature_name(column)] = (column, "cand")
        elif options["role"] != "hist":
            names[feature_name(column)] = (column, "row")
    if spec.time is not None:
        names[feature_name(spec.time["column"])] = (spec.time["column"], "time")
    if spec.history_from_log():
        columns = {o["feature"]: c for c, o in spec.columns.items() if o["role"] in ("cand", "hist")}
        for field in spec.history["fields"]:
            names[f"history_{feature_name(columns[field])}"] = (columns[field], "history")
        if spec.feedback():
            names[f"history_{feature_name(spec.label['column'])}"] = (spec.label["column"], "history")
        names[f"history_{feature_name(spec.time['column'])}"] = (spec.time["column"], "history")
    return names



def input_signature(spec, any_candidates):
    import tensorflow as tf

    shapes = {"row": (None,), "time": (None,), "cand": (None, None if any_candidates else 1),
              "history": (None, None), "list": (None, None)}
    return {name: tf.TensorSpec(shapes[kind], tf.string, name=name) for name, (_, kind) in input_names(spec).items()}


# ---------------------------------------------------------------------------------------- parsing
def _parsed_numbers(text):
    """float64 of texts, NaN where empty or not a number (where _numbers would stop the graph)."""
    import tensorflow as tf

    text = tf.strings.strip(text)
    valid = tf.strings.regex_full_match(text, r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
    values = tf.strings.to_number(tf.where(valid, text, "0"), tf.float64)
    return tf.where(valid & tf.math.is_finite(values), values, tf.constant(np.nan, tf.float64))


def feedback_ids(text, label):
    """int32 hist_feedback ids of label texts under the spec's label (zoo.datasets.spec_reading.labels): 1
    negative, 2 positive, 3 unknown (empty, or not a value the label reads)."""
    import tensorflow as tf

    stripped = tf.strings.strip(text)
    if "op" not in label:  # a 0/1 column
        values = _parsed_numbers(text)
        known, positive = tf.equal(values, 0.0) | tf.equal(values, 1.0), tf.equal(values, 1.0)
    elif label["op"] == "in" or isinstance(label["value"], str):
        wanted = [v if isinstance(v, str) else f"{v:g}" for v in
                  (label["value"] if label["op"] == "in" else [label["value"]])]
        if label["op"] == "in":  # (spec_reading.rule_holds: "in" compares stripped texts, == and != the texts)
            positive = tf.reduce_any(tf.stack([tf.equal(stripped, w) for w in wanted]), axis=0)
        elif label["op"] in ("==", "!="):
            positive = tf.equal(text, wanted[0]) if label["op"] == "==" else tf.not_equal(text, wanted[0])
        else:
            raise ZooError(f"the raw signature reads text labels with in, == and !=, not {label['op']!r}")
        known = tf.not_equal(stripped, "")
    else:
        values = _parsed_numbers(text)
        compare = {"==": tf.equal, "!=": tf.not_equal, ">=": tf.greater_equal, ">": tf.greater,
                   "<=": tf.less_equal, "<": tf.less}[label["op"]]
        known, positive = ~tf.math.is_nan(values), compare(values, tf.constant(float(label["value"]), tf.float64))
    return tf.where(known, tf.where(positive, 2, 1), 3)


def _days_from_civil(year, month, day):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm), int64 tensors."""
    import tensorflow as tf

    year = year - tf.cast(month <= 2, tf.int64)
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _iso_seconds(text):
    """(int64 unix seconds, valid bool) of ISO 8601 texts: YYYY-MM-DD[(T| )HH:MM[:SS[.f]]][Z|+-HH[:]MM];
    without a zone the time is UTC (as the engine reads it); a date or clock that does not exist (month 13,
    February 30, 25:00) is not valid."""
    import tensorflow as tf

    text = tf.strings.strip(text)
    shape = r"\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d:?\d\d)?"
    valid = tf.strings.regex_full_match(text, shape)
    safe = tf.where(valid, text, "1970-01-01")

    def number(start, length):
        part = tf.strings.substr(safe, start, length)
        return tf.strings.to_number(tf.where(tf.equal(part, ""), "0", part), tf.int64)

    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    has_clock = tf.strings.length(safe) >= 16
    clock = tf.where(has_clock, safe, "1970-01-01T00:00:00")
    hour = tf.strings.to_number(tf.strings.substr(clock, 11, 2), tf.int64)
    minute = tf.strings.to_number(tf.strings.substr(clock, 14, 2), tf.int64)
    has_seconds = tf.strings.regex_full_match(safe, r".{16}:\d\d.*")
    second = tf.where(has_seconds, tf.strings.to_number(
        tf.strings.substr(tf.where(has_seconds, safe, "1970-01-01T00:00:00"), 17, 2), tf.int64), 0)
    zone = tf.strings.regex_replace(safe, r"^.*?([+-]\d\d):?(\d\d)$", r"\1\2")
    zoned = tf.strings.regex_full_match(safe, r".*[+-]\d\d:?\d\d") & has_clock
    zone = tf.where(zoned, zone, "+0000")
    sign = tf.where(tf.strings.substr(zone, 0, 1) == "-", tf.constant(-1, tf.int64), 1)
    offset = sign * (tf.strings.to_number(tf.strings.substr(zone, 1, 2), tf.int64) * 3600
                     + tf.strings.to_number(tf.strings.substr(zone, 3, 2), tf.int64) * 60)
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    # a real calendar date and clock, as the engine's reader requires ("2024-13-45" is no time)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = tf.gather(tf.constant([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], tf.int64),
                     tf.clip_by_value(month - 1, 0, 11)) + tf.cast(leap & (month == 2), tf.int64)
    real = (month >= 1) & (month <= 12) & (day >= 1) & (day <= days) & (hour < 24) & (minute < 60) & (second < 60)
    return seconds, valid & real


def parse_times(text, fmt):
    """(int64 unix seconds, valid bool) of time texts in the spec's format; valid from 1990-01-01 to
    2100-01-01 (excluded), the window the engine reads (zoo.datasets.spec_reading.EARLIEST_TIME, LATEST_TIME)."""
    import tensorflow as tf

    if fmt == "iso8601":
        seconds, valid = _iso_seconds(text)
        return seconds, valid & (seconds >= EARLIEST_TIME) & (seconds < LATEST_TIME)
    scale = 1000.0 if fmt == "unix_ms" else 1.0
    values = _parsed_numbers(text) / scale
    valid = tf.math.is_finite(values) & (values >= EARLIEST_TIME) & (values < LATEST_TIME)  # (NaN compares false)
    return tf.cast(tf.floor(tf.where(valid, values, 0.0)), tf.int64), valid


def _bucket_ids(values, edges):
    """int32 ids 1..len(edges)+1 of float64 values among sorted bucket edges (np.searchsorted's "right"); no
    edge (one value on every training row): id 1."""
    import tensorflow as tf

    if not len(edges):
        return tf.ones_like(values, tf.int32)
    flat = tf.reshape(values, (1, -1))
    ids = tf.searchsorted(tf.constant(np.asarray(edges, np.float64).reshape(1, -1)), flat, side="right") + 1
    return tf.reshape(tf.cast(ids, tf.int32), tf.shape(values))


# ---------------------------------------------------------------------------------------- the graph
class RawPreprocessing:
    """The fitted preprocessing of a spec as TensorFlow ops (tables built once, at export)."""

    def __init__(self, state, schema):
        import tensorflow as tf

        self.spec = check_state(state)
        self.schema = schema
        self.states = state["fitted"]
        self.tables = {}
        for column, fitted in self.states.items():
            if fitted["kind"] == "vocabulary":
                tokens = fitted["tokens"]
                initializer = tf.lookup.KeyValueTensorInitializer(
                    tf.constant(tokens or [""], tf.string),
                    tf.range(1, max(len(tokens), 1) + 1, dtype=tf.int64))
                self.tables[column] = tf.lookup.StaticHashTable(initializer, default_value=len(tokens) + 1)
            elif fitted["kind"] == "statistics" and "values" in fitted:  # a key's counts over the fitted log
                initializer = tf.lookup.KeyValueTensorInitializer(
                    tf.constant(fitted["values"] or [""], tf.string),
                    tf.range(1, max(len(fitted["values"]), 1) + 1, dtype=tf.int64))
                self.tables[column] = tf.lookup.StaticHashTable(initializer, default_value=0)

    def _fitted(self, column):
        fitted = self.states[column]
        return (self.states[fitted["column"]], fitted["column"]) if fitted["kind"] == "shared" else (fitted, column)

    def ids(self, column, text):
        """(int32 ids, bool unknown) of a categorical column's texts."""
        import tensorflow as tf

        fitted, owner = self._fitted(column)
        if fitted["kind"] == "hashed":
            ids = tf.strings.to_hash_bucket_fast(text, fitted["buckets"]) + 1
            return tf.cast(ids, tf.int32), tf.zeros_like(ids, tf.bool)
        if not fitted["tokens"]:
            ids = tf.ones_like(text, tf.int64)
        else:
            ids = self.tables[owner].lookup(text)
        return tf.cast(ids, tf.int32), tf.equal(ids, len(fitted["tokens"]) + 1)

    def tags(self, column, options, text):
        """(int32 ids [..., S], unknown [B]) of a tags column's texts ([B] or [B, M]): split at the separator,
        values trimmed, empty ones skipped, the first S = max_tags kept (rows cut counted as repaired)."""
        import tensorflow as tf

        size = options["max_tags"]
        tokens = tf.strings.regex_replace(tf.strings.split(text, options["separator"]), TRIMMED, "")
        tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(tokens, ""))
        ids, oov = self.ids(column, tokens.flat_values)
        batch, shape = tf.shape(text)[0], tf.concat([tf.shape(text), [size]], 0)
        ids = tokens.with_flat_values(ids).to_tensor(0, shape=shape)
        cut = tf.cast(tokens.row_lengths(axis=-1) > size, tf.int32)
        self.repaired.append(tf.reduce_sum(tf.reshape(cut, (batch, -1)), axis=1))
        oov = tokens.with_flat_values(tf.cast(oov, tf.int32)).to_tensor(0, shape=shape)  # (the kept values only)
        return ids, tf.reduce_sum(tf.reshape(oov, (batch, -1)), axis=1)

    def numeric(self, column, text):
        """float32 values (role num) or int32 bucket ids of a numeric column's texts."""
        import tensorflow as tf

        fitted = self.states[column]
        values = _parsed_numbers(text)  # "abc", "inf", "1e400": not a finite number, filled as a missing value
        self.repaired.append(tf.reduce_sum(tf.reshape(tf.cast(
            tf.math.is_nan(values) & tf.not_equal(tf.strings.strip(text), ""), tf.int32), (tf.shape(text)[0], -1)), axis=1))
        if fitted["log1p"]:
            values = tf.sign(values) * tf.math.log1p(tf.abs(values))
        values = tf.where(tf.math.is_nan(values), tf.constant(fitted["fill"], tf.float64), values)
        if "edges" in fitted:
            return _bucket_ids(values, fitted["edges"])
        if "std" in fitted:
            values = (values - fitted["mean"]) / fitted["std"]
        beyond = tf.abs(values) > NUMERIC_LIMIT  # clipped and counted, as the engine does
        self.repaired.append(tf.reduce_sum(tf.reshape(tf.cast(beyond, tf.int32), (tf.shape(text)[0], -1)), axis=1))
        return tf.cast(tf.clip_by_value(values, -NUMERIC_LIMIT, NUMERIC_LIMIT), tf.float32)

    def statistics(self, key, group, names, inputs, by_column, features):
        """{feature key: int32 bucket ids} of a key's running statistics (zoo.datasets.statistics): the user's
        from the request's history entries (kept by `_history`), a (user, column) pair's from those of
        them whose column's id is the candidate's, another key's from the fitted table of the whole fitted
        log; [B] for a user or ctx key, [B, M] for a cand key or a pair."""
        import tensorflow as tf

        spec = self.spec
        state, prior = self.states[statistics_state(key)], self.states["statistics"]["prior"]
        if key == spec.user or isinstance(key, tuple):  # the request's entries before its time, all of them
            counted = tf.cast(self.entries["kept"], tf.int32)  # [B, H]
            if isinstance(key, tuple):  # those whose column's id is the candidate's: [B, M, H]
                feature = spec.columns[key[1]]["feature"]
                entries, own = self.entries[f"hist_{feature}"], features[f"cand_{feature}"]  # [B, H], [B, M]
                counted = counted[:, None, :] * tf.cast(tf.equal(entries[:, None, :], own[:, :, None]), tf.int32)
            positive = self.entries["positive"] if key == spec.user else self.entries["positive"][:, None, :]
            rows = tf.cast(tf.reduce_sum(counted, axis=-1), tf.float64)
            positives = tf.cast(tf.reduce_sum(tf.where(positive, counted, 0), axis=-1), tf.float64)
        else:
            text = inputs[by_column[(key, "cand" if spec.columns[key]["role"] == "cand" else "row")]]
            index = self.tables[statistics_state(key)].lookup(text)
            rows = tf.gather(tf.constant(np.r_[0.0, np.asarray(state["rows"], np.float64)]), index)
            positives = tf.gather(tf.constant(np.r_[0.0, np.asarray(state["positives"], np.float64)]), index)
        prior_rows = float(spec.statistics["prior_rows"])
        values = [rows, positives, smoothed_rate(positives, rows, prior, prior_rows)]  # (tensors, the same arithmetic)
        out = {}
        for i, (name, value) in enumerate(zip(names, values)):
            out[f"{group}_{name}"] = _bucket_ids(value, state["edges"][i])
        return out

    def _history(self, fields, times, request_time):
        """{hist key: [B, L]} from [B, H] texts: entries before the request's time, ordered by time (stable),
        the newest L, left-padded; and int32 [B] count of entries cut."""
        import tensorflow as tf

        L = self.schema.sequence_length
        first = next(iter(fields.values()))[1]
        present = tf.not_equal(first, "")
        if times is not None:
            seconds, valid_time = parse_times(times, self.spec.time["format"])
            keep = present & valid_time & (seconds < request_time[:, None])
        else:
            seconds, keep = tf.zeros_like(first, tf.int64), present
        # invalid entries first, then the kept ones by time (stable: ties keep the client's order)
        key = tf.where(keep, seconds, tf.int64.min)
        order = tf.argsort(key, axis=1, stable=True)
        width = tf.shape(first)[1]
        pad = tf.maximum(L - width, 0)

        def newest(x, fill):
            x = tf.gather(x, order, batch_dims=1)
            x = tf.pad(x, [[0, 0], [pad, 0]], constant_values=fill)
            return tf.ensure_shape(x[:, -L:], (None, L))

        kept = newest(keep, False)
        out = {}
        self.entries = {"kept": keep}  # every entry before the request's time, before the cut to L (the statistics')
        unknown = tf.zeros(tf.shape(first)[:1], tf.int32)
        for key_name, (column, text) in fields.items():
            if key_name == "hist_feedback":
                ids = feedback_ids(text, self.spec.label)
                self.entries["positive"] = tf.equal(ids, 2)
                out[key_name] = tf.where(kept, newest(ids, 0), 0)
                continue
            ids, oov = self.ids(column, text)
            self.entries[key_name] = ids
            out[key_name] = tf.where(kept, newest(ids, 0), 0)
            unknown += tf.reduce_sum(tf.cast(tf.where(kept, newest(oov, False), False), tf.int32), axis=1)
        if times is not None:
            out["hist_time"] = tf.where(kept, newest(seconds, 0), tf.zeros((), tf.int64))
        cut = tf.reduce_sum(tf.cast(present, tf.int32), axis=1) - tf.reduce_sum(tf.cast(kept, tf.int32), axis=1)
        return out, unknown, cut

    def __call__(self, inputs):
        """(features in the contract, unknown_ids [B] int32, history_cut [B] int32, repaired [B] int32). A
        request time that is not a time from 1990 to 2100 stops the call ("assertion failed: [...]" naming the
        input): every history entry is masked by it, so no score could be right."""
        import tensorflow as tf

        spec, schema = self.spec, self.schema
        names = input_names(spec)
        by_column = {(column, kind): name for name, (column, kind) in names.items()}
        features, unknown = {}, []
        self.repaired = []
        request_time = None
        if spec.time is not None:
            name = by_column[(spec.time["column"], "time")]
            request_time, valid = parse_times(inputs[name], spec.time["format"])
            what = {"unix_s": "unix seconds", "unix_ms": "unix milliseconds", "iso8601": "an ISO 8601 time"}
            check = tf.debugging.Assert(tf.reduce_all(valid), [
                f"the request time {name} holds a value that is not {what[spec.time['format']]} from 1990 to 2100"])
            with tf.control_dependencies([check]):
                request_time = tf.identity(request_time)
        for column, options in spec.columns.items():
            role, feature = options["role"], options["feature"]
            if options["type"] == "list" or role == "hist":
                continue
            kind = "cand" if role == "cand" else "row"
            text = inputs[by_column[(column, kind)]]
            if options["type"] == "numeric":
                features[f"{role}_{feature}"] = self.numeric(column, text)
            elif options["type"] == "tags":
                features[f"{role}_{feature}"], oov = self.tags(column, options, text)
                unknown.append(oov)
            else:
                ids, oov = self.ids(column, text)
                features[f"{role}_{feature}"] = ids
                unknown.append(tf.reduce_sum(tf.reshape(tf.cast(oov, tf.int32), (tf.shape(oov)[0], -1)), axis=1))
        batch = tf.shape(inputs[next(iter(names))])[:1]
        cut = tf.zeros(batch, tf.int32)
        if spec.history_from_log():
            columns = {o["feature"]: c for c, o in spec.columns.items() if o["role"] in ("cand", "hist")}
            fields = {f"hist_{field}": (columns[field], inputs[by_column[(columns[field], "history")]])
                      for field in spec.history["fields"]}
            if spec.feedback():
                labels = inputs[by_column[(spec.label["column"], "history")]]
                fields["hist_feedback"] = (spec.label["column"], self.labelled_history(
                    labels, inputs[by_column[(spec.time["column"], "history")]], by_column))
            history, oov, cut = self._history(fields, inputs[by_column[(spec.time["column"], "history")]],
                                              request_time)
            features.update(history)
            unknown.append(oov)
        else:
            for column, options in spec.columns.items():
                if options["type"] == "list":
                    history, oov, list_cut = self._history(
                        {f"hist_{options['feature']}": (column, inputs[by_column[(column, "list")]])}, None, None)
                    features.update(history)
                    unknown.append(oov)
                    cut += list_cut
        if spec.time is not None:
            local = request_time + int(spec.time["utc_offset_hours"] * 3600)
            for name in spec.time["derive"]:
                value = (local // 3600) % 24 + 1 if name == "hour" else (local // 86400 + 3) % 7 + 1
                features[f"ctx_{name}"] = tf.cast(value, tf.int32)
        for key, group, names in spec.statistics_features():
            features.update(self.statistics(key, group, names, inputs, by_column, features))
        if schema.time:
            candidates = tf.shape(next(v for k, v in features.items() if k.startswith("cand_")))[1]
            features["cand_time"] = tf.tile(request_time[:, None], tf.stack([1, candidates]))
        features = {key: features[key] for key in schema.keys()}
        zero = tf.zeros(batch, tf.int32)
        return (features, tf.add_n(unknown) if unknown else zero, cut,
                tf.add_n(self.repaired) if self.repaired else zero)


    def labelled_history(self, labels, times, by_column):
        """`labels` (history_<label> [B, H]), refused in one line when the request sends history entries (of a
        readable time) and not one of them carries its label: the client read its history from rows without the
        label column, and the preset's feedback and user statistics would silently read none (the engine
        refuses such an earlier log alike). Single "" labels stay unknown (hist_feedback 3), as in a log."""
        import tensorflow as tf

        _, entries = parse_times(times, self.spec.time["format"])  # (an entry of unreadable time is cut anyway)
        labelled = tf.logical_and(entries, tf.not_equal(tf.strings.strip(labels), ""))
        name = by_column[(self.spec.label["column"], "history")]
        check = tf.debugging.Assert(tf.logical_or(tf.logical_not(tf.reduce_any(entries)), tf.reduce_any(labelled)), [
            f"{name} is empty on every history entry of the request: the history of this preset reads the label "
            f"of each earlier row ({self.spec.label['column']}, as the log writes it); send it with the rows"])
        with tf.control_dependencies([check]):
            return tf.identity(labels)


def endpoints(model, options):
    """{"raw": (function, input signature)} scoring raw rows through the preset's preprocessing."""
    from zoo.serving import plain, shapes

    state = options.pop("preprocessing", None)
    m2 = options.pop("m2", None)
    if options:
        plain.raise_unused(options, "raw")
    preprocessing = RawPreprocessing(state, model.schema.with_candidates(1))
    any_candidates = hasattr(model, "score_all") or hasattr(model, "decoder")

    def score(inputs):
        import tensorflow as tf

        features, unknown, cut, repaired = preprocessing(inputs)
        extra = {}
        if hasattr(model, "score_all"):
            pctr = model.score_all(features, parallel_candidates=m2 or model.parallel_candidates,
                                   use_cache=model.alignment_pool == "causal")
            # [B, M] stated: with M = 0 (no pass) score_all's reshape cannot infer B
            pctr = tf.reshape(pctr, tf.shape(next(v for k, v in features.items() if k.startswith("cand_")))[:2])
            extra["rectified_pctr"] = model.rectified_pctr(pctr)
        elif hasattr(model, "decoder"):
            encoded = model.encoder()({k: v for k, v in features.items() if k.startswith("hist")}, training=False)
            decoder_inputs = {k: v for k, v in features.items() if not k.startswith("hist") or k == "hist_time"}
            pctr = model.decoder(None)({**decoder_inputs, **encoded}, training=False)
        else:
            pctr = model(features, training=False)
        return {"pctr": pctr, **extra, "unknown_ids": unknown, "history_cut": cut, "repaired": repaired}

    signature = input_signature(preprocessing.spec, any_candidates)
    kinds = input_names(preprocessing.spec)
    shared = {f"the {kind} inputs share {axis}": [k for k in signature if kinds[k][1] == kind]
              for kind, axis in (("cand", "M"), ("history", "H"))}
    score = shapes.checked(score, signature, shared)  # one line naming the key for a wrong rank, B, M or H
    score.resources = list(preprocessing.tables.values())  # the lookup tables the SavedModel must hold
    return {"raw": (score, signature)}
