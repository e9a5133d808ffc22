"""Numbers: log1p, the fill of missing values, standardisation or equal-frequency buckets, the clip.

State (in preprocessing.json): {"kind": "numeric", "log1p": bool, "fill": f, ["mean": m, "std": s],
["buckets": n, "edges": [...]]}. A value x becomes

    x' = sign(x) log(1 + |x|)            (log1p)
    x' = fill                            (missing: the training mean of the present values, or a constant)
    x' = (x' - mean) / std               (scale "standardize": the training rows' mean and deviation,
                                          missing values counted at the fill)
    x' = (x' - min) / (max - min)        (scale "minmax": the training rows' least and greatest values,
                                          the fill among them; 0 where they are one value)
    id = 1 + #{edges <= x'}              (buckets: np.quantile's edges at q = i / buckets of the training
                                          rows, distinct; a bucketed column is categorical in the contract)
    x' = clip(x', -1e9, 1e9)             (the contract's bound, counted)

A BARS column (`"bars": true`, Criteo_x4's numbers as categories) is a token instead: missing -> 0,
x > 2 -> floor(ln(x)^2), else int(x); its vocabulary is vocabulary.py's.

Options (a spec's numeric column): `log1p` (bool), `fill` ("mean" or a number), `scale` (a key of SCALES;
role num) or `buckets` N (roles user, cand, ctx), or `bars: true` with `min_count`. A scale is one line
in SCALES and its fit in `Moments.state`: the batch and the graph forms share `scaled`.
"""

import numpy as np

from zoo.errors import ZooError
from zoo.schema import NUMERIC_LIMIT

OPTIONS = ("log1p", "fill", "scale", "buckets", "bars", "min_count")
SCALES = {"none": (), "standardize": ("mean", "std"), "minmax": ("min", "max")}  # scale -> its fitted fields


def checked_options(options, where, role, positive_int):
    """A spec's numeric column options, checked (one line naming the option otherwise), with their defaults."""
    import math

    if options.get("bars"):
        if options["bars"] is not True or role not in ("user", "cand", "ctx"):
            raise ZooError(f"spec {where}: bars: true makes a numeric an id (BARS' floor(ln(x)^2) token): "
                           "role user, cand or ctx")
        for key in ("log1p", "fill", "scale", "buckets"):
            if key in options:
                raise ZooError(f"spec {where}: '{key}' does not go with bars")
        return {"bars": True, "min_count": positive_int(options.get("min_count", 1), f"{where} 'min_count'")}
    if "min_count" in options:
        raise ZooError(f"spec {where}: 'min_count' is for categorical (or bars) columns")
    fill = options.get("fill", "mean")
    if fill != "mean" and (not isinstance(fill, (int, float)) or isinstance(fill, bool)
                           or not math.isfinite(fill) or abs(fill) > NUMERIC_LIMIT):
        raise ZooError(f"spec {where}: 'fill' should be \"mean\" or a finite number within +-1e9, found {fill!r}")
    checked = {"log1p": bool(options.get("log1p", False)), "fill": fill, "scale": options.get("scale", "none")}
    if checked["scale"] not in SCALES:
        raise ZooError(f"spec {where}: 'scale' should be " + " or ".join(repr(s) for s in SCALES)
                       + f", found {checked['scale']!r}")
    checked["buckets"] = positive_int(options.get("buckets"), f"{where} 'buckets'", allow_none=True, budget="buckets")
    if role == "num" and checked["buckets"]:
        raise ZooError(f"spec {where}: bucketed numerics are ids: give it role user, cand or ctx")
    if role in ("user", "cand", "ctx") and not checked["buckets"]:
        raise ZooError(f"spec {where}: a numeric {role} feature needs 'buckets' (or role num)")
    if role == "hist":
        raise ZooError(f"spec {where}: a history field is categorical")
    return checked


def scale_of(state):
    """The scale a fitted state applies: the one whose fields it holds ("none": none)."""
    return next((scale for scale, fields in SCALES.items() if any(field in state for field in fields)), "none")


