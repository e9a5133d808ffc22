"""A data spec: one plain JSON file that maps a user's own log to the input contract.

    {
      "format": "zoo.datasets.spec", "version": 1,
      "source": {"format": "csv", "delimiter": ",", "quote": "\\"", "header": true},
      "label": {"column": "clicked"},
      "time": {"column": "ts", "format": "iso8601"},
      "user": "user_id",
      "item": "item_id",
      "columns": {
        "user_id": {"role": "user"},
        "item_id": {"role": "cand"},
        "title":   {"role": "cand", "hash_buckets": 100000},
        "price":   {"role": "num", "type": "numeric", "log1p": true, "scale": "standardize"}
      },
      "history": {"from": "log", "fields": ["item_id"], "only": {"column": "clicked", "op": "==", "value": 1}},
      "sequence_length": 50, "embedding_dim": 8,
      "split": {"by": "time", "fractions": [0.8, 0.1, 0.1]}
    }

Sections (every key is checked: an unknown one is refused by name, with the closest known key):

- `source`: `format` csv (any one-character `delimiter`, `quote` character or null, `header` true, or
  false with `column_names` in file order), parquet or jsonl. The data path given with the spec is a
  file, a glob (`logs/*.csv`) or a folder of shards (read in name order, as one log; under several
  processes each reads only its own shards: zoo.datasets.process_group).
- `label`: `{"column": c}` (values 0/1), `{"column": c, "op": ">=", "value": 4}` (a rule: ops == != >= >
  <= <, label = rule holds), or `{"events": true, "negatives": N, "seed": s}`: every row is a positive
  and gets N negatives whose `item` is drawn uniformly from the training items (their other cand_
  columns are the drawn item's, as last seen in training); the info's `sample_rate` = N / (items - 1)
  is what SUAN's rectified pCTR undoes. A row with an empty label is dropped (counted).
- `time`: `column` and `format`: unix_s, unix_ms, iso8601 (with or without a zone; none = UTC) or a
  strptime format ("%Y-%m-%d %H:%M:%S", read as UTC); `utc_offset_hours` shifts the local clock used for
  `derive` (["hour", "weekday"] -> ctx_hour 1..24, ctx_weekday 1..7); `on_error` "error" (default: one
  line naming file, line and column) or "drop" (counted).
- `user`, `item`: the user key (histories, per-user splits, GAUC groups) and the item column (sampled
  negatives). Each may also be a feature in `columns`.
- `columns`: the columns to use, by their name in the file (any other column is ignored). `role` user,
  cand, ctx, num or hist (a behaviour attribute carried only in the history); `feature` (default: the
  column's name, lower-cased, other characters -> "_"); `type` categorical (default), numeric or list.
  categorical: `min_count` (rarer training values -> OOV), `max_size` (keep the most frequent; a fit that
  continues a preset evicts the least recently seen at the cap), or
  `hash_buckets` N (id = 1 + fingerprint64(value) mod N, for unbounded cardinalities); an empty value is
  its own value. numeric: `log1p` (sign kept), `fill` "mean" (training mean) or a number for missing
  values (counted as repaired), then `scale` "standardize" or "minmax" (role num) or `buckets` N equal-frequency
  buckets fitted on training values (an id feature, roles user/cand/ctx); or `bars: true` (BARS' Criteo
  rule: missing -> 0, x > 2 -> floor(ln(x)^2), else int(x), as a category with `min_count`). list (role
  hist): `separator`
  (CSV; Parquet/JSON lists are native), oldest first, or `positions` N: one column per position (a
  header name repeated N times, as Alimama's DMR sample writes `his_cate` 50 times, or name_1 ..
  name_N), values equal to `padding` (default "") skipped; it shares the vocabulary of the cand column of
  the same feature name when there is one. tags (roles user, cand, ctx; the default type of such a column
  with a `separator`): a multi-valued attribute of the row (a film's genres `Comedy|Romance`; Parquet/JSON
  lists are native): its first `max_tags` values (default 8; more are cut, counted) in one vocabulary
  (`min_count`, `max_size` or `hash_buckets` as categorical, fitted on the training rows' kept values),
  the feature [B, S] (cand [B, M, S]) that models read as the mean of the values' embeddings (Feature.tags).
  A fit refuses a feature column that reveals the label on the first 10,000 rows of the first file (equal
  to it, agreeing with it, present on one class only, or ranking it alone at AUC 0.99 or more:
  zoo.datasets.spec_engine.check_leaks); `known_before_label: true` lets a column through deliberately
  (the keys, the time and history columns are not judged; `allow_label_column: true` makes the label's
  own column a feature of its row).
- `history`: `{"from": "log", "fields": [...], "only": rule, "min_length": 0}`: each row's history is its
  user's rows strictly earlier in time (all rows, or those where the `only` rule holds), carrying the
  listed features (cand or hist columns) and their times; rows with fewer than `min_length` earlier
  rows make no sample (counted). `"feedback": true` adds `hist_feedback`, each earlier row's label (ids 1
  negative, 2 positive, 3 unknown: a scored file without labels), so a model reads what the user did with
  what they were shown, not only what they were shown. `{"from": "columns"}`: the list columns are the
  history. Omitted: no history.
- `sequence_length` L (histories keep the newest L; a longer list is truncated, counted),
  `embedding_dim` per field.
- `split`: `{"by": "time", "fractions": [...]}` (time cut points at those shares of the rows; ties in
  time share a split), `{"by": "date", "validation": "YYYY-MM-DD", "test": "YYYY-MM-DD"}` (UTC days),
  `{"by": "random", "fractions": [...], "seed": s}`, `{"by": "user", "fractions": [...]}` (per user, in
  time order, as ReST), `{"by": "held_out_users", "fractions": [...], "seed": s}` (each user's rows in one
  split, the users drawn by a seeded hash of their key at those shares: validation and test users are
  unseen in training; the draft's split for a log without time) or `{"by": "order", "fractions": [...]}`
  (file order).
- `statistics`: `{"keys": [columns], "prior_rows": 10, "buckets": 20}`: per key, three features of each
  row, `<key>_seen` (earlier rows), `<key>_positives` (earlier positives) and `<key>_rate` = (positives +
  a p) / (rows + a) (a = prior_rows, p = the training rate), each cut into `buckets` equal-frequency
  buckets fitted on the training rows: ids of the key's own group (`user_user_id_rate`,
  `cand_item_id_rate`: each of M candidates carries its own), so every model reads them, the
  profile-attending SUAN family included. "Earlier" is strictly earlier in time: no row sees its own label or
  a later one. The `user` key counts the rows of its history (so it needs `history.feedback`; with
  `history.only` it counts those rows): while fitting, at scoring time (the scored file's rows, and
  `--history-from` files) and in the raw signature (the request's history entries) alike. Any other key
  (a categorical user, cand or ctx column: the item, a category, a shop) counts the fitted log's rows
  while fitting; at scoring time and in the raw signature it reads the fitted table, the counts over the
  whole fitted log per value (a value it never saw: 0 rows). A pair `["<user>", "<column>"]` (a categorical
  cand column that `history.fields` lists, e.g. a category) counts the user's earlier rows whose column
  is the candidate's, and their positives: `cand_<user>_x_<column>_seen`/`_positives`/`_rate`, one per
  candidate, read from the history as the user's own counts are (ids compared, so values unknown to the
  fitted preprocessing all count as one). Built in memory, by one process.
- `notes`: texts for people (`spec draft` writes what it guessed and why there); the engine ignores them.
"""

