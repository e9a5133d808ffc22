"""The checks a fitted state (`preprocessing.json`, zoo.datasets.fitted) passes each time it is read.

A preset's checksum only proves that the file is the one its metadata.json records: a file edited by
someone who recomputed the checksum, or written badly by a tool, passes it. Every value the engine, the
readers and the raw signature read from the state is checked here, before any of them runs: a bad one
is one line naming the file, the field's path in the file and the rule it breaks, e.g.

    run/preset/preprocessing.json: fitted.price.std is 0 (a scaler's standard deviation is a positive finite number)

instead of a model that scores on a broken contract or an internal traceback at export.
"""

import json
import math

from zoo.datasets.spec import DataSpec, statistics_state
from zoo.datasets.transforms import numeric
from zoo.errors import ZooError
from zoo.schema import Schema

KINDS = ("vocabulary", "hashed", "shared", "numeric", "quantile_buckets", "statistics")
COUNT_LIMIT = 2**53  # counts are whole numbers a float64 holds exactly
SHOWN = 60  # characters of a bad value the message quotes


def check_state(state, where="preprocessing"):
    """Refuses, in one ZooError naming `where` and the field, a state (a dict with the format's keys) whose
    schema, fitted tables, info or spec a reader would misread; returns nothing."""
    _Check(state, where).run()


