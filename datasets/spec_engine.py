"""The data-spec engine: a `DataSpec` and its files -> a processed data set in the input contract.

One read of the files (pyarrow, chunk by chunk: `spec_reading`) gives compact columns (text columns stay
Arrow strings); then everything is vectorised: rows are sorted by (user, time, file order) when the
history comes from the log or the split is per user, split, fitted on the training rows only
(vocabularies, hashing, numeric fills, scales and buckets), encoded, and written as a `storage.Table`
(one row per sample; histories from list columns) or a `storage.Events` store (histories gathered at
batch time from the user's strictly earlier rows: nothing at or after a row's time reaches its features).

The fit is kept as `preprocessing.json` (zoo.datasets.fitted) with the spec inside, so a preset carries
its whole data contract: `build(..., fitted=state)` applies it to new rows (scoring mode: every row is a
sample of the split "all", unknown values go to the OOV id and are counted, no negative is sampled,
every row is scored whatever `history.min_length` says; a file without the label column scores with
labels 0 and `info["labeled"] = False`).

A fit first judges the spec's feature columns on the first rows of the first file (`check_leaks`): a
column that reveals the label there (equal to it, agreeing with it, present on one class only, or ranking
it alone at AUC 0.99 or more: zoo.datasets.spec_draft.label_evidence) is refused in one line naming it and
the evidence, unless its options say "known_before_label": true.

Every row read is kept, repaired (a filled numeric, a history list cut to its newest L) or dropped (an
empty label, an unreadable time with on_error "drop", fewer than min_length earlier rows): the account
of each file is printed and stored in the info (`accounting`), read = kept + repaired + dropped.

This build holds every kept row's columns (one read; memory grows with the files). Files together larger
than `stream_bytes()` (ZOO_STREAM_BYTES, default 1 GiB) are built by `spec_streaming` instead, one batch
of rows at a time (the same data set; memory bounded by the distinct values and one batch or user
partition), under a process group too.
"""

import os

import numpy as np

from zoo.datasets import events, preprocess, storage
from zoo.datasets import fitted as fitted_state
from zoo.datasets import spec_reading
from zoo.datasets.transforms import labels as label_rules
from zoo.datasets.transforms import numeric, statistics, tags, vocabulary
from zoo.datasets.transforms import times as time_reading
from zoo.datasets.transforms.fit import Fit
from zoo.datasets.reading import HISTORY_ONLY, Repairs
from zoo.datasets.process_group import ProcessGroup
from zoo.datasets.spec import BUDGET, DataSpec, statistics_state
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import NUMERIC_LIMIT, Schema

DERIVED_SIZES = {"hour": 26, "weekday": 9}  # ids 1..24 / 1..7, then OOV
TIME_BITS = 34  # (time - earliest) < 2**34 s (544 years) beside the user code in one sortable int64 key


def stream_bytes():
    """Files larger than this together (bytes; ZOO_STREAM_BYTES, default 1 GiB) are built streaming
    (zoo.datasets.spec_streaming): memory bounded by the distinct values, not the rows."""
    return int(os.environ.get("ZOO_STREAM_BYTES", 2**30))


def build(spec, files, out_dir, verbose="auto", fitted=None, origin=("spec", "spec", {}), group=None, stream=None,
          context_files=0, grow_from=None):
    """Reads `files` under `spec` (a DataSpec, dict or file), fits (or applies `fitted`) and writes the
    processed data set into `out_dir`; returns its info. `origin`: (data set, protocol, options) recorded in
    the fitted state (a paper reader that builds through the engine names itself there).

    `stream`: build one batch of rows at a time (`spec_streaming`: the same data set, in two or three reads
    of the files) instead of holding every row (one read); None: streaming when the files together (over
    the processes of `group`) exceed `stream_bytes()`.

    `group` (a zoo.datasets.ProcessGroup of several processes): this process reads only its shards of
    `files` (`group.shards`) and writes only their samples, under the fit made over every process's
    training rows (the same preprocessing.json on each). Every process's samples together are the
    single-process build's, but for sampled negatives (each process draws its own stream).

    `context_files` (scoring mode, or a fit continued from `grow_from`): the first that many of `files` are
    earlier logs read for histories and running statistics only (`--history-from`): their rows make no
    sample (counted), so each row's features are those of the concatenated log, restricted to the rows of
    the other files. A continued fit splits those rows alone (by time or date) and fits on them alone; the
    counts per key of its statistics add the new rows to the preset's (whose fit counted the earlier logs).

    `grow_from` (a preset's fitted state, fitting mode: training from a preset, zoo.recipes.warm_start): the
    fit continues that state instead of starting afresh (`continued`): each vocabulary keeps its tokens and
    ids and appends the values of the new training rows seen at least min_count times (up to max_size in
    all); numeric fills, scales and bucket edges, and the running statistics' prior and bucket edges, are
    the preset's, so every id means what it meant to the preset's model; the counts per key of the running
    statistics add to the preset's."""
    if grow_from is not None and fitted is not None:
        raise ZooError("a build either applies a fitted state (scoring) or continues one (grow_from), not both")
    spec = DataSpec.read(spec if fitted is None and grow_from is None else (fitted or grow_from)["spec"])
    group = group or ProcessGroup()
    from zoo.datasets import spec_streaming

    if stream is None:  # (every process of a group decides alike: a process's share of all the files)
        stream = sum(os.path.getsize(path) for path in files) / group.size > stream_bytes()
    if spec.statistics is not None and (stream or group.size > 1):
        raise ZooError("spec 'statistics': running statistics are built in memory by one process; these files "
                       f"exceed ZOO_STREAM_BYTES ({stream_bytes():,} bytes) or run under a process group: raise "
                       "ZOO_STREAM_BYTES or leave 'statistics' out" if stream else
                       "spec 'statistics': running statistics are built in memory by one process, not a process group")
    if context_files and ((fitted is None and grow_from is None) or stream or group.size > 1):
        raise ZooError("history-only files (--history-from) go with a fitted preprocessing or a continued fit, built in "
                       "memory by one process" + (f" (these files exceed ZOO_STREAM_BYTES, {stream_bytes():,} bytes)"
                                                 if stream and (fitted or grow_from) else ""))
    if context_files and grow_from is not None and spec.split["by"] not in ("time", "date"):
        raise ZooError(f"history-only files (--history-from) in a continued fit go with a split by time or date, not "
                       f"by {spec.split['by']}")
    if fitted is None:  # (every process judges the first file alike, before any read of the whole files)
        check_leaks(spec, files)
    if stream:
        return spec_streaming.build(spec, files, out_dir, verbose, fitted, origin, group, grow_from)
    files, numbers = shards(group, files, fitted)

    def read():
        data, accounts = _read(spec, files, scoring=fitted is not None, context_files=context_files)
        if not data["label"].shape[0]:
            raise no_row_left(files, accounts)
        return data, accounts

    data, accounts = agreed(group, read)
    maker = _Build(spec, data, accounts, out_dir, fitted, verbose, origin, group, numbers, grow_from)
    maker.context_files = context_files
    if context_files:
        maker.drop_repeated_history()
    return maker.run()


