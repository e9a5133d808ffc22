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

from zoo.datasets.spec import DataSpec, feature_name, statistics_state
from zoo.datasets.transforms import labels as label_rules
from zoo.datasets.transforms import numeric, statistics, tags, vocabulary
from zoo.datasets.transforms import times as time_reading
from zoo.errors import ZooError



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


# ---------------------------------------------------------------------------------------- the graph
class RawPreprocessing:
    """The fitted preprocessing of a spec as TensorFlow ops (tables built once, at export)."""

    def __init__(self, state, schema):
        self.spec = check_state(state)
        self.schema = schema
        self.states = state["fitted"]
        self.tables = {}
        for column, fitted in self.states.items():
            if fitted["kind"] == "vocabulary":
                self.tables[column] = vocabulary.table(fitted)
            elif fitted["kind"] == "statistics" and "values" in fitted:  # a key's counts over the fitted log
                self.tables[column] = statistics.table(fitted)

    def _fitted(self, column):
        fitted = self.states[column]
        return (self.states[fitted["column"]], fitted["column"]) if fitted["kind"] == "shared" else (fitted, column)

    def ids(self, column, text):
        """(int32 ids, bool unknown) of a categorical column's texts (zoo.datasets.transforms.vocabulary)."""
        fitted, owner = self._fitted(column)
        return vocabulary.graph_ids(fitted, self.tables.get(owner), text)

    def tags(self, column, options, text):
        """(int32 ids [..., S], unknown [B]) of a tags column's texts ([B] or [B, M]) (zoo.datasets.transforms.tags;
        rows cut counted as repaired)."""
        ids, unknown, cut = tags.graph_ids(lambda flat: self.ids(column, flat), text, options)
        self.repaired.append(cut)
        return ids, unknown

    def numeric(self, column, text):
        """float32 values (role num) or int32 bucket ids of a numeric column's texts
        (zoo.datasets.transforms.numeric; values filled or clipped counted as repaired)."""
        import tensorflow as tf

        values, repaired = numeric.graph_encoded(self.states[column], text)
        self.repaired.append(tf.reduce_sum(tf.reshape(repaired, (tf.shape(text)[0], -1)), axis=1))
        return values

    def statistics(self, key, group, names, inputs, by_column, features):
        """{feature key: int32 bucket ids} of a key's running statistics (zoo.datasets.transforms.statistics): the user's
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
            rows, positives = statistics.graph_table_counts(state, self.tables[statistics_state(key)], text)
        prior_rows = float(spec.statistics["prior_rows"])
        values = [rows, positives, statistics.smoothed_rate(positives, rows, prior, prior_rows)]  # (the same arithmetic)
        return {f"{group}_{name}": ids for name, ids in zip(names, statistics.graph_bucketed(values, state))}

    def _history(self, fields, times, request_time):
        """{hist key: [B, L]} from [B, H] texts: entries before the request's time, ordered by time (stable),
        the newest L, left-padded; and int32 [B] count of entries cut."""
        import tensorflow as tf

        L = self.schema.sequence_length
        first = next(iter(fields.values()))[1]
        present = tf.not_equal(first, "")
        if times is not None:
            seconds, valid_time = time_reading.parse_times(times, self.spec.time["format"])
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
                ids = label_rules.feedback_ids(text, self.spec.label)
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
            request_time, valid = time_reading.parse_times(inputs[name], spec.time["format"])
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
                features[f"ctx_{name}"] = tf.cast(time_reading.derived(name, local), tf.int32)
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

        _, entries = time_reading.parse_times(times, self.spec.time["format"])  # (an entry of unreadable time is cut anyway)
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