def shown(value):
    """A value as the JSON file writes it (NaN, 1e+300, "median", [...]), cut to SHOWN characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value):
    return is_number(value) and math.isfinite(value)


def is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= COUNT_LIMIT


class _Check:
    def __init__(self, state, where):
        self.state, self.where = state, where

    def refuse(self, path, value, rule):
        raise ZooError(f"{self.where}: {path} is {shown(value)} ({rule})")

    def refuse_missing(self, path, rule):
        raise ZooError(f"{self.where}: {path} is missing ({rule})")

    def run(self):
        state = self.state
        for key in ("schema", "info"):
            if not isinstance(state[key], dict):
                self.refuse(key, state[key], f"the preprocessing's '{key}' is an object")
        try:
            Schema.from_dict(state["schema"])
        except (ZooError, TypeError, ValueError) as error:
            raise ZooError(f"{self.where}: schema: {str(error).splitlines()[0]}") from None
        sample_rate = state["info"].get("sample_rate", 1.0)
        if not is_finite(sample_rate) or not sample_rate >= 0:  # (0: a reader asked for no sampled negatives)
            self.refuse("info.sample_rate", sample_rate, "the rate the fit kept negatives at is a finite number >= 0")
        for name, table in state["fitted"].items():
            self.table(f"fitted.{name}", table)
        if "spec" in state:
            self.against_spec()
        else:
            for name, table in state["fitted"].items():
                if table["kind"] == "vocabulary" and not table["tokens"]:
                    self.refuse(f"fitted.{name}.tokens", [], f"the {state['dataset']} reader's vocabularies hold at "
                                                            "least one token")

    # ------------------------------------------------------------------ one table, by its kind
    def table(self, path, table):
        if not isinstance(table, dict):
            self.refuse(path, table, "a fitted table is an object with a 'kind'")
        if table.get("kind") not in KINDS:
            self.refuse(f"{path}.kind", table.get("kind"), f"kinds: {', '.join(KINDS)}")
        getattr(self, table["kind"])(path, table)

    def text_list(self, path, table, name, needed, listed, text, once):
        """table[name]: a list (`needed` when absent, `listed` when not a list) of distinct texts (`text`, `once`)."""
        values = self.field(path, table, name, needed)
        if not isinstance(values, list):
            self.refuse(f"{path}.{name}", values, listed)
        self.texts(f"{path}.{name}", values, text, once)
        return values

    def vocabulary(self, path, table):
        tokens = self.text_list(path, table, "tokens", "a vocabulary lists its tokens in id order",
                                "a vocabulary lists its tokens in id order",
                                "a vocabulary's tokens are texts, as a file's values are read",
                                "a vocabulary lists each token once")
        times = table.get("last_seen", tokens)  # (a capped vocabulary: each token's latest time, for its eviction)
        if times is not tokens and (not isinstance(times, list) or len(times) != len(tokens)
                                    or not all(is_count(t) for t in times)):
            self.refuse(f"{path}.last_seen", times, "a vocabulary's last_seen lists each token's latest time "
                                                    "(whole unix seconds), in id order")

    def hashed(self, path, table):
        buckets = self.field(path, table, "buckets", "hashing needs its number of buckets")
        self.positive_int(f"{path}.buckets", buckets, "hash buckets are a whole number of at least 1")

    def shared(self, path, table):
        column = table.get("column")
        owner = self.state["fitted"].get(column) if isinstance(column, str) else None
        if not isinstance(owner, dict) or owner.get("kind") not in ("vocabulary", "hashed"):
            self.refuse(f"{path}.column", column, "a shared table names a fitted vocabulary or hashed table")

    def numeric(self, path, table):
        log1p = self.field(path, table, "log1p", "a numeric column's fit says whether it takes log1p")
        if not isinstance(log1p, bool):
            self.refuse(f"{path}.log1p", log1p, "log1p is true or false")
        fill = self.field(path, table, "fill", "missing values are filled with the fitted fill")
        if not is_finite(fill):
            self.refuse(f"{path}.fill", fill, "a numeric column's fill value is a finite number")
        self.scaler(path, table)
        if "buckets" in table or "edges" in table:
            buckets = self.field(path, table, "buckets", "bucket edges come with their number of buckets")
            self.positive_int(f"{path}.buckets", buckets, "buckets are a whole number of at least 1")
            self.edges(f"{path}.edges", self.field(path, table, "edges", "buckets need their fitted edges"), buckets)

    def quantile_buckets(self, path, table):
        buckets = self.field(path, table, "num_buckets", "quantile buckets need their number")
        self.positive_int(f"{path}.num_buckets", buckets, "buckets are a whole number of at least 1")
        mean = self.field(path, table, "mean", "missing values are filled with the fitted mean")
        if not is_finite(mean):
            self.refuse(f"{path}.mean", mean, "a fill mean is a finite number")
        self.edges(f"{path}.edges", self.field(path, table, "edges", "buckets need their fitted edges"), buckets)

    def statistics(self, path, table):
        if path == "fitted.statistics":  # the rate every key's smoothed rate starts from
            prior = self.field(path, table, "prior", "the statistics smooth every rate toward it")
            if not is_finite(prior) or not 0 <= prior <= 1:
                self.refuse(f"{path}.prior", prior, "a rate prior must lie in [0, 1]")
            return
        edges = self.field(path, table, "edges", "each statistic (seen, positives, rate) is bucketed by its edges")
        if not isinstance(edges, list) or len(edges) != 3:
            self.refuse(f"{path}.edges", edges, "three lists of bucket edges: seen, positives, rate")
        for i, column in enumerate(edges):
            self.edges(f"{path}.edges[{i}]", column)
        if "values" in table or "rows" in table or "positives" in table:
            self.counts(path, table)

    def counts(self, path, table):
        """A key's counts over the fitted log: its values, and per value the rows and positives seen."""
        values = self.text_list(path, table, "values", "counts per value need their values",
                                "a key's counted values are a list of texts",
                                "a key's counted values are texts, as a file's values are read",
                                "each value is counted once")
        lists = {}
        for name in ("rows", "positives"):
            counts = self.field(path, table, name, "each counted value has its rows and positives")
            if not isinstance(counts, list):
                self.refuse(f"{path}.{name}", counts, "one count per value")
            if len(counts) != len(values):
                raise ZooError(f"{self.where}: {path}.{name} holds {len(counts):,} counts but {path}.values "
                               f"holds {len(values):,} values (one count per value)")
            for i, count in enumerate(counts):
                if not is_count(count):
                    self.refuse(f"{path}.{name}[{i}]", count, "a count is a whole number from 0 to 2**53")
            lists[name] = counts
        for i, (rows, positives) in enumerate(zip(lists["rows"], lists["positives"])):
            if positives > rows:
                self.refuse(f"{path}.positives[{i}]", positives, f"a value's positives are at most its rows, {rows}")

    # ------------------------------------------------------------------ the pieces
    def field(self, path, table, key, rule):
        if key not in table:
            self.refuse_missing(f"{path}.{key}", rule)
        return table[key]

    def positive_int(self, path, value, rule):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            self.refuse(path, value, rule)

    def texts(self, path, values, type_rule, once_rule):
        seen = {}
        for i, value in enumerate(values):
            if not isinstance(value, str):
                self.refuse(f"{path}[{i}]", value, type_rule)
            if value in seen:
                self.refuse(f"{path}[{i}]", value, f"{once_rule}; {path}[{seen[value]}] is the same")
            seen[value] = i

    def edges(self, path, edges, buckets=None):
        """Bucket edges: finite numbers, each above the one before (ids 1..len + 1), at most buckets - 1."""
        if not isinstance(edges, list):
            self.refuse(path, edges, "bucket edges are a list of increasing numbers")
        for i, edge in enumerate(edges):
            if not is_finite(edge):
                self.refuse(f"{path}[{i}]", edge, "bucket edges are finite numbers")
            if i and not edge > edges[i - 1]:
                self.refuse(f"{path}[{i}]", edge, f"bucket edges increase strictly; {path}[{i - 1}] is "
                                                  f"{shown(edges[i - 1])}")
        if buckets is not None and len(edges) > buckets - 1:
            raise ZooError(f"{self.where}: {path} holds {len(edges)} edges but {buckets} buckets have at most "
                           f"{buckets - 1}")

    def scaler(self, path, table):
        problem = numeric.scaler_problem(table)  # (the scales' fields and rules: zoo.datasets.transforms.numeric)
        if problem is not None:
            field, rule = problem
            if field not in table:
                self.refuse_missing(f"{path}.{field}", rule)
            self.refuse(f"{path}.{field}", table[field], rule)

    # ------------------------------------------------------------------ the tables the spec needs
    def against_spec(self):
        """The spec reads, and every column and statistic it names has the fitted table it is applied with."""
        if not isinstance(self.state["spec"], dict):
            self.refuse("spec", self.state["spec"], "a data spec is an object")
        try:
            spec = DataSpec.read(self.state["spec"])
        except ZooError as error:
            raise ZooError(f"{self.where}: {error}") from None
        fitted = self.state["fitted"]
        for column, options in spec.columns.items():
            path = f"fitted.{column}"
            kinds = {"categorical": ("vocabulary", "hashed"), "tags": ("vocabulary", "hashed"),
                     "list": ("vocabulary", "hashed", "shared"),
                     "numeric": ("vocabulary",) if options.get("bars") else ("numeric",)}[options["type"]]
            if column not in fitted:
                self.refuse_missing(path, f"the spec's {options['type']} column '{column}' is applied with it")
            if fitted[column]["kind"] not in kinds:
                self.refuse(f"{path}.kind", fitted[column]["kind"],
                            f"the spec's {options['type']} column '{column}' is applied with a {' or '.join(kinds)}")
            if kinds == ("numeric",):
                self.numeric_against_spec(path, fitted[column], options)
        if spec.statistics is None:
            return
        if "statistics" not in fitted:
            self.refuse_missing("fitted.statistics", "the spec's statistics smooth every rate toward its prior")
        if fitted["statistics"]["kind"] != "statistics":
            self.refuse("fitted.statistics.kind", fitted["statistics"]["kind"],
                        "the statistics' prior is a statistics table")
        for key, _, _ in spec.statistics_features():
            name = statistics_state(key)
            path = f"fitted.{name}"
            if name not in fitted:
                named = shown(list(key) if isinstance(key, tuple) else key)
                self.refuse_missing(path, f"the spec's statistics key {named} is bucketed with it")
            if fitted[name]["kind"] != "statistics":
                self.refuse(f"{path}.kind", fitted[name]["kind"], "a statistics key is bucketed by a statistics table")
            for i, edges in enumerate(fitted[name]["edges"]):
                if len(edges) > spec.statistics["buckets"] - 1:
                    raise ZooError(f"{self.where}: {path}.edges[{i}] holds {len(edges)} edges but the spec's "
                                   f"{spec.statistics['buckets']} statistics buckets have at most "
                                   f"{spec.statistics['buckets'] - 1}")
            counted = isinstance(key, str) and key != spec.user  # counted over the fitted log, not a history
            if counted and "values" not in fitted[name]:
                self.refuse_missing(f"{path}.values", f"the statistics of '{key}' are counted per value of the fit")

    def numeric_against_spec(self, path, table, options):
        """A numeric column's fit transforms as its spec says (log1p, standardize, buckets): training, scoring
        and the raw signature read the transform from different places."""
        if table["log1p"] != options["log1p"]:
            self.refuse(f"{path}.log1p", table["log1p"], f"the spec's column says log1p {shown(options['log1p'])}")
        held = numeric.scale_of(table)
        if options["scale"] != held:
            rule = f"the spec's column scales by {shown(options['scale'])}"
            if held != "none":  # a scaler the spec does not ask for
                field = numeric.SCALES[held][-1]
                self.refuse(f"{path}.{field}", table[field], rule)
            self.refuse_missing(f"{path}.{numeric.SCALES[options['scale']][-1]}", rule)
        if bool(options["buckets"]) != ("edges" in table):
            rule = f"the spec's column has buckets {shown(options['buckets'])}"
            if "edges" in table:
                self.refuse(f"{path}.edges", table["edges"], rule)
            self.refuse_missing(f"{path}.edges", rule)