def no_row_left(files, accounts):
    """The error of a read that kept no row (the first file's account says why)."""
    return ZooError(f"{files[0]}: no row is left ({next(iter(accounts.values())).summary()})")


def check_training_rows(spec, files, rows, positives):
    """Refuses a fit without training rows, or whose `rows` training rows hold `positives` positives of one
    class only (a label rule that matches no row, or every row): one line naming the rule and the label
    values at the start of the first file."""
    if not rows:
        raise ZooError("the split leaves no training row: check 'split' against the data's times")
    if spec.label.get("events") or 0 < positives < rows:
        return
    column = spec.label["column"]
    chunk = next(spec_reading.read_chunks(files[0], spec.source, [column], Repairs(files[0])))
    seen = label_rules.seen_values(spec_reading.as_text(chunk.columns[column]).to_numpy(zero_copy_only=False))
    one = "no negative" if positives else "no positive"
    raise ZooError(f"label {label_rules.rule_text(spec.label)} leaves {one} among the {rows:,} training rows, so "
                   f"there is nothing to learn (values of {column} at the start of {files[0]}: {seen}): check the "
                   "label rule's values")


LEAK_SAMPLE_ROWS = 10_000  # the rows of the first file a fit judges its feature columns on


def label_sample(spec, files, judged):
    """(float labels [n] 0/1, NaN where a row has none; the label column's texts [n]; {column: (texts [n],
    kind)}) of the first LEAK_SAMPLE_ROWS rows of the first file, for the columns of `judged` it holds (kind:
    "numeric", "categorical" or "tags", as spec_draft.label_evidence reads them); None without a label
    column (events) or a row, or when the file lacks the label column (the build refuses that itself)."""
    column = spec.label.get("column")
    if column is None:
        return None
    if spec.source["format"] != "jsonl":  # (a JSON row may lack a key other rows hold: read as nulls)
        have = set(spec_reading.file_columns(files[0], spec.source))
        judged = [name for name in judged if name in have]
        if column not in have:
            return None
    repairs = Repairs(files[0])
    chunk = spec_reading.first_rows(files[0], spec.source, list(dict.fromkeys([column] + judged)), LEAK_SAMPLE_ROWS,
                                    repairs)
    if chunk is None:
        return None
    labels, kept = label_rules.read(chunk, spec.label, repairs)

    def texts(name):
        options = spec.columns[name]
        if options["type"] == "tags":  # (Parquet and JSON lists too): the row's values, joined
            tokens, lengths = spec_reading.token_lists(chunk, name, options["separator"])
            return np.asarray(["|".join(row) for row in np.split(tokens, np.cumsum(lengths)[:-1])], dtype=object)
        return np.asarray(spec_reading.as_text(chunk.columns[name]).to_numpy(zero_copy_only=False), dtype=object)

    label_text = np.asarray(spec_reading.as_text(chunk.columns[column]).to_numpy(zero_copy_only=False), dtype=object)
    return (np.where(kept, labels, np.nan).astype(np.float64), label_text,
            {name: (texts(name), spec.columns[name]["type"]) for name in judged})


def feature_columns(spec):
    """The columns whose values are a row's own features, judged for leaks: not the keys (user, item: an id
    separates its own rows trivially), the time, nor a history (hist: earlier rows)."""
    keys = {spec.user, spec.item, spec.time and spec.time["column"]}
    return [name for name, options in spec.columns.items() if name not in keys and options["role"] != "hist"]


def check_leaks(spec, files):
    """Refuses, in one line naming the column and the evidence, a feature column (`feature_columns`) that
    reveals the label on the first LEAK_SAMPLE_ROWS rows of the first file (zoo.datasets.spec_draft's
    `label_evidence`: equal to it, agreeing with it, present on one class only, or ranking it alone at AUC
    0.99 or more): the model would read the label it predicts. A column marked "known_before_label": true
    (a deliberate case) is not judged, nor the label's own column (its "allow_label_column")."""
    from zoo.datasets.spec_draft import label_evidence

    label = spec.label.get("column")
    judged = [name for name in feature_columns(spec)
              if name != label and not spec.columns[name].get("known_before_label")]
    sample = label_sample(spec, files, judged)
    if sample is None:
        return
    labels, label_text, columns = sample
    for name, (values, kind) in columns.items():
        evidence = label_evidence(values, kind, spec.label, label_text, labels)
        if evidence is not None:
            raise ZooError(f"column '{name}' reveals the label: {evidence}, on the first {labels.size:,} rows of "
                           f"{files[0]}; a feature must be known before the label: remove it from 'columns', or mark "
                           "it \"known_before_label\": true if it is")


def likely_leak(spec, files):
    """(column, AUC, rows judged) of the feature column (`feature_columns`, those marked known_before_label
    included) that alone ranks the labels of the first LEAK_SAMPLE_ROWS rows of the first file best
    (spec_draft's `single_auc`), or None: where a model too good to be true most likely reads its label."""
    from zoo.datasets.spec_draft import single_auc

    sample = label_sample(spec, files, feature_columns(spec))
    if sample is None:
        return None
    labels, _, columns = sample
    known = ~np.isnan(labels)
    scored = [(name, single_auc(values[known], kind, labels[known]), int(known.sum()))
              for name, (values, kind) in columns.items()]
    scored = [found for found in scored if found[1] is not None]
    return max(scored, key=lambda found: found[1]) if scored else None


def shards(group, files, fitted=None):
    """(this process's files, their indices among all files): every file for one process."""
    numbers = np.arange(len(files))
    if group.size > 1:
        if fitted is not None:
            raise ZooError("scoring with a fitted preprocessing reads the files in one process (no process group)")
        numbers = numbers[group.rank :: group.size]
        files = group.shards(files)
    return files, numbers


def agreed(group, work):
    """work()'s result once every process of `group` has done its own: a ZooError in one process is raised
    in every process (its own message there, "process k of N failed: ..." in the others), so that no
    process waits forever in a collective for a process that stopped on a bad shard."""
    if group.size == 1:
        return work()
    try:
        result, failure = work(), None
    except ZooError as error:
        result, failure = None, str(error)
    failures = group.allgather(failure)
    failed = next((rank for rank, message in enumerate(failures) if message), None)
    if failed is not None:
        raise ZooError(failures[failed] if failed == group.rank
                       else f"process {failed} of {group.size} failed: {failures[failed]}")
    return result


# ---------------------------------------------------------------------------------------- reading
KEYS = ("label", "time", "line", "file", "rule")  # the per-row parts beside the columns