def scaler_problem(state):
    """(field, rule) of the first field of a fitted state's scaler that is missing or not what it should be;
    None when the scaler is sound (zoo.datasets.fitted_checks refuses a preset's with one line)."""
    scale = scale_of(state)
    fields = SCALES[scale]
    names = {"mean": "mean", "std": "standard deviation", "min": "least value", "max": "greatest value"}
    for field in fields:
        if field not in state:
            return field, "a scaler needs its " + " and ".join(names[f] for f in fields)
        value = state[field]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
            return field, f"a scaler's {names[field]} is a {'positive ' if field == 'std' else ''}finite number"
    if scale == "standardize" and not state["std"] > 0:
        return "std", "a scaler's standard deviation is a positive finite number"
    if scale == "minmax" and not state["max"] >= state["min"]:
        return "max", "a scaler's greatest value is at least its least value"
    return None


def scaled(state, values):
    """Values (NumPy or TensorFlow float64) under the fitted state's scale."""
    if "std" in state:
        return (values - state["mean"]) / state["std"]
    if "max" in state:
        return (values - state["min"]) / ((state["max"] - state["min"]) or 1.0)
    return values


def transformed(options, values):
    """A numeric column's values before the fit: log1p (sign kept) when asked; NaN where missing."""
    if options["log1p"]:
        return np.sign(values) * np.log1p(np.abs(values))
    return values


def fill_value(options, count, total):
    """The fill of missing values: the mean of the `count` present training values (summing to `total`), or the
    spec's constant."""
    if options["fill"] == "mean":
        return float(total / count) if count else 0.0
    return float(options["fill"])


def bucket_edges(n, buckets, order_statistics):
    """Equal-frequency bucket edges of n training values: np.quantile's linear interpolation at q = i /
    buckets, from `order_statistics(k)` (the k-th smallest values, k sorted); distinct edges."""
    if not n:
        return []
    virtual = (n - 1) * (np.arange(1, buckets) / buckets)
    previous = np.floor(virtual).astype(np.int64)
    following = np.minimum(previous + 1, n - 1)
    wanted = np.unique(np.concatenate([previous, following]))
    found = np.asarray(order_statistics(wanted))
    low, high = found[np.searchsorted(wanted, previous)], found[np.searchsorted(wanted, following)]
    return [float(e) for e in np.unique(_lerp(low, high, virtual - previous))]


def _lerp(a, b, t):
    """a + (b - a) t as np.quantile computes it (from b's side for t >= 0.5), so the edges are its own."""
    difference = b - a
    out = a + difference * t
    return np.where(t >= 0.5, b - difference * (1 - t), out)


def bars_tokens(values):
    """BARS' numeric-as-category token (Criteo_x4): missing -> 0; x > 2 -> floor(ln(x)^2), else int(x)."""
    import pyarrow as pa

    values = np.where(np.isnan(values), 0.0, values)
    with np.errstate(divide="ignore", invalid="ignore"):
        squared = np.floor(np.log(np.where(values > 2, values, 3.0)) ** 2)
    tokens = np.where(values > 2, squared, np.trunc(values)).astype(np.int64)
    return pa.array(tokens.astype(str), pa.string())


# ---------------------------------------------------------------------------------------- the fit
class Distinct:
    """Distinct numbers with their counts, merged when the unmerged batches outgrow the merged (memory: the
    distinct values)."""

    def __init__(self):
        self.merged = (np.zeros(0), np.zeros(0, np.int64))
        self.pending, self.pending_rows = [], 0

    def add(self, values, counts=None):
        values, counts = np.unique(values, return_counts=True) if counts is None else (values, counts)
        self.pending.append((np.asarray(values, np.float64), np.asarray(counts, np.int64)))
        self.pending_rows += len(values)
        if self.pending_rows > max(self.merged[0].size, 2**16):
            self._merge()

    def _merge(self):
        if self.pending:
            values = np.concatenate([self.merged[0]] + [v for v, _ in self.pending])
            counts = np.concatenate([self.merged[1]] + [c for _, c in self.pending])
            unique, inverse = np.unique(values, return_inverse=True)
            self.merged = unique, np.bincount(inverse.reshape(-1), weights=counts, minlength=unique.size).astype(np.int64)
            self.pending, self.pending_rows = [], 0

    @property
    def values(self):
        self._merge()
        return self.merged[0]

    @property
    def counts(self):
        self._merge()
        return self.merged[1]

    @classmethod
    def of_pairs(cls, pairs):
        """One multiset of several (values, counts) pairs."""
        out = cls()
        for values, counts in pairs:
            out.add(values, counts)
        return out

    def order_statistics(self, positions):
        """The k-th smallest values (k from 0) of the multiset, for each k of `positions`."""
        return self.values[np.searchsorted(np.cumsum(self.counts), np.asarray(positions), side="right")]