import copy
import datetime
import difflib
import json
import os
import re

import zoo.budget as budget_module
from zoo.datasets.transforms import numeric, tags, vocabulary
from zoo.errors import ZooError

FORMAT = "zoo.datasets.spec"
VERSION = 1
ROLES = ("user", "cand", "ctx", "num", "hist")
TYPES = ("categorical", "numeric", "list", "tags")
OPS = ("==", "!=", ">=", ">", "<=", "<", "in")
TIME_FORMATS = ("unix_s", "unix_ms", "iso8601")
DERIVED = ("hour", "weekday")
SPLITS = ("time", "date", "random", "user", "held_out_users", "order")
STATISTICS = ("seen", "positives", "rate")  # per key: earlier rows, earlier positives, smoothed rate

_KEYS = {
    "": ("format", "version", "source", "label", "time", "user", "item", "columns", "history", "sequence_length",
         "embedding_dim", "split", "statistics", "notes"),
    "source": ("format", "delimiter", "quote", "header", "column_names"),
    "label": ("column", "op", "value", "events", "negatives", "seed"),
    "time": ("column", "format", "utc_offset_hours", "derive", "on_error"),
    "column": ("role", "feature", "type", "min_count", "max_size", "hash_buckets", "log1p", "fill", "scale",
               "buckets", "bars", "separator", "positions", "padding", "max_tags", "embedding_dim",
               "allow_label_column", "known_before_label"),
    "history": ("from", "fields", "only", "min_length", "feedback"),
    "statistics": ("keys", "prior_rows", "buckets"),
    "rule": ("column", "op", "value"),
    "split": ("by", "fractions", "seed", "validation", "test"),
}