def tie_keys(spec, data):
    """Sort keys (np.lexsort's order: the last is the first compared) that order a user's rows of one time by
    what their history entries carry: the history fields' values (the first field first: the item), then
    the label. Sorted by (user, time, these, file order), a history's window of the newest L and its order
    do not depend on the file's row order (rows of equal content keep it, and are equal entries). The
    in-memory build, the streaming build's partitions and `python -m zoo request` sort by them; [] where
    the spec has no history from the log."""
    if not spec.history_from_log():
        return []
    columns = {o["feature"]: c for c, o in spec.columns.items() if o["role"] in ("cand", "hist")}
    keys = [np.nan_to_num(np.asarray(data["label"], np.float64), nan=-1.0)]
    for field in reversed(spec.history["fields"]):
        column = columns.get(field)
        if column in data["text"]:
            keys.append(_text_rank(data["text"][column]))
        elif column in data.get("numeric", {}):
            keys.append(np.nan_to_num(np.asarray(data["numeric"][column], np.float64), nan=-np.inf))
    return keys


def _text_rank(values):
    """Each value's rank among the distinct values in text order (-1 for a null): a sort key of texts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(np.asarray(values, dtype=object).tolist(), type=pa.string())
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        values = pc.cast(values, pa.string())  # (rows given in memory may hold integer ids: ranked as texts too)
    encoded = pc.dictionary_encode(values)
    size = len(encoded.dictionary)
    rank = np.empty(size + 1, np.int64)
    rank[np.asarray(pc.array_sort_indices(encoded.dictionary))] = np.arange(size)
    rank[size] = -1
    return rank[np.asarray(encoded.indices.fill_null(size))]


def _file_parts(spec, index, path, scoring, repairs, only=None, block_bytes=None, label_text=False, history=False):
    """Yields one part per chunk of the file `index` (`path`): {"label", "time", "line", "file", "rule":
    [kept rows] (None when the spec has none), "text"/"numeric"/"list": {column: values}, "labeled"}.
    `only` (column names) reads just those columns, and the label's and the time's (which rows are kept);
    `block_bytes`: spec_reading.read_chunks'; `label_text`: the label column's text is kept too (as the
    file writes it: a raw request's history feedback); `history`: an earlier log read for histories only,
    whose label column is required where the histories or running statistics read labels."""
    import pyarrow as pa

    label_column = spec.label.get("column")
    optional = (label_column,) if scoring and label_column else ()
    if only is not None:
        only = set(only) | {name for name in (label_column, spec.time and spec.time["column"]) if name}
    wanted = spec.read_columns() if only is None else [name for name in spec.read_columns() if name in only]
    if not wanted:  # rows counted without a column of the spec's: the file's first, as text (none: every one)
        wanted = spec_reading.file_columns(path, spec.source)[:1]
    positional = {name: count for name, count in spec.positions().items() if only is None or name in only}
    present, expanded = spec_reading.check_columns(path, spec.source, wanted, optional, positional, label_column)
    present = present + [column for columns in expanded.values() for column in columns]
    labeled = label_column is None or label_column in present
    if history and not labeled and spec.earlier_labels_read():
        raise ZooError(f"{path}: an earlier log for histories needs the label column '{label_column}' (the "
                       f"preset's {'histories carry' if spec.feedback() else 'running statistics count'} each "
                       "earlier row's label)")
    for chunk in spec_reading.read_chunks(path, spec.source, present, repairs, block_bytes):
        if not labeled:
            label, keep = np.zeros(chunk.rows, np.float32), np.ones(chunk.rows, bool)
        else:
            label, keep = label_rules.read(chunk, spec.label, repairs)
        part = {key: None for key in KEYS}
        if spec.time is not None:
            time, kept_time = time_reading.read(chunk, spec.time, repairs, keep)
            keep &= kept_time
            part["time"] = time[keep]
        part.update(label=label[keep], line=chunk.lines()[keep], file=np.full(int(keep.sum()), index, np.int32),
                    labeled=labeled, text={}, numeric={}, list={})
        if only is None and spec.history_from_log() and spec.history["only"] is not None:
            part["rule"] = label_rules.rule_holds(chunk, spec.history["only"])[keep]
        kept_all = bool(keep.all())
        rows = None if kept_all else pa.array(np.flatnonzero(keep))
        for name in {spec.user, spec.item, label_column if label_text and labeled else None} | set(spec.columns):
            if name is None or only is not None and name not in only:
                continue
            kind = spec.columns.get(name, {}).get("type", "categorical")
            if kind == "numeric":
                part["numeric"][name] = spec_reading.as_numbers(chunk, name)[keep]
            elif kind == "list" and name in expanded:  # per-position columns
                tokens, lengths = spec_reading.position_lists(chunk, expanded[name], spec.columns[name]["padding"])
                row_of = np.repeat(np.arange(chunk.rows), lengths)
                part["list"][name] = (tokens[keep[row_of]], lengths[keep])
            elif kind in ("list", "tags"):
                tokens, lengths = spec_reading.token_lists(chunk, name, spec.columns[name]["separator"])
                row_of = np.repeat(np.arange(chunk.rows), lengths)
                part["list"][name] = (tokens[keep[row_of]], lengths[keep])
            else:
                text = spec_reading.as_text(chunk.columns[name])
                part["text"][name] = text if kept_all else text.take(rows)
        yield part
    if not repairs.read:
        if spec.source.get("header"):
            raise ZooError(f"{path}: the file holds only its header line, no data rows")
        raise ZooError(f"{path}: the file holds only blank lines, no data rows" if repairs.blank_lines
                       else f"{path}: the file is empty")


def _join(parts):
    """One data dict (as `_file_parts` yields) of several parts' rows, in order."""
    import pyarrow as pa

    data = {key: np.concatenate([part[key] for part in parts]) if parts and parts[0][key] is not None else None
            for key in KEYS}
    data["labeled"] = all(part["labeled"] for part in parts)
    first = parts[0] if parts else {"text": {}, "numeric": {}, "list": {}}
    names = list(dict.fromkeys(name for part in parts for name in part["text"]))  # (a label's text: labelled files)
    data["text"] = {name: pa.chunked_array([part["text"][name] if name in part["text"] else
                                            pa.nulls(len(part["line"]), pa.string()) for part in parts], pa.string())
                    for name in names}
    data["numeric"] = {name: np.concatenate([part["numeric"][name] for part in parts]) for name in first["numeric"]}
    data["list"] = {name: tuple(np.concatenate([part["list"][name][i] for part in parts]) for i in (0, 1))
                    for name in first["list"]}
    return data


def _read(spec, files, scoring, label_text=False, context_files=0):
    """({column or part: concatenated array}, {file: Repairs}) of every kept row, in file order. The files
    (shards) are read in parallel threads (pyarrow parses without the GIL), and joined in name order. The
    first `context_files` are earlier logs read for histories only."""
    import concurrent.futures

    def read_file(index, path):
        repairs = Repairs(path)
        return list(_file_parts(spec, index, path, scoring, repairs, label_text=label_text,
                                history=index < context_files)), repairs

    workers = max(1, min(len(files), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(read_file, range(len(files)), files))  # the first error (in file order) is raised
    accounts = {path: repairs for path, (_, repairs) in zip(files, results)}
    return _join([part for parts, _ in results for part in parts]), accounts


# ---------------------------------------------------------------------------------------- building
class _Build:
    def __init__(self, spec, data, accounts, out_dir, fitted, verbose, origin, group, file_numbers, grow_from=None):
        self.spec, self.data, self.accounts, self.out_dir = spec, data, accounts, out_dir
        self.group, self.file_numbers = group, file_numbers  # the process group; each file's index in all files
        self.sharded = group.size > 1
        self.origin = origin
        self.fitted, self.verbose = fitted, verbose
        self.kinds = {}  # repair kind -> (rank, rows per file index)
        self.states = {} if fitted is None else dict(fitted["fitted"])
        self.base = {} if grow_from is None else continued(grow_from)  # the preset's states a fit continues
        self.drift = {}  # (a continued fit: how far the new rows' numerics moved from the preset's kept states)
        self.unknown, self._unknown_values, self._unknown_files = {}, {}, {}  # (OOV: totals, values, per file)
        self.labeled = True
        self.rngs, self.last_seen = {}, None  # sampled negatives: a stream per split; (streaming) attributes
        self.context_files, self.context_rows = 0, None  # history-only files (scoring mode); their rows per file
        self.user_code = None
        if data is not None:
            self.load(data)

    def load(self, data):
        """Takes `data` (all rows, or the streaming build's next batch) as the rows to build."""
        self.data, self.rows, self._index = data, data["label"].shape[0], None
        self.labeled = self.labeled and bool(data["labeled"])  # every batch's file has labels
        self.repaired = np.zeros(self.rows, bool)

    def count(self, kind, mask, rank):
        """Counts the kept rows of `mask` repaired by `kind` (a row counts once among the repaired)."""
        per_file = np.bincount(self.data["file"][mask], minlength=len(self.accounts))
        self.kinds[kind] = (rank, self.kinds[kind][1] + per_file if kind in self.kinds else per_file)
        self.repaired |= mask

    # ------------------------------------------------------------------ the steps
    def run(self):
        self._order()
        split = self._split()
        train = split == 0
        if self.fitted is None:
            rows, positives = self.group.sum(np.array([train.sum(), self.data["label"][train].sum()], np.int64))
            check_training_rows(self.spec, list(self.accounts), int(rows), int(positives))
            fit = Fit(self.spec).add(self.data, train)
            self.states, self.drift = fit.states(self.group, self.base), fit.drift
        encoded = self._encode()
        samples, events_store, dropped = self._samples(split, encoded, train)
        schema = self._schema()
        info = self._finish(dropped, *self._per_file())
        if events_store is None:
            storage.write_table(self.out_dir, schema, samples, info)
        else:
            events.write_events(self.out_dir, schema, events_store, samples, info)
        self.save_fit(schema, info)
        return info

    def save_fit(self, schema, info):
        """Writes preprocessing.json (the spec and the fitted state) beside the processed data (not in scoring
        mode)."""
        if self.fitted is None:
            state = {
                "format": fitted_state.FORMAT, "version": fitted_state.VERSION, "dataset": self.origin[0],
                "protocol": self.origin[1], "options": dict(self.origin[2]), "schema": schema.to_dict(),
                "fitted": self.states,
                "info": {"sample_rate": info["sample_rate"]}, "spec": self.spec.to_dict(),
            }
            fitted_state.save_preprocessing(state, self.out_dir)

    def _order(self):
        """Sorts the rows by (user, time, tie_keys, file order) when histories or splits need it."""
        spec, data = self.spec, self.data
        self.user_code = None
        if spec.user is not None:
            users = data["text"][spec.user]
            if self.sharded and self._by_user():  # (ranks among every process's users)
                import pyarrow as pa
                import pyarrow.compute as pc

                encoded = pc.dictionary_encode(users.combine_chunks() if isinstance(users, pa.ChunkedArray) else users)
                self.user_code = self._global_user_ranks(encoded.dictionary)[np.asarray(encoded.indices)]
            else:
                self.user_code = _text_rank(users)
        if self._by_user():
            order = np.lexsort((np.arange(self.rows), *tie_keys(spec, data), data["time"] if data["time"] is not None
                                else np.zeros(self.rows, np.int64), self.user_code))
            self._take(order)

    def _by_user(self):
        """Whether the rows are sorted by (user, time, what a history entry carries, file order): a history from
        the log, a per-user split (tie_keys)."""
        return self.spec.history_from_log() or self.spec.split["by"] == "user"

    def _global_user_ranks(self, dictionary):
        ranks, self.num_users = global_user_ranks(self.group, dictionary)
        return ranks

    def _global_index(self):
        """Each row's position [n] in the single-process order of every process's rows together: file order,
        or (user, time, file order) when sorted by user (each user's rows then all in this process)."""
        if self._index is not None:
            return self._index
        rows = np.arange(self.rows)
        if not self.sharded:
            self._index = rows
        elif self._by_user():
            codes, starts, counts = np.unique(self.user_code, return_index=True, return_counts=True)
            totals = np.zeros(self.num_users, np.int64)
            for their_codes, their_counts in self.group.allgather((codes, counts)):
                totals[their_codes] += their_counts
            before = np.cumsum(totals) - totals
            self._index = before[self.user_code] + rows - np.repeat(starts, counts)
        else:
            per_file = np.bincount(self.data["file"], minlength=len(self.accounts))
            gathered = self.group.allgather((self.file_numbers, per_file))
            totals = np.zeros(sum(numbers.size for numbers, _ in gathered), np.int64)
            for numbers, counts in gathered:
                totals[numbers] = counts
            offset = (np.cumsum(totals) - totals)[self.file_numbers]
            local_start = np.cumsum(per_file) - per_file
            self._index = offset[self.data["file"]] + rows - local_start[self.data["file"]]
        return self._index

    def _take(self, order):
        import pyarrow as pa

        data = self.data
        indices = pa.array(order)
        for key in ("label", "time", "line", "file", "rule"):
            if data[key] is not None:
                data[key] = data[key][order]
        data["text"] = {name: values.take(indices) for name, values in data["text"].items()}
        data["numeric"] = {name: values[order] for name, values in data["numeric"].items()}
        for name, (tokens, lengths) in data["list"].items():
            starts = np.cumsum(lengths) - lengths
            moved = lengths[order]
            within = np.arange(moved.sum()) - np.repeat(np.cumsum(moved) - moved, moved)
            data["list"][name] = (tokens[np.repeat(starts[order], moved) + within], moved)
        self.user_code = None if self.user_code is None else self.user_code[order]

    def drop_repeated_history(self):
        """Drops each row of the earlier logs (history only) that repeats a row of the files scored, or an
        earlier history row, in every column read (a log given with the rows it is asked to score, or twice):
        each event then counts once in the histories and running statistics. Counted in each file's account."""
        import pyarrow as pa
        import pyarrow.compute as pc

        data = self.data
        time = np.zeros(self.rows, np.int64) if data["time"] is None else data["time"]
        columns = [data["label"].astype(np.int64), time]
        columns += [key_hashes(pc.fill_null(values, "")) for values in data["text"].values()]
        columns += [np.nan_to_num(values.astype(np.float64), nan=np.inf).view(np.int64)
                    for values in data["numeric"].values()]
        for tokens, lengths in data["list"].values():  # a list: its length and a position-weighted sum of hashes
            starts = np.cumsum(lengths) - lengths
            rows = np.repeat(np.arange(lengths.size), lengths)
            hashes = key_hashes(pa.array(tokens, pa.string()))
            summed = np.zeros(lengths.size, np.int64)
            np.add.at(summed, rows, hashes * (np.arange(hashes.size) - starts[rows] + 1))
            columns += [lengths.astype(np.int64), summed]
        _, first, group = np.unique(np.stack(columns, axis=1), axis=0, return_index=True, return_inverse=True)
        group = group.reshape(-1)
        history = data["file"] < self.context_files
        scored = np.zeros(first.size, bool)
        scored[group[~history]] = True
        repeated = history & (scored[group] | (first[group] != np.arange(group.size)))
        if not repeated.any():
            return
        for index, count in enumerate(np.bincount(data["file"][repeated], minlength=self.context_files)):
            list(self.accounts.values())[index].drop(
                "dropped {n} history row(s) that repeat a row scored or an earlier history row (counted once)",
                int(count))
        self._take(np.flatnonzero(~repeated))
        self.load(self.data)

    def _split(self):
        """Split codes [n] (0 train, 1 validation, 2 test; all 0 in scoring mode). Over every process's rows
        (one process: its own): each row gets the code the single-process build gives it."""
        split, n = self.spec.split, self.rows
        if self.fitted is not None:
            return np.zeros(n, np.int8)
        earlier = self.data["file"] < self.context_files  # (a continued fit's history-only rows: code 3)
        if split["by"] == "date":
            import datetime

            cut = [int(datetime.datetime.strptime(split[k], "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc)
                       .timestamp()) for k in ("validation", "test")]
            return np.where(earlier, 3, preprocess.split_by_time(self.data["time"], cut)).astype(np.int8)
        fractions, group = split["fractions"], self.group
        if split["by"] == "user":  # each user's rows are all here
            return preprocess.per_user_split(self.user_code, fractions)
        if split["by"] == "held_out_users":  # (a user's draw is its own: the same in any process or chunk)
            return preprocess.held_out_users_split(self.data["text"][self.spec.user], fractions, split["seed"])
        n = int(group.sum(self.rows - earlier.sum()))
        if split["by"] == "time":
            ordered = np.sort(self.data["time"][~earlier])
            cut = time_cut(n, fractions, lambda positions: group.order_statistics(ordered, positions))
            return np.where(earlier, 3, preprocess.split_by_time(self.data["time"], cut)).astype(np.int8)
        index = self._global_index()
        if split["by"] == "random":  # the single process's draws for all n rows, then this process's
            return np.random.default_rng(split["seed"]).choice(3, size=n, p=fractions).astype(np.int8)[index]
        return order_split(index, n, fractions)

    # ------------------------------------------------------------------ fitting and encoding
    def _encode(self):
        """{column: ids [n] int32 or values [n] float32}, and for list columns (tokens ids, lengths), under the
        fitted states (zoo.datasets.transforms)."""
        out = {}
        columns = self.spec.columns
        keep_text = {self.spec.user, self.spec.item} - {None} | set(
            key for key in (self.spec.statistics["keys"] if self.spec.statistics else []) if isinstance(key, str))
        for name, options in columns.items():
            if options["type"] == "categorical":
                out[name] = self._lookup(name, self.states[name], self.data["text"][name])
                if name not in keep_text:
                    del self.data["text"][name]  # encoded: its text is not needed again (memory)
            elif options["type"] == "numeric" and options.get("bars"):
                out[name] = self._lookup(name, self.states[name], numeric.bars_tokens(self.data["numeric"][name]))
            elif options["type"] == "numeric":
                out[name] = self._numeric(name, options, self.data["numeric"][name])
            elif options["type"] == "tags":
                out[name] = self._tags(name, options, *self.data["list"][name])
        for name, options in columns.items():
            if options["type"] == "list":
                tokens, lengths = self.data["list"][name]
                state = self.states[name]
                table = self.states[state["column"]] if state["kind"] == "shared" else state
                out[name] = (self._lookup(name, table, tokens, tags.token_positions(lengths)[0]), lengths)
        return out

    def _tags(self, name, options, tokens, lengths):
        """ids [n, S] of a tags column (zoo.datasets.transforms.tags; more than S values: cut, counted)."""
        size = options["max_tags"]
        ids, longer = tags.ids(lambda kept, rows: self._lookup(name, self.states[name], kept, rows), tokens, lengths,
                               size)
        if longer.any():
            self.count(f"kept the first {size} of {{n}} '{name}' tag list(s) longer than {size}", longer,
                       (1, list(self.spec.columns).index(name)))
        return ids

    def _lookup(self, name, state, values, row_of=None):
        """ids [n] int32 of raw values under a fitted state (OOV counted in scoring mode, per file: `row_of`, the
        row of each value of a list or tags column; None: one value per row)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
        ids = vocabulary.ids(state, array)
        if self.fitted is not None and state["kind"] == "vocabulary":  # counted over every batch of a streaming build
            unknown = ids == vocabulary.oov_id(state)
            seen = pc.unique(pc.filter(array, pa.array(unknown)))
            if name in self._unknown_values:
                seen = pc.unique(pa.concat_arrays([self._unknown_values[name], seen.cast(pa.string())]))
            self._unknown_values[name] = seen.cast(pa.string())
            rows = int(unknown.sum()) + self.unknown.get(name, {}).get("rows", 0)
            self.unknown[name] = {"rows": rows, "values": len(seen)}
            files = self.data["file"] if row_of is None else self.data["file"][row_of]
            self._unknown_files[name] = self._unknown_files.get(name, 0) + np.bincount(
                files[unknown], minlength=len(self.accounts))
        return ids

    def _numeric(self, name, options, values):
        """A numeric column's values or bucket ids (zoo.datasets.transforms.numeric; fills and clips counted)."""
        values, missing, beyond = numeric.encoded(self.states[name], numeric.transformed(options, values))
        column = list(self.spec.columns).index(name)
        if missing.any():
            self.count(f"filled {{n}} missing '{name}' value(s) with "
                       + ("the training mean" if options["fill"] == "mean" else repr(options["fill"])), missing,
                       (0, column))
        if beyond.any():  # the contract's bound (Schema.validate); the raw graph clips alike
            self.count(f"clipped {{n}} '{name}' value(s) to +-{NUMERIC_LIMIT:.0e} (numeric features lie within it)",
                       beyond, (0, column))
        return values

    # ------------------------------------------------------------------ samples
    def _features(self, encoded):
        """{contract key: [n] array} of the row-level features (user_, cand_, ctx_, num_, derived ctx_)."""
        features = {}
        for name, options in self.spec.columns.items():
            if options["role"] in ("user", "cand", "ctx", "num"):
                features[f"{options['role']}_{options['feature']}"] = encoded[name]
        if self.spec.time is not None:
            local = self.data["time"] + int(self.spec.time["utc_offset_hours"] * 3600)
            for name in self.spec.time["derive"]:
                features[f"ctx_{name}"] = time_reading.derived(name, local).astype(np.int32)
        return features

    def _samples(self, split, encoded, train):
        spec, data = self.spec, self.data
        features = self._features(encoded)
        keep = np.ones(self.rows, bool)
        store = None
        start = end = None
        if spec.history_from_log():
            store, start, end = self._log_history(encoded)
            if self.fitted is None and spec.history["min_length"]:
                keep = (end - start) >= spec.history["min_length"]
            features.update(start=start, end=end, user=self.user_code, cand_time=data["time"])
        elif spec.history is not None:
            features.update(self._list_history(encoded))
        features.update(self._statistics(store, start, end, train, features))
        features["labels"] = data["label"]
        features["line"] = data["line"]
        features.update(self._raw_keys())
        dropped = np.bincount(data["file"][~keep], minlength=len(self.accounts))
        if self.context_files:  # rows of history-only files: features of later rows, no sample of their own
            context = keep & (data["file"] < self.context_files)
            self.context_rows = np.bincount(data["file"][context], minlength=len(self.accounts))
            keep &= ~context
        self.repaired &= keep  # a repaired row that makes no sample counts as dropped only
        names = ("all",) if self.fitted is not None else storage.SPLITS
        samples = {}
        for code, name in enumerate(names):
            rows = np.flatnonzero((split == code) & keep)
            samples[name] = {key: values[rows] for key, values in features.items()}
            if self.fitted is None and spec.label.get("events") and spec.label["negatives"]:
                samples[name] = self._with_negatives(samples[name], encoded, train, code)
        return samples, store, dropped

    def _log_history(self, encoded):
        """(events {hist key: [E]}, start [n], end [n]): a row's history is events[start:end], its user's
        rows (those matching history.only) strictly earlier in time."""
        spec, data = self.spec, self.data
        is_event = data["rule"] if spec.history["only"] is not None else np.ones(self.rows, bool)
        event_rows = np.flatnonzero(is_event)
        columns = {o["feature"]: n for n, o in spec.columns.items() if o["role"] in ("cand", "hist")}
        store = {f"hist_{field}": encoded[columns[field]][event_rows] for field in spec.history["fields"]}
        store["hist_time"] = data["time"][event_rows]
        if spec.feedback():  # 1 negative, 2 positive; 3 unknown (a scored file without labels)
            feedback = (1 + data["label"]).astype(np.int32) if self.labeled else np.full(self.rows, 3, np.int32)
            store["hist_feedback"] = feedback[event_rows]
        earliest = int(data["time"].min())
        if int(data["time"].max()) - earliest >= 2**TIME_BITS or self.user_code.max() >= 2 ** (62 - TIME_BITS):
            raise ZooError("the log spans more than 544 years or 2**28 users: too large for one sort key")
        key = (self.user_code << TIME_BITS) | (data["time"] - earliest)
        event_key = key[event_rows]
        start = np.searchsorted(event_key, self.user_code << TIME_BITS, side="left")
        end = np.searchsorted(event_key, key, side="left")  # strictly earlier: same-time events excluded
        return store, start.astype(np.int64), end.astype(np.int64)

    def _raw_keys(self):
        """{"raw_user", "raw_item": [n] int64}: a stable 64-bit hash of each row's user and item as the file
        writes them (the same in every read, unlike the fitted ids that map every unseen key to OOV), kept
        beside the samples for the baselines (zoo.recipes.baselines)."""
        out = {}
        for name, column in (("raw_user", self.spec.user), ("raw_item", self.spec.item)):
            text = self.data["text"].get(column) if column else None
            if text is not None:
                out[name] = key_hashes(text)
        return out

    def _statistics(self, store, start, end, train, features):
        """{num key: [n] float32} of the spec's running statistics (zoo.datasets.transforms.statistics): the user's from
        its history's entries (store[start:end]), a (user, column) pair's from those of them whose column is
        the row's, another key's from the rows of the log strictly earlier (fitting) or from
        the fitted table (scoring)."""
        spec, data, out = self.spec, self.data, {}
        if spec.statistics is None:
            return out
        if self.fitted is None:
            self.states["statistics"] = self.base.get("statistics") or {
                "kind": "statistics", "prior": float(data["label"][train].mean())}
        prior = self.states["statistics"]["prior"]
        for key, group, names in spec.statistics_features():
            name = statistics_state(key)
            if key == spec.user:
                positive = np.r_[0, np.cumsum(store["hist_feedback"] == 2)]
                seen, positives = (end - start).astype(np.float64), (positive[end] - positive[start]).astype(np.float64)
            elif isinstance(key, tuple):  # entries of the history whose id is the row's candidate's (as the raw
                feature = spec.columns[key[1]]["feature"]  # signature compares them: unknown values are one OOV id)
                seen, positives = statistics.matching_counts(store[f"hist_{feature}"], store["hist_feedback"] == 2,
                                                             features[f"cand_{feature}"], start, end)
            else:
                seen, positives = self._key_counts(key, name)
            values = statistics.raw_values(seen, positives, prior, spec.statistics["prior_rows"])
            if self.fitted is None:
                edges = ({"edges": self.base[name]["edges"]} if name in self.base
                         else statistics.fit(values, train, spec.statistics["buckets"]))
                self.states[name] = dict(self.states.get(name, {"kind": "statistics",
                                                                "key": list(key) if isinstance(key, tuple) else key}),
                                         **edges)
            scaled = statistics.transformed(values, self.states[name])
            for index, feature in enumerate(names):
                out[f"{group}_{feature}"] = scaled[:, index]
        return out

    def _key_counts(self, key, name):
        """(rows, positives) [n] of a non-user key: strictly earlier rows of the log (fitting; the table of the
        whole log's counts is kept in the state) or the fitted table's counts (scoring)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        data = self.data
        text = data["text"][key]
        text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        if self.fitted is None:
            encoded = pc.dictionary_encode(text)
            codes = np.asarray(encoded.indices)
            values = encoded.dictionary.to_pylist()
            if len(values) > BUDGET["max_size"]:
                raise ZooError(f"spec 'statistics.keys': '{key}' holds {len(values):,} distinct values, past the "
                               f"budget of {BUDGET['max_size']:,} (a table of counts per value)")
            new = data["file"] >= self.context_files  # (a continued fit's earlier logs: counted in its preset's)
            label = np.where(new, data["label"], 0).astype(np.float64)
            counts = np.bincount(codes, weights=new.astype(np.float64), minlength=len(values))
            positives = np.bincount(codes, weights=label, minlength=len(values))
            rows, earlier = np.zeros(codes.size), np.zeros(codes.size)
            rows[new], earlier[new] = statistics.earlier_counts(codes[new], data["time"][new], data["label"][new])
            base = self.base.get(name)
            if base is not None:  # a continued fit: the preset's counts come before the new rows'
                before = statistics.table_counts(base, text)
                rows, earlier = rows + before[0], earlier + before[1]
                known = {value: index for index, value in enumerate(base["values"])}
                merged = list(base["values"]) + [value for value in values if value not in known]
                known = {value: index for index, value in enumerate(merged)}
                where = np.asarray([known[value] for value in values], np.int64)
                totals = np.zeros((2, len(merged)))
                totals[0, :len(base["values"])], totals[1, :len(base["values"])] = base["rows"], base["positives"]
                np.add.at(totals[0], where, counts)
                np.add.at(totals[1], where, positives)
                kept = totals[0] > 0  # (a value of the earlier logs only: in the preset's table or not counted)
                merged, totals = [v for v, k in zip(merged, kept) if k], totals[:, kept]
                values, (counts, positives) = merged, totals
            self.states[name] = {"kind": "statistics", "key": key, "values": values,
                                 "rows": [int(c) for c in counts], "positives": [int(p) for p in positives]}
            return rows, earlier
        return statistics.table_counts(self.states[name], text)

    def _list_history(self, encoded):
        """{hist key: [n, L] ids}: each list's newest L tokens, left-padded with 0 (newest last)."""
        L = self.spec.sequence_length
        out = {}
        for name, options in self.spec.columns.items():
            if options["type"] != "list":
                continue
            ids, lengths = encoded[name]
            ends = np.cumsum(lengths)
            position = ends[:, None] - L + np.arange(L)[None, :]  # [n, L] index into ids
            valid = position >= (ends - lengths)[:, None]
            out[f"hist_{options['feature']}"] = np.where(valid, ids[np.clip(position, 0, max(ids.size - 1, 0))]
                                                         if ids.size else 0, 0).astype(np.int32)
            longer = lengths > L
            if longer.any():
                self.count(f"kept the newest {L} of {{n}} '{name}' list(s) longer than {L}", longer,
                           (1, list(self.spec.columns).index(name)))
        return out

    def _with_negatives(self, part, encoded, train, code):
        """Every positive followed by `negatives` rows whose item is drawn uniformly from the other
        training items (and whose other cand_ features are the drawn item's, as last seen in training)."""
        spec = self.spec
        k, item = spec.label["negatives"], spec.item
        vocabulary = self.states[item]
        known = len(vocabulary["tokens"])
        if known < 2:
            raise ZooError(f"fewer than 2 training items in '{item}': cannot sample negatives")
        if code not in self.rngs:  # one stream per split, continued over a streaming build's partitions
            self.rngs[code] = np.random.default_rng([spec.label["seed"], code] + ([self.group.rank] if self.sharded else []))
        rng = self.rngs[code]
        item_key = f"cand_{spec.columns[item]['feature']}"
        positive = part[item_key]
        drawn = rng.integers(1, known, size=(positive.size, k))  # 1..known-1, then skip the positive's id
        drawn = np.where(drawn >= positive[:, None], drawn + 1, drawn).astype(np.int32)
        width = k + 1
        out = {key: np.repeat(values, width, axis=0) for key, values in part.items() if key != "raw_item"}
        out[item_key] = np.concatenate([positive[:, None], drawn], axis=1).reshape(-1)
        others = [name for name, options in spec.columns.items() if options["role"] == "cand" and name != item]
        last_seen = self.last_seen if self.last_seen is not None else self._last_seen(
            encoded[item], [encoded[n] for n in others], train, known)
        for name, attribute in zip(others, last_seen):
            key = f"cand_{spec.columns[name]['feature']}"
            out[key] = np.concatenate([part[key][:, None], attribute[drawn]], axis=1).reshape(
                (-1,) + part[key].shape[1:])
        out["labels"] = np.tile(np.eye(1, width, dtype=np.float32)[0], positive.size)
        return out

    def _last_seen(self, item_ids, columns, train, known):
        """Per column, [known + 2] ids: each item's value in the last training row (of every process) that
        holds the item (0 for an item no training row holds)."""
        if not columns:
            return []
        rows = np.flatnonzero(train)
        latest = latest_per_item(item_ids[rows], self._global_index()[rows], [c[rows] for c in columns])
        if self.sharded:  # each process's latest row per item (bounded by the items, not the rows)
            latest = latest_per_item(*concatenate_latest(self.group.allgather(latest)))
        return item_attributes(latest, known)

    # ------------------------------------------------------------------ schema, account, writing
    def _schema(self):
        if self.fitted is not None:
            return Schema.from_dict(self.fitted["schema"])
        spec = self.spec
        features = []

        def size(name):
            state = self.states[name]
            if state["kind"] == "shared":
                state = self.states[state["column"]]
            if state["kind"] == "hashed":
                return state["buckets"] + 2, True
            if state["kind"] == "numeric":
                return state["buckets"] + 2, False  # ids 1..len(edges)+1 <= buckets, then OOV (unused)
            return len(state["tokens"]) + 2, False

        by_feature = {(o["role"], o["feature"]): n for n, o in spec.columns.items()}
        if spec.history_from_log():
            for field in spec.history["fields"]:
                name = by_feature.get(("cand", field)) or by_feature[("hist", field)]
                vocabulary, hashed = size(name)
                features.append(Feature(field, "hist", vocabulary, spec.columns[name]["embedding_dim"], hashed))
        if spec.feedback():
            features.append(Feature("feedback", "hist", 4, spec.embedding_dim))  # 1 no, 2 yes, 3 unknown
        for name, options in spec.columns.items():
            if options["type"] == "list":
                vocabulary, hashed = size(name)
                shared = self.states[name].get("column")
                dim = spec.columns[shared]["embedding_dim"] if shared else options["embedding_dim"]
                features.append(Feature(options["feature"], "hist", vocabulary, dim, hashed))
        for role in ("user", "cand", "ctx", "num"):
            for name, options in spec.columns.items():
                if options["role"] != role:
                    continue
                if role == "num":
                    features.append(Feature(options["feature"], "num"))
                else:
                    vocabulary, hashed = size(name)
                    features.append(Feature(options["feature"], role, vocabulary, options["embedding_dim"], hashed,
                                            tags=options.get("max_tags", 0)))
            if role == "ctx" and spec.time is not None:
                for name in spec.time["derive"]:
                    features.append(Feature(name, "ctx", DERIVED_SIZES[name], spec.embedding_dim))
        for key, group, names in spec.statistics_features():
            state = self.states[statistics_state(key)]
            features.extend(Feature(name, group, len(edges) + 2, spec.embedding_dim)
                            for name, edges in zip(names, state["edges"]))
        return Schema(features=features, sequence_length=spec.sequence_length if any(
            f.group == "hist" for f in features) else 0, time=spec.history_from_log())

    def _per_file(self):
        """(rows [files], repaired rows [files]) of the kept rows."""
        files = len(self.accounts)
        file = self.data["file"]
        return np.bincount(file, minlength=files), np.bincount(file[self.repaired], minlength=files)

    def _finish(self, dropped, rows, repaired):
        """The info; completes each file's account from the per-file counts of kept `rows`, `repaired` rows
        and `dropped` rows (kept rows that made no sample)."""
        spec = self.spec
        for index, (path, repairs) in enumerate(self.accounts.items()):
            for kind, (_, per_file) in sorted(self.kinds.items(), key=lambda item: item[1][0]):  # any batch order
                repairs.counts[kind] += int(per_file[index])
            repairs.repaired += int(repaired[index])
            repairs.drop(f"made no sample for {{n}} row(s) with fewer than {spec.history and spec.history.get('min_length')} "
                         "earlier row(s) of their user", int(dropped[index]))
            if self.context_rows is not None:
                repairs.drop(HISTORY_ONLY,
                             int(self.context_rows[index]))
            for name in self.unknown:
                what = (f"mapped {{n}} '{name}' value(s) to the OOV id" if spec.columns[name]["type"] in ("list", "tags")
                        else f"mapped the '{name}' of {{n}} row(s) to the OOV id")
                repairs.note(what + " (unknown to the fitted preprocessing)", int(self._unknown_files[name][index]))
            context = 0 if self.context_rows is None else int(self.context_rows[index])
            repairs.finish(int(rows[index]) - int(dropped[index]) - context, context=index < self.context_files)
            if self.verbose is not False:
                repairs.report()
        negatives = spec.label.get("negatives", 0) if self.fitted is None else 0
        if self.fitted is None:
            vocabulary = self.states.get(spec.item, {}).get("tokens", []) if spec.item else []
            sample_rate = negatives / (len(vocabulary) - 1) if negatives and len(vocabulary) > 1 else 1.0
        else:
            sample_rate = self.fitted["info"].get("sample_rate", 1.0)
        info = {
            "spec": spec.to_dict(), "sample_rate": sample_rate, "negatives": negatives,
            "labeled": self.labeled,
            "repairs": " | ".join(r.summary() for r in self.accounts.values()),
            "accounting": {os.path.basename(p): r.accounting() for p, r in self.accounts.items()},
            "files": [os.path.abspath(p) for p in self.accounts],
        }
        if self.fitted is not None:
            info["unknown_ids"] = self.unknown
        if self.drift:
            info["drift"] = self.drift
        if self.sharded:
            info["process"] = {"rank": self.group.rank, "size": self.group.size,
                               "shards": [int(n) for n in self.file_numbers]}
        return info


def key_hashes(text):
    """int64 [n]: a stable 64-bit hash (blake2b) of each text of an Arrow string array, the same in every read."""
    import hashlib

    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text)
    hashed = np.array([int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little", signed=True)
                       for v in encoded.dictionary.to_pylist()], np.int64)
    return hashed[np.asarray(encoded.indices)] if len(hashed) else np.zeros(len(encoded), np.int64)


def read_keys(spec, files):
    """The arrays zoo.recipes.baselines reads of every kept row of `files` (a spec's log, labelled): "labels",
    "time" and the "user" and "item" key hashes (`key_hashes`), in file order."""
    spec = DataSpec.read(spec)
    data, _ = _read(spec, files, scoring=False)
    arrays = {"labels": data["label"]}
    if data["time"] is not None:
        arrays["time"] = data["time"]
    for name, column in (("user", spec.user), ("item", spec.item)):
        if column:
            arrays[name] = key_hashes(data["text"][column])
    return arrays


# ---------------------------------------------------------------------------------------- fit arithmetic
# Shared by the in-memory build (one process or several) and the streaming build (spec_streaming).
def global_user_ranks(group, dictionary):
    """(each of this process's users' rank among every process's users (sorted), how many users in all);
    a user's rows must all be in one process's shards (refused in one line otherwise)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    gathered = group.allgather(dictionary)
    everyone = pa.chunked_array(gathered, pa.string()).combine_chunks()
    counts = pc.value_counts(everyone)
    spanning = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(spanning):
        user = spanning[0].as_py()
        holders = [rank for rank, users in enumerate(gathered) if user in set(users.to_pylist())]
        raise ZooError(
            f"user {user!r} has rows in the shards of processes {holders[0]} and {holders[1]} ({len(spanning)} "
            f"user(s) span processes): a history built from the log and a per-user split need each user's rows "
            "in one process's shards; partition the shard files by user")
    ordered = everyone.take(pc.array_sort_indices(everyone))
    return np.asarray(pc.index_in(dictionary, value_set=ordered), np.int64), len(ordered)


def latest_per_item(items, index, values):
    """(items, index, [values]) of the row of highest `index` holding each item (items sorted)."""
    order = np.lexsort((index, items))
    last = order[np.append(items[order][1:] != items[order][:-1], True)] if order.size else order
    return items[last], index[last], [value[last] for value in values]


def concatenate_latest(parts):
    """Several `latest_per_item` results as one (items, index, [values]) to reduce again."""
    return (np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts]),
            [np.concatenate([part[2][i] for part in parts]) for i in range(len(parts[0][2]))])


def item_attributes(latest, known):
    """Per value column of `latest`, [known + 2] ids: the item's value (0 for an item no row holds)."""
    items, _, values = latest
    out = []
    for value in values:
        attribute = np.zeros((known + 2,) + value.shape[1:], np.int32)  # (a tags column: [known + 2, S])
        attribute[items] = value
        out.append(attribute)
    return out


def continued(state):
    """{column: fitted state} of a preset's fitted `state` (zoo.datasets.fitted) that a fit continues
    (`build(grow_from=...)`): its vocabularies, numeric states and running statistics."""
    return {name: table for name, table in state["fitted"].items()
            if isinstance(table, dict) and table.get("kind") in ("vocabulary", "numeric", "statistics")}


def time_cut(n, fractions, order_statistics):
    """[validation start, test start] times of a time-fraction split of n rows, from `order_statistics(k)`
    (the k-th earliest times)."""
    positions = [min(int(n * fractions[0]), n - 1), min(int(n * (fractions[0] + fractions[1])), n - 1), n - 1]
    cut = [int(v) for v in order_statistics(positions)]
    if fractions[2] == 0:
        cut[1] = cut[2] + 1
    if fractions[1] == 0:
        cut[0] = cut[1]
    return cut[:2]


def order_split(index, n, fractions):
    """Split codes of rows at positions `index` of n rows: the first fraction trains, then validation, test."""
    train_end, valid_end = int(n * fractions[0] + 1e-9), int(n * (fractions[0] + fractions[1]) + 1e-9)
    return np.where(index < train_end, 0, np.where(index < valid_end, 1, 2)).astype(np.int8)