class Moments:
    """A numeric column's fit, batch by batch: the present training values' count, sum, mean and squared
    deviations (pairwise update), the missing count, and (for buckets) the distinct values with counts."""

    def __init__(self, bucketed):
        self.count = self.total = self.mean = self.squares = 0.0
        self.low, self.high = np.inf, -np.inf
        self.missing = 0
        self.distinct = Distinct() if bucketed else None

    def add(self, values):
        missing = np.isnan(values)
        self.missing += int(missing.sum())
        present = values[~missing]
        if present.size:
            with np.errstate(over="ignore"):  # (values near float64's limit: an infinite deviation, as np.std's)
                part = (present.size, present.mean(), np.square(present - present.mean()).sum())
            self.count, self.mean, self.squares = combine((self.count, self.mean, self.squares), part)
            self.low, self.high = min(self.low, float(present.min())), max(self.high, float(present.max()))
            self.total += float(present.sum())
            if self.distinct is not None:
                self.distinct.add(present)

    def state(self, options, group):
        """The column's fitted state over every process of `group`."""
        if group.size > 1:
            self.gather(group)
        fill = fill_value(options, self.count, self.total)
        state = {"kind": "numeric", "log1p": options["log1p"], "fill": fill}
        n, mean, squares = combine((self.count, self.mean, self.squares), (self.missing, fill, 0.0))
        if options["scale"] == "standardize":
            std = float(np.sqrt(squares / n)) if n else 1.0
            state.update(mean=float(mean) if n else 0.0, std=std if std > 0 else 1.0)
        if options["scale"] == "minmax":
            low, high = (min(self.low, fill), max(self.high, fill)) if self.missing else (self.low, self.high)
            state.update(min=float(low) if n else 0.0, max=float(high) if n else 1.0)
        if options["buckets"]:
            if self.missing:
                self.distinct.add(np.asarray([fill]), np.asarray([self.missing]))
            state.update(buckets=options["buckets"],
                         edges=bucket_edges(int(n), options["buckets"], self.distinct.order_statistics))
        return state

    def gather(self, group):
        """Every process's moments together (each process: the same)."""
        parts = group.allgather((self.count, self.total, self.mean, self.squares, self.missing, self.low, self.high,
                                 None if self.distinct is None else (self.distinct.values, self.distinct.counts)))
        self.count = self.total = self.mean = self.squares = 0.0
        self.low, self.high = np.inf, -np.inf
        self.missing = 0
        for count, total, mean, squares, missing, low, high, _ in parts:
            self.count, self.mean, self.squares = combine((self.count, self.mean, self.squares), (count, mean, squares))
            self.total += total
            self.missing += missing
            self.low, self.high = min(self.low, low), max(self.high, high)
        if self.distinct is not None:
            self.distinct = Distinct.of_pairs([part[7] for part in parts])


PSI_MOVED = 0.25  # the population stability index past which a distribution moved (the credit-scoring rule)


def drift(state, moments):
    """How far a continued fit's new training values (`moments`) moved from a preset's numeric `state`, which
    the fit keeps: {"psi": p} over the preset's equal-frequency buckets (PSI = sum (a - e) ln(a / e), e =
    1 / buckets each; only where no edge collapsed, so each bucket held 1 / buckets of the preset's rows),
    {"mean_shift": z, "sd_ratio": r} (the new mean's distance from the preset's in its standard deviations,
    and the deviations' ratio) for a standardised column; "moved": whether it passes PSI 0.25, 0.5
    deviations or a ratio outside 0.5 .. 2. None when there is nothing to compare (no new value, another
    scale, buckets whose edges collapsed)."""
    n = moments.count + moments.missing
    if not n:
        return None
    if "edges" in state and moments.distinct is not None and len(state["edges"]) == state["buckets"] - 1:
        ids = bucket_ids(moments.distinct.values, state["edges"])
        shares = np.bincount(ids, weights=moments.distinct.counts, minlength=state["buckets"] + 1)[1:]
        shares[bucket_ids(np.asarray([state["fill"]]), state["edges"])[0] - 1] += moments.missing
        shares = np.maximum(shares / n, 1e-4)
        expected = 1.0 / state["buckets"]
        psi = float(np.sum((shares - expected) * np.log(shares / expected)))
        return {"psi": round(psi, 4), "moved": psi > PSI_MOVED}
    if "std" in state:
        count, mean, squares = combine((moments.count, moments.mean, moments.squares), (moments.missing, state["fill"], 0.0))
        shift, ratio = abs(mean - state["mean"]) / state["std"], float(np.sqrt(squares / count)) / state["std"]
        return {"mean_shift": round(float(shift), 4), "sd_ratio": round(ratio, 4),
                "moved": bool(shift > 0.5 or not 0.5 <= ratio <= 2.0)}
    return None