def _refuse_unknown(section, given, where):
    if not isinstance(given, dict):
        raise ZooError(f"spec {where or 'file'}: should be a JSON object, found {type(given).__name__}")
    known = _KEYS[section]
    for key in given:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (keys: {', '.join(known)})"
            raise ZooError(f"spec {where + ': ' if where else ''}unknown key '{key}'{hint}")


def statistics_state(key):
    """The fitted state's name of a statistics key: `statistics:<column>`, or for a pair
    `statistics:["<user>", "<column>"]`."""
    return "statistics:" + (json.dumps(list(key)) if isinstance(key, tuple) else key)


def feature_name(column):
    """A column's default feature name: lower-case letters, digits and '_' (as Schema requires)."""
    name = re.sub(r"[^a-z0-9_]+", "_", str(column).strip().lower()).strip("_")
    if not name or not name[0].isalpha():
        name = "f_" + name
    return "time_value" if name == "time" else name


# The budget: the largest size a spec may name, checked before anything is built (each of these allocates
# in proportion: a table of hash_buckets x embedding_dim floats and two Adam moments, N negatives per row,
# histories of L ids per row). Past it, a spec is refused in one line naming the value and the budget.
class _SpecBudget(dict):
    """The spec's sizes, read from the one resource budget (zoo/budget.py) when they are checked."""

    KEYS = {"sequence_length": "sequence_length", "embedding_dim": "embedding_dim", "hash_buckets": "hash_buckets",
            "max_size": "hash_buckets", "buckets": "buckets", "negatives": "negatives"}

    def __getitem__(self, name):
        return budget_module.BUDGET[self.KEYS[name]]


BUDGET = _SpecBudget()  # sequence_length (L), embedding_dim, hash_buckets and max_size, buckets, negatives


def _positive_int(value, where, allow_none=False, budget=None):
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ZooError(f"spec {where}: should be a positive integer, found {value!r}")
    if budget is not None and value > BUDGET[budget]:
        raise ZooError(f"spec {where}: {value:,} is past the budget of {BUDGET[budget]:,} "
                       f"(zoo/budget.py BUDGET['{BUDGET.KEYS[budget]}'])")
    return value


def _seed(value, where):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**32:
        raise ZooError(f"spec {where}: should be a whole number from 0 to 4294967295, found {value!r}")
    return value


def _fractions(value, where):
    if (not isinstance(value, list) or len(value) != 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value)
            or abs(sum(value) - 1) > 1e-6 or value[0] <= 0):
        raise ZooError(f"spec {where}: should be three shares [train, validation, test] summing to 1, found {value!r}")
    return [float(v) for v in value]


class DataSpec:
    """A checked data spec (see the module docstring); `DataSpec.read(path_or_dict)` or `DataSpec(dict)`.

    Attributes mirror the JSON: `source`, `label`, `time`, `user`, `item`, `columns` (column name -> its
    checked options, `feature` and `type` filled in), `history`, `sequence_length`, `embedding_dim`,
    `split`. `to_dict()` gives the JSON with every default written out (what a preset saves).
    """

    def __init__(self, spec):
        spec = copy.deepcopy(spec)
        _refuse_unknown("", spec, "")
        if spec.get("format", FORMAT) != FORMAT:
            raise ZooError(f"spec: 'format' should be '{FORMAT}', found {spec.get('format')!r}")
        if spec.get("version", VERSION) != VERSION:
            raise ZooError(f"spec: version {spec.get('version')!r}; this zoo reads version {VERSION}")
        self.source = self._source(spec.get("source", {}))
        self.label = self._label(spec.get("label"))
        self.time = self._time(spec.get("time"))
        self.user = spec.get("user")
        self.item = spec.get("item")
        for key in ("user", "item"):
            if getattr(self, key) is not None and not isinstance(getattr(self, key), str):
                raise ZooError(f"spec '{key}': should be a column name, found {getattr(self, key)!r}")
        self.embedding_dim = _positive_int(spec.get("embedding_dim", 8), "'embedding_dim'", budget="embedding_dim")
        self.columns = self._columns(spec.get("columns"))
        self.history = self._history(spec.get("history"))
        self.sequence_length = _positive_int(spec.get("sequence_length", 50), "'sequence_length'",
                                             budget="sequence_length")
        self.split = self._split(spec.get("split", {"by": "time", "fractions": [0.8, 0.1, 0.1]}))
        self.statistics = self._statistics(spec.get("statistics"))
        self.notes = spec.get("notes", {})
        if not isinstance(self.notes, dict) or not all(isinstance(v, str) for v in self.notes.values()):
            raise ZooError("spec 'notes': should be an object of texts (what `spec draft` guessed, and why)")
        self._check_together()

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, source):
        """A DataSpec from a DataSpec, a dict or a JSON file's path."""
        if isinstance(source, DataSpec):
            return source
        if isinstance(source, dict):
            return cls(source)
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ZooError(f"{path}: no such spec file")
        try:
            with open(path) as f:
                data = json.load(f)
        except (ValueError, UnicodeDecodeError) as error:
            raise ZooError(f"{path}: not a JSON spec ({str(error).splitlines()[0]})") from None
        except RecursionError:
            raise ZooError(f"{path}: not a spec (JSON nested too deeply to read)") from None
        try:
            return cls(data)
        except ZooError as error:
            raise ZooError(f"{path}: {error}") from None

    def to_dict(self):
        return {
            "format": FORMAT, "version": VERSION, "source": dict(self.source), "label": dict(self.label),
            "time": None if self.time is None else dict(self.time), "user": self.user, "item": self.item,
            "columns": {name: dict(options) for name, options in self.columns.items()},
            "history": None if self.history is None else dict(self.history),
            "sequence_length": self.sequence_length, "embedding_dim": self.embedding_dim, "split": dict(self.split),
            "statistics": None if self.statistics is None else dict(self.statistics, keys=[
                list(k) if isinstance(k, tuple) else k for k in self.statistics["keys"]]),
            "notes": dict(self.notes),
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2)

    # ------------------------------------------------------------------ queries
    def positions(self):
        """{list column: its number of position columns} of the per-position lists (`positions`)."""
        return {name: options["positions"] for name, options in self.columns.items() if options.get("positions")}

    def check_file(self, path, optional=()):
        """Refuses, in one line, a file (its header) that lacks a column this spec reads, other than `optional`
        (spec_reading.check_columns)."""
        from zoo.datasets import spec_reading

        spec_reading.check_columns(path, self.source, self.read_columns(), optional, self.positions(),
                                   label=self.label.get("column"))

    def read_columns(self):
        """Every column the engine reads from the file, in a fixed order."""
        names = []
        for name in ([self.label.get("column")] + [self.time and self.time["column"], self.user, self.item]
                     + list(self.columns) + [self.history and (self.history.get("only") or {}).get("column")]):
            if name and name not in names:
                names.append(name)
        return names

    def feature_key(self, column):
        """The input-contract key a column of the spec becomes ("user_user_id", "cand_item_id"), or None when
        it is not among the spec's columns."""
        options = self.columns.get(column)
        return None if options is None else f"{options['role']}_{options['feature']}"

    def features(self, role):
        """[(column, options)] of one role, in the spec's order."""
        return [(name, options) for name, options in self.columns.items() if options["role"] == role]

    def history_from_log(self):
        return self.history is not None and self.history["from"] == "log"

    def feedback(self):
        """Whether each history entry carries its row's label (`hist_feedback`: 1 negative, 2 positive, 3 unknown)."""
        return self.history_from_log() and self.history.get("feedback", False)

    def earlier_labels_read(self):
        """Whether earlier rows' labels are features (history feedback or running statistics), so that an
        earlier log read for histories needs the label column."""
        return self.feedback() or self.statistics is not None

    def statistics_features(self):
        """[(key, group, [feature names: seen, positives, rate])] of the `statistics` section, in order: the
        group is the key's role (the user key: "user"), so each statistic is an id of its key's group (a cand
        key's: one per candidate); a pair (the user, a cand column) is "cand", named `<user>_x_<column>_...`."""
        if self.statistics is None:
            return []
        out = []
        for key in self.statistics["keys"]:
            if isinstance(key, tuple):
                base = "_x_".join(self._feature_of(column) for column in key)
                out.append((key, "cand", [f"{base}_{kind}" for kind in STATISTICS]))
                continue
            group = "user" if key == self.user else self.columns[key]["role"]
            out.append((key, group, [f"{self._feature_of(key)}_{kind}" for kind in STATISTICS]))
        return out

    def _feature_of(self, column):
        options = self.columns.get(column)
        return options["feature"] if options else feature_name(column)

    # ------------------------------------------------------------------ sections
    @staticmethod
    def _source(source):
        _refuse_unknown("source", source, "'source'")
        fmt = source.get("format", "csv")
        if fmt not in ("csv", "parquet", "jsonl"):
            raise ZooError(f"spec 'source.format': {fmt!r} is not one of csv, parquet, jsonl")
        out = {"format": fmt}
        if fmt == "csv":
            delimiter = source.get("delimiter", ",")
            delimiter = "\t" if delimiter == "\\t" else delimiter
            if not isinstance(delimiter, str) or len(delimiter) != 1:
                raise ZooError(f"spec 'source.delimiter': should be one character, found {delimiter!r}")
            quote = source.get("quote", '"')
            if quote is not None and (not isinstance(quote, str) or len(quote) != 1):
                raise ZooError(f"spec 'source.quote': should be one character or null, found {quote!r}")
            header = source.get("header", True)
            if not isinstance(header, bool):
                raise ZooError(f"spec 'source.header': should be true or false, found {header!r}")
            names = source.get("column_names")
            if not header and not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
                raise ZooError("spec 'source': a CSV without a header needs 'column_names' (the columns in file order)")
            if header and names is not None:
                raise ZooError("spec 'source': 'column_names' is for a CSV without a header (header: false)")
            out.update(delimiter=delimiter, quote=quote, header=header, column_names=names)
        else:
            for key in ("delimiter", "quote", "header", "column_names"):
                if key in source:
                    raise ZooError(f"spec 'source.{key}': only a csv source takes it, not {fmt}")
        return out

    @staticmethod
    def _rule(rule, where):
        _refuse_unknown("rule", rule, where)
        if not isinstance(rule.get("column"), str):
            raise ZooError(f"spec {where}: a rule needs 'column'")
        if rule.get("op") not in OPS:
            raise ZooError(f"spec {where}: 'op' should be one of {' '.join(OPS)}, found {rule.get('op')!r}")
        value = rule.get("value")
        if rule["op"] == "in":
            if (not isinstance(value, list) or not value
                    or any(not isinstance(v, (int, float, str)) or isinstance(v, bool) for v in value)):
                raise ZooError(f"spec {where}: 'in' takes a non-empty list of strings or numbers, found {value!r}")
            return {"column": rule["column"], "op": "in", "value": list(value)}
        if not isinstance(value, (int, float, str)) or isinstance(value, bool):
            raise ZooError(f"spec {where}: 'value' should be a number or a string, found {value!r}")
        return {"column": rule["column"], "op": rule["op"], "value": value}

    def _label(self, label):
        if label is None:
            raise ZooError("spec: 'label' is missing ({'column': ...}, a rule, or {'events': true, 'negatives': N})")
        _refuse_unknown("label", label, "'label'")
        if label.get("events"):
            if label.get("events") is not True or "column" in label or "op" in label:
                raise ZooError("spec 'label': events: true takes 'negatives' and 'seed', not a column or rule")
            negatives = label.get("negatives", 1)
            if not isinstance(negatives, int) or isinstance(negatives, bool) or negatives < 0:
                raise ZooError(f"spec 'label.negatives': should be an integer >= 0, found {negatives!r}")
            if negatives:
                _positive_int(negatives, "'label.negatives'", budget="negatives")
            return {"events": True, "negatives": negatives, "seed": _seed(label.get("seed", 0), "'label.seed'")}
        if "negatives" in label or "seed" in label:
            raise ZooError("spec 'label': 'negatives' and 'seed' go with events: true")
        if not isinstance(label.get("column"), str):
            raise ZooError("spec 'label': needs 'column' (a 0/1 column, or with 'op' and 'value' a rule)")
        if "op" in label or "value" in label:
            return self._rule(label, "'label'")
        return {"column": label["column"]}

    @staticmethod
    def _time(time):
        if time is None:
            return None
        _refuse_unknown("time", time, "'time'")
        if not isinstance(time.get("column"), str):
            raise ZooError("spec 'time': needs 'column'")
        fmt = time.get("format", "unix_s")
        if not isinstance(fmt, str) or (fmt not in TIME_FORMATS and "%" not in fmt):
            raise ZooError(f"spec 'time.format': {fmt!r} is not unix_s, unix_ms, iso8601 or a strptime format")
        offset = time.get("utc_offset_hours", 0)
        if not isinstance(offset, (int, float)) or isinstance(offset, bool) or not -14 <= offset <= 14:
            raise ZooError(f"spec 'time.utc_offset_hours': should be a number of hours in [-14, 14], found {offset!r}")
        derive = time.get("derive", [])
        if not isinstance(derive, list) or any(d not in DERIVED for d in derive):
            raise ZooError(f"spec 'time.derive': should be a list of {', '.join(DERIVED)}, found {derive!r}")
        on_error = time.get("on_error", "error")
        if on_error not in ("error", "drop"):
            raise ZooError(f"spec 'time.on_error': should be 'error' or 'drop', found {on_error!r}")
        return {"column": time["column"], "format": fmt, "utc_offset_hours": offset, "derive": list(derive),
                "on_error": on_error}

    def _columns(self, columns):
        if not isinstance(columns, dict) or not columns:
            raise ZooError("spec: 'columns' should be an object naming at least one column and its role")
        out, features = {}, {}
        for name, options in columns.items():
            where = f"column '{name}'"
            _refuse_unknown("column", options, where)
            role = options.get("role")
            if role not in ROLES:
                raise ZooError(f"spec {where}: 'role' should be one of {', '.join(ROLES)}, found {role!r}")
            kind = options.get("type", "numeric" if role == "num" else "categorical" if "separator" not in options
                               else "list" if role == "hist" else "tags")
            if kind not in TYPES:
                raise ZooError(f"spec {where}: 'type' should be one of {', '.join(TYPES)}, found {kind!r}")
            feature = options.get("feature", feature_name(name))
            if not isinstance(feature, str) or feature_name(feature) != feature:
                raise ZooError(f"spec {where}: 'feature' {feature!r} should be lower-case letters, digits and '_'")
            checked = {"role": role, "feature": feature, "type": kind,
                       "embedding_dim": _positive_int(options.get("embedding_dim", self.embedding_dim),
                                                      f"{where} 'embedding_dim'", budget="embedding_dim")}
            allowed = {"categorical": vocabulary.OPTIONS, "numeric": numeric.OPTIONS,
                       "list": vocabulary.OPTIONS + ("separator", "positions", "padding"),
                       "tags": vocabulary.OPTIONS + tags.OPTIONS}[kind]
            for flag in ("allow_label_column", "known_before_label"):
                if options.get(flag, False) is not False:
                    if options[flag] is not True:
                        raise ZooError(f"spec {where}: '{flag}' should be true or absent, found {options[flag]!r}")
                    checked[flag] = True
            for key in options:
                if key not in ("role", "feature", "type", "embedding_dim", "allow_label_column",
                               "known_before_label") + allowed:
                    raise ZooError(f"spec {where}: '{key}' does not apply to a {kind} column")
            if kind in ("categorical", "list", "tags"):
                if role == "num":
                    raise ZooError(f"spec {where}: role num is for numeric columns (a {kind} column is an id)")
                checked.update(vocabulary.checked_options(options, where, _positive_int))
            if kind == "list":
                if role != "hist":
                    raise ZooError(f"spec {where}: a list column is a history (role hist)")
                checked["separator"] = options.get("separator")
                if checked["separator"] is not None and (not isinstance(checked["separator"], str)
                                                         or not checked["separator"]):
                    raise ZooError(f"spec {where}: 'separator' should be a non-empty string")
                if "positions" in options:  # one column per position: a repeated header name, or name_1 .. name_N
                    checked["positions"] = _positive_int(options["positions"], f"{where} 'positions'",
                                                         budget="sequence_length")
                    if checked["separator"] is not None:
                        raise ZooError(f"spec {where}: a list of 'positions' columns takes no 'separator'")
                    padding = options.get("padding", "")
                    if not isinstance(padding, str):
                        raise ZooError(f"spec {where}: 'padding' should be the text of the padding value, e.g. \"0\"")
                    checked["padding"] = padding
                elif "padding" in options:
                    raise ZooError(f"spec {where}: 'padding' goes with 'positions'")
            if kind == "tags":
                checked.update(tags.checked_options(options, where, role, _positive_int))
            if kind == "numeric":
                checked.update(numeric.checked_options(options, where, role, _positive_int))
            key = f"{role}_{feature}"
            if key in features:
                raise ZooError(f"spec {where}: feature {key} is also made by column '{features[key]}'")
            features[key] = name
            out[name] = checked
        return out

    def _history(self, history):
        if history is None:
            if any(o["role"] == "hist" for o in self.columns.values()):
                raise ZooError("spec: hist columns need a 'history' section ({'from': 'log'} or {'from': 'columns'})")
            return None
        _refuse_unknown("history", history, "'history'")
        source = history.get("from")
        if source == "columns":
            lists = [n for n, o in self.columns.items() if o["type"] == "list"]
            if not lists:
                raise ZooError("spec 'history': from columns needs at least one list column (role hist, type list)")
            for key in ("fields", "only", "min_length", "feedback"):
                if key in history:
                    raise ZooError(f"spec 'history.{key}': goes with from: log")
            return {"from": "columns"}
        if source != "log":
            raise ZooError(f"spec 'history.from': should be 'log' or 'columns', found {source!r}")
        if self.user is None or self.time is None:
            raise ZooError("spec 'history': from log needs 'user' and 'time' (a user's strictly earlier rows)")
        available = {o["feature"]: n for n, o in self.columns.items()
                     if o["role"] in ("cand", "hist") and o["type"] == "categorical"}
        fields = history.get("fields")
        if not isinstance(fields, list) or not fields:
            raise ZooError(f"spec 'history.fields': should list the features the history carries "
                           f"(cand or hist columns: {', '.join(available) or 'none'})")
        for field in fields:
            if field not in available:
                raise ZooError(f"spec 'history.fields': '{field}' is not a categorical cand or hist feature "
                               f"(those are: {', '.join(available) or 'none'})")
        if any(o["type"] == "list" for o in self.columns.values()):
            raise ZooError("spec 'history': from log and list columns cannot be mixed")
        only = history.get("only")
        min_length = history.get("min_length", 0)
        if not isinstance(min_length, int) or isinstance(min_length, bool) or min_length < 0:
            raise ZooError(f"spec 'history.min_length': should be an integer >= 0, found {min_length!r}")
        feedback = history.get("feedback", False)
        if not isinstance(feedback, bool):
            raise ZooError(f"spec 'history.feedback': should be true or false, found {feedback!r}")
        if feedback and self.label.get("column") is None:
            raise ZooError("spec 'history.feedback': needs a label column (events with sampled negatives have none)")
        if feedback and "feedback" in fields:
            raise ZooError("spec 'history.feedback': hist_feedback would also be the field 'feedback' of a column")
        return {"from": "log", "fields": list(fields), "only": None if only is None else self._rule(only, "'history.only'"),
                "min_length": min_length, "feedback": feedback}

    def _statistics(self, statistics):
        """{"keys": [columns], "prior_rows": a}: running counts per key (see the module docstring)."""
        if statistics is None:
            return None
        _refuse_unknown("statistics", statistics, "'statistics'")
        keys = statistics.get("keys")
        if isinstance(keys, list):
            keys = [tuple(k) if isinstance(k, list) and len(k) == 2 and all(isinstance(c, str) for c in k) else k
                    for k in keys]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, (str, tuple)) for k in keys) or \
                len(set(keys)) < len(keys):
            raise ZooError(f"spec 'statistics.keys': should list distinct column names (or [user, column] pairs), "
                           f"found {statistics.get('keys')!r}")
        if self.label.get("column") is None:
            raise ZooError("spec 'statistics': running positives need a label column (not events with sampled negatives)")
        if self.time is None:
            raise ZooError("spec 'statistics': running counts need a 'time' column (strictly earlier rows)")
        for key in keys:
            where = f"spec 'statistics.keys': {list(key) if isinstance(key, tuple) else repr(key)}"
            if key == self.user or isinstance(key, tuple):
                if isinstance(key, tuple):
                    user, column = key
                    options = self.columns.get(column)
                    if self.user is None:
                        raise ZooError(f"{where}: a pair counts the rows of the spec's 'user', which is not set")
                    if user != self.user or options is None or options["role"] != "cand" or \
                            options["type"] != "categorical":
                        raise ZooError(f"{where}: a pair is [the user '{self.user}', a categorical cand column]")
                    if not self.history_from_log():
                        raise ZooError(f"{where}: the pair is counted from the user's history, which needs "
                                       "\"history\": {\"from\": \"log\", ...}")
                    if options["feature"] not in self.history["fields"]:
                        raise ZooError(f"{where}: the pair counts the user's earlier rows of the candidate's {column}, "
                                       f"so history.fields should list {options['feature']}")
                if not self.feedback():
                    raise ZooError(f"{where} {'counts' if isinstance(key, tuple) else 'is'} the user: its counts are "
                                   "read from the history, which needs \"history\": {\"from\": \"log\", ..., "
                                   "\"feedback\": true}")
                continue
            options = self.columns.get(key)
            if options is None or options["type"] != "categorical" or options["role"] not in ("user", "cand", "ctx"):
                raise ZooError(f"{where} should be the user or a categorical user, cand or ctx column of 'columns'")
            if key == self.label.get("column"):
                raise ZooError(f"{where} is the label's column")
        prior_rows = statistics.get("prior_rows", 10)
        if not isinstance(prior_rows, (int, float)) or isinstance(prior_rows, bool) or not 0 < prior_rows <= 1e6:
            raise ZooError(f"spec 'statistics.prior_rows': should be a number in (0, 1e6], found {prior_rows!r}")
        buckets = _positive_int(statistics.get("buckets", 20), "'statistics.buckets'", budget="buckets")
        return {"keys": list(keys), "prior_rows": prior_rows, "buckets": buckets}

    @staticmethod
    def _split(split):
        _refuse_unknown("split", split, "'split'")
        by = split.get("by")
        if by not in SPLITS:
            raise ZooError(f"spec 'split.by': should be one of {', '.join(SPLITS)}, found {by!r}")
        if by == "date":
            out = {"by": "date"}
            for key in ("validation", "test"):
                value = split.get(key)
                if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                    raise ZooError(f"spec 'split.{key}': should be a date YYYY-MM-DD, found {value!r}")
                try:
                    datetime.date.fromisoformat(value)
                except ValueError:
                    raise ZooError(f"spec 'split.{key}': {value} is not a date of the calendar") from None
                out[key] = value
            if out["validation"] > out["test"]:
                raise ZooError("spec 'split': the validation date is after the test date")
            return out
        out = {"by": by, "fractions": _fractions(split.get("fractions", [0.8, 0.1, 0.1]), "'split.fractions'")}
        if by in ("random", "held_out_users"):
            out["seed"] = _seed(split.get("seed", 0), "'split.seed'")
        return out

    def _check_together(self):
        label = self.label.get("column")  # a feature of the row itself (a history reads earlier rows' only)
        for key, column in (("user", self.user), ("item", self.item), ("time", self.time and self.time["column"])):
            if label is not None and column == label:
                raise ZooError(f"spec 'label': '{label}' is also the {key} column; the label is what a row's features "
                               "predict, so it cannot be a key or the time")
        options = self.columns.get(label)
        if options and options["role"] != "hist" and not options.get("allow_label_column"):
            raise ZooError(f"spec column '{label}': the label's own column is a feature of its row, so the model would "
                           "read the label it predicts; remove it from 'columns' (or mark it \"allow_label_column\": "
                           "true for a deliberate case)")
        for key in ("user", "item"):  # a key is one value a row
            column = getattr(self, key)
            if column in self.columns and self.columns[column]["type"] in ("list", "tags"):
                raise ZooError(f"spec '{key}': '{column}' is a {self.columns[column]['type']} column; the {key} key is "
                               "one value a row")
        if self.split["by"] in ("time", "date") and self.time is None:
            raise ZooError(f"spec 'split': by {self.split['by']} needs a 'time' column")
        if self.split["by"] in ("user", "held_out_users") and self.user is None:
            raise ZooError(f"spec 'split': by {self.split['by']} needs 'user'")
        if self.label.get("events"):
            if self.item is None:
                raise ZooError("spec 'label': events with sampled negatives need 'item' (what is sampled)")
            if self.item not in self.columns or self.columns[self.item]["role"] != "cand":
                raise ZooError(f"spec 'label': the item column '{self.item}' should be a cand column")
            if self.columns[self.item].get("hash_buckets"):
                raise ZooError("spec 'label': sampled negatives need a vocabulary for the item, not hash_buckets")
        if self.time and self.time["derive"]:
            for name in self.time["derive"]:
                if any(o["role"] == "ctx" and o["feature"] == name for o in self.columns.values()):
                    raise ZooError(f"spec 'time.derive': ctx_{name} is also a column's feature")
        made = {f"{o['role']}_{o['feature']}" for o in self.columns.values()}
        for key, group, names in self.statistics_features():
            taken = made.intersection(f"{group}_{name}" for name in names)
            if taken:
                raise ZooError(f"spec 'statistics.keys': {taken.pop()} of "
                               f"{list(key) if isinstance(key, tuple) else repr(key)} is also a column's feature")
        hist = {o["feature"] for o in self.columns.values() if o["role"] == "hist"}
        if self.history_from_log():
            missing = hist - set(self.history["fields"])
            if missing:
                raise ZooError(f"spec 'history.fields': the hist column(s) {', '.join(sorted(missing))} are not listed")