def combine(a, b):
    """(count, mean, sum of squared deviations) of two parts together (Chan, Golub and LeVeque)."""
    (na, ma, sa), (nb, mb, sb) = a, b
    n = na + nb
    if not nb:
        return a
    if not na:
        return b
    delta = mb - ma
    return n, ma + delta * nb / n, sa + sb + delta * delta * na * nb / n


# ---------------------------------------------------------------------------------------- batch form
def encoded(state, values):
    """(float32 values or int32 bucket ids [n], missing [n], clipped [n]) of transformed values (NaN where
    missing) under a fitted state."""
    missing = np.isnan(values)
    values = np.where(missing, state["fill"], values)
    if "edges" in state:
        return bucket_ids(values, state["edges"]), missing, np.zeros_like(missing)
    values = scaled(state, values)
    beyond = np.abs(values) > NUMERIC_LIMIT
    return np.clip(values, -NUMERIC_LIMIT, NUMERIC_LIMIT).astype(np.float32), missing, beyond


def bucket_ids(values, edges):
    """int32 ids 1..len(edges)+1 of values among sorted bucket edges."""
    return (1 + np.searchsorted(np.asarray(edges, np.float64), values, side="right")).astype(np.int32)


# ---------------------------------------------------------------------------------------- graph form
def parsed_numbers(text):
    """float64 of tf.string texts, NaN where empty or not a finite number ("abc", "inf", "1e400")."""
    import tensorflow as tf

    text = tf.strings.strip(text)
    valid = tf.strings.regex_full_match(text, r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
    values = tf.strings.to_number(tf.where(valid, text, "0"), tf.float64)
    return tf.where(valid & tf.math.is_finite(values), values, tf.constant(np.nan, tf.float64))


def graph_encoded(state, text):
    """(float32 values or int32 bucket ids, repairs [same shape] int32) of a numeric column's tf.string texts:
    a text that is not a finite number is filled as a missing value (one repair), a value beyond the
    contract's bound clipped (one repair)."""
    import tensorflow as tf

    values = parsed_numbers(text)
    repaired = tf.cast(tf.math.is_nan(values) & tf.not_equal(tf.strings.strip(text), ""), tf.int32)
    if state["log1p"]:
        values = tf.sign(values) * tf.math.log1p(tf.abs(values))
    values = tf.where(tf.math.is_nan(values), tf.constant(state["fill"], tf.float64), values)
    if "edges" in state:
        return graph_bucket_ids(values, state["edges"]), repaired
    values = scaled(state, values)
    repaired += tf.cast(tf.abs(values) > NUMERIC_LIMIT, tf.int32)
    return tf.cast(tf.clip_by_value(values, -NUMERIC_LIMIT, NUMERIC_LIMIT), tf.float32), repaired


def graph_bucket_ids(values, edges):
    """int32 ids 1..len(edges)+1 of float64 values among sorted bucket edges (np.searchsorted's "right"); no
    edge (one value on every training row): id 1."""
    import tensorflow as tf

    if not len(edges):
        return tf.ones_like(values, tf.int32)
    flat = tf.reshape(values, (1, -1))
    found = tf.searchsorted(tf.constant(np.asarray(edges, np.float64).reshape(1, -1)), flat, side="right") + 1
    return tf.reshape(tf.cast(found, tf.int32), tf.shape(values))
