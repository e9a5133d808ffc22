"""Fuzz of the scoring entry points: every generated request is a correct score or a one-line ZooError.

    KERAS_BACKEND=jax python benchmarks/fuzz_entry_points.py --cases 1000 [--families din rest] [--seed 0]
                                                             [--threads 8]

For each family (din, suan, lightsuan, rest, deres_p; small random-weight models from
tests/model_configs.py) and each of its entry points (`score` and Keras' `predict`, which the README's
examples call; `score_candidates` for the SUAN family; `encode` and `decode` for ReST), cases are
generated with numpy's random Generator by mutating one valid request (4 rows; 5 candidates for
score_candidates, 3 for decode):
  - invalid mutations, each of which must give a one-line ZooError: not a dict, missing/unknown keys,
    empty batch, batch sizes that disagree, float/str/bool/object/None/dict values, ragged lists, wrong
    rank (1-D candidates, 3-D features), histories too short or long, negative, too large or huge ids,
    negative or float times, NaN/inf/huge numerics, unsorted histories, the wrong M or none, candidate
    features that disagree on M, bad options (m2, rows_per_call) and bad decode states;
  - valid variants, whose scores must equal the valid request's (same rows and candidates, 2e-5):
    row subsets/repeats/permutations, candidate subsets, Python lists, tuples, other integer and float
    dtypes, non-contiguous and read-only arrays, shuffled keys, extra schema keys a part ignores, other
    m2 / use_cache / rows_per_call, a decode state value as a list;
  - valid values (the OOV id, the +-1e9 numeric bound, tiny numerics, empty histories, equal or huge
    times, a candidate id of 0 or exposed before the history): changed rows must score finite values
    in [0, 1], the other rows as before (times past 2038 are invalid under JAX without x64, which
    would truncate them: refused there).
Each case is classified: correct, refused (ZooError of one line) or a failure: traceback (any other
exception), multi_line (a ZooError of several lines), nan (a non-finite score), wrong (another shape
or score), accepted_bad (an invalid request scored), refused_valid (a valid request refused) or
mutated (the caller's arrays were changed in place; every case is compared with a deep copy).
Then (`--threads`, 8 by default; 0: not) as many cases again over all the family's entry points are run
from that many threads at once on the one model (a scoring service's threads), each classified the same
way (a case still running after 10 minutes counts as a traceback: a hang): row "N threads".
Prints one row of counts per family and entry point (every failure counted), the failures in KNOWN
(found in model files and reported there) and the first examples of the others; exits 1 on any
failure not in KNOWN. tests/fuzz_test.py runs 50 cases per family on every backend.

Then the data paths (`--surfaces`, spec cli raw by default; benchmarks/fuzz_data_paths.py): the spec engine
on mutated specs and logs, every output path of the command line pointed where it cannot write, and the
raw signature on mutated requests (TensorFlow), --cases each (the command line: its 36 fixed cases);
`operator` adds an operator's mistakes and accidents (own inputs as outputs, kills, full disks, labels,
histories, budgets, tampered fitted state, the plain Keras call: fixed cases, about 7 minutes).
"""

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAMILIES = ("din", "suan", "lightsuan", "rest", "deres_p")
ENTRY_POINTS = {
    "din": ("score", "predict"),
    "suan": ("score", "predict", "score_candidates"),
    "lightsuan": ("score", "predict", "score_candidates"),
    "rest": ("score", "predict", "encode", "decode"),
    "deres_p": ("score", "predict"),
}
# Failures the fuzz finds in files outside its owner's reach, reported there; (family, entry point,
# mutation) -> what is wrong. tests/fuzz_test.py checks each still reproduces (remove it once fixed).
KNOWN = {}  # (family, entry point, mutation): reason -- failures found and reported, not yet fixed
FAILURES = ("traceback", "multi_line", "nan", "wrong", "accepted_bad", "refused_valid", "mutated")
OUTCOMES = ("correct", "refused") + FAILURES
BATCH, CANDIDATES, DECODED = 4, 5, 3  # rows of the valid request; score_candidates' m1; decode's N
TOLERANCE = 2e-5


class Case:
    """One call: `request` (the dict the entry point validates), `extra` (score_candidates' options or
    decode's state), `kind` ("valid" or "invalid") and, for a valid case, the rows and candidates of the
    valid request it must reproduce (`changed`: positions of rows whose values differ: finite only)."""

    def __init__(self, mutation, request, extra=None, kind="invalid", rows=None, cols=None, changed=()):
        self.mutation, self.request, self.extra, self.kind = mutation, request, extra, kind
        self.rows, self.cols, self.changed = rows, cols, set(changed)


# ---------------------------------------------------------------------------- helpers on requests
def _copy(request):
    return {k: np.array(v) for k, v in request.items()}


def _id_keys(schema, request):
    ids = {f.key for f in schema.features if f.group != "num"}
    return [k for k in request if k in ids]


def _num_keys(request):
    return [k for k in request if k.startswith("num_")]


def _time_keys(request):
    return [k for k in request if k in ("hist_time", "cand_time")]


def _cand_keys(request):
    return [k for k in request if k.startswith("cand_")]


def _position(rng, value):
    return tuple(int(rng.integers(0, n)) for n in value.shape)


def _rows(request, rows):
    return {k: v[rows] for k, v in request.items()}


def _state_rows(state, rows):
    return None if state is None else {k: v[rows] for k, v in state.items()}


# ---------------------------------------------------------------------------- the generator
class Generator:
    """Cases for one entry point of one model, from its valid request."""

    def __init__(self, entry, schema, request, extra, full, rng, fixed_shapes=False):
        self.entry, self.schema, self.base, self.extra, self.rng = entry, schema, request, extra, rng
        self.full = full  # the valid request with every schema key (M = 1)
        self.fixed_shapes = fixed_shapes  # valid variants keep B and M (no new compiled shapes: CI)
        self.invalid = [m for m in self._invalid() if m is not None]
        self.valid = [m for m in self._valid() if m is not None]

    def case(self):
        """A random case: an invalid mutation or a valid variant, half and half (then one of its kind,
        uniformly, among those that apply to this entry point)."""
        rng = self.rng
        pool = self.invalid if rng.random() < 0.5 else self.valid
        for _ in range(1000):
            case = pool[int(rng.integers(0, len(pool)))]()
            if case is not None:
                return case
        raise RuntimeError(f"no applicable mutation for {self.entry}")

    def _key(self, keys):
        return keys[int(self.rng.integers(0, len(keys)))] if keys else None

    def _extra(self):
        return copy.deepcopy(self.extra)

    def _invalid(self):
        rng, schema, entry = self.rng, self.schema, self.entry
        cands = bool(_cand_keys(self.base))

        def invalid(name, change):
            def make():
                request = _copy(self.base)
                result = change(request)  # None: changed in place; False: not applicable; else a list
                if result is False:
                    return None
                return Case(name, request if result is None else result[0], self._extra())
            return make

        def not_a_dict(r):
            options = [list(r.values()), tuple(r.values()), None, "hist_item_id", 3, np.zeros(3), [r]]
            return [options[int(rng.integers(0, len(options)))]]  # the request replaced by this

        def missing_key(r):
            del r[self._key(list(r))]

        def unknown_key(r):
            name = ["foo", "hist_unknown", "cand_price", "num_", "Hist_item_id", "label"][int(rng.integers(0, 6))]
            r[name] = r[self._key(list(r))]

        def empty_batch(r):
            for k in r:
                r[k] = r[k][:0]

        def batch_mismatch(r):
            key = self._key(list(r))
            r[key] = r[key][:-1] if rng.random() < 0.5 else np.concatenate([r[key], r[key][:1]])

        def float_ids(r):
            key = self._key(_id_keys(schema, r))
            if key is None:
                return False
            r[key] = r[key].astype("float64") + (0.5 if rng.random() < 0.5 else 0.0)

        def odd_values(r):
            key = self._key(list(r))
            kind = int(rng.integers(0, 5))
            if kind == 0:
                r[key] = r[key].astype(str)
            elif kind == 1:
                r[key] = r[key].astype(bool)
            elif kind == 2:
                value = r[key].astype(object)
                value.flat[0] = None
                r[key] = value
            elif kind == 3:
                r[key] = None
            else:
                r[key] = {"values": r[key]}

        def ragged(r):
            key = self._key([k for k in r if r[k].ndim == 2 and r[k].shape[1] > 1])
            if key is None:
                return False
            rows = r[key].tolist()
            rows[int(rng.integers(0, len(rows)))].pop()
            r[key] = rows

        def wrong_rank(r):
            key = self._key(list(r))
            value = r[key]
            kind = int(rng.integers(0, 3))
            if kind == 0:
                r[key] = value[..., None]
            elif kind == 1 and value.ndim == 2:
                r[key] = value.reshape(-1) if rng.random() < 0.5 else value[:, 0]  # e.g. 1-D candidates
            elif kind == 1:
                r[key] = value[:, None, None]
            else:
                r[key] = value[0]  # no batch axis

        def history_length(r):
            hist = [k for k in r if k.startswith("hist")]
            if not hist:
                return False
            keys = hist if rng.random() < 0.5 else [self._key(hist)]
            longer = rng.random() < 0.5
            for key in keys:
                r[key] = np.concatenate([np.zeros_like(r[key][:, :2]), r[key]], axis=1) if longer else r[key][:, 1:]

        def bad_id(r):
            key = self._key(_id_keys(schema, r))
            if key is None:
                return False
            vocab = schema.feature(key).vocabulary_size
            bad = [-int(rng.integers(1, 2**31)), vocab, vocab + int(rng.integers(1, 1000)), 2**31 - 1, 2**40, -(2**40)]
            value = bad[int(rng.integers(0, len(bad)))]
            r[key] = r[key].astype("int64")
            r[key][_position(rng, r[key])] = value

        def bad_time(r):
            key = self._key(_time_keys(r))
            if key is None:
                return False
            kind = int(rng.integers(0, 3))
            if kind == 0:
                r[key] = r[key].astype("float64")
            elif kind == 1:
                r[key][_position(rng, r[key])] = -int(rng.integers(1, 2**40))
            else:  # past int64 (Python ints arrive as uint64)
                r[key] = r[key].astype("uint64")
                r[key][_position(rng, r[key])] = 2**63 + int(rng.integers(0, 2**40))

        def bad_numeric(r):
            key = self._key(_num_keys(r))
            if key is None:
                return False
            r[key] = r[key].astype("float64")
            bad = [np.nan, np.inf, -np.inf, 1.5e9, -1e30, 1e300]
            r[key][_position(rng, r[key])] = bad[int(rng.integers(0, len(bad)))]

        def unsorted_history(r):
            if "hist_time" not in r:
                return False
            times = r["hist_time"]
            for row in rng.permutation(len(times)):
                real = np.flatnonzero(times[row])
                if len(real) >= 2 and times[row, real[-1]] > times[row, real[0]]:
                    i, j = real[0], real[-1]
                    times[row, i], times[row, j] = times[row, j], times[row, i]
                    return None
            return False

        def wrong_m(r):
            if not cands or entry not in ("score", "predict"):
                return False
            m = int(rng.choice([0, 2, 3, 7]))
            for key in _cand_keys(r):
                r[key] = np.repeat(r[key][:, :1], m, axis=1)

        def no_candidates(r):
            if not cands or entry in ("score", "predict"):
                return False
            for key in _cand_keys(r):
                r[key] = r[key][:, :0]

        def cand_disagree(r):
            keys = _cand_keys(r)
            if len(keys) < 2:
                return False
            key = self._key(keys)
            r[key] = np.concatenate([r[key], r[key][:, :1]], axis=1) if rng.random() < 0.5 else r[key][:, :-1]

        mutations = [not_a_dict, missing_key, unknown_key, empty_batch, batch_mismatch, float_ids, odd_values,
                     ragged, wrong_rank, history_length, bad_id, bad_time, bad_numeric, unsorted_history,
                     wrong_m, no_candidates, cand_disagree]
        makers = [invalid(m.__name__, m) for m in mutations]
        if entry == "score_candidates":
            def bad_option():
                name = ["parallel_candidates", "rows_per_call"][int(rng.integers(0, 2))]
                bad = [0, -1, 2.5, "4", True, [2]][int(rng.integers(0, 6))]
                return Case("bad_option", _copy(self.base), {name: bad})
            makers.append(bad_option)
        if entry == "decode":
            makers.append(self._bad_state)
        return makers

    def _bad_state(self):
        """decode with a state that is not what encode returned (other type, keys, shapes, rows or values)."""
        rng, state = self.rng, self._extra()
        kinds = ["not_dict", "missing", "extra", "shape", "rows", "nonfinite", "strings", "time"]
        kind = kinds[int(rng.integers(0, len(kinds)))]
        if kind == "not_dict":
            state = [state["memory"], state["memory_valid"], state["hist_time"]]
        elif kind == "missing":
            del state[self._key(list(state))]
        elif kind == "extra":
            state["extra"] = state["memory"]
        elif kind == "shape":
            state["memory"] = state["memory"][:, 1:]
        elif kind == "rows":
            state = {k: v[:-1] for k, v in state.items()}  # fewer rows than the candidates
        elif kind == "nonfinite":
            state["memory"][_position(rng, state["memory"])] = [np.nan, np.inf, -np.inf][int(rng.integers(0, 3))]
        elif kind == "strings":
            state["memory"] = state["memory"].astype(str)
        else:
            state["hist_time"] = state["hist_time"].astype("float64") if rng.random() < 0.5 else -state["hist_time"]
        return Case(f"bad_state_{kind}", _copy(self.base), state)

    def _valid(self):
        rng, schema, entry = self.rng, self.schema, self.entry
        cands = entry in ("score_candidates", "decode")
        base_rows = np.arange(BATCH)

        def variant(name, change, rows=base_rows, cols=None, changed=()):
            request = _copy(_rows(self.base, rows))
            extra = self._extra()
            if entry == "decode":
                extra = _state_rows(extra, rows)
            if cols is not None:
                for key in _cand_keys(request):
                    request[key] = request[key][:, cols]
            result = change(request, extra)
            if result is False:
                return None
            if isinstance(result, tuple):
                request, extra = result
            return Case(name, request, extra, kind="valid", rows=rows, cols=cols, changed=changed)

        def same(r, extra):
            return None

        def rows():
            size = BATCH if self.fixed_shapes else int(rng.integers(1, BATCH + 1))
            picked = rng.choice(BATCH, size=size, replace=bool(rng.random() < 0.5))
            return variant("rows", same, rows=picked)

        def columns():
            if not cands:
                return None
            m = CANDIDATES if entry == "score_candidates" else DECODED
            size = m if self.fixed_shapes else int(rng.integers(1, m + 1))
            picked = rng.choice(m, size=size, replace=bool(rng.random() < 0.3))
            return variant("candidates", same, cols=picked)

        def lists(r, extra):
            kind = int(rng.integers(0, 2))
            return ({k: (v.tolist() if kind == 0 else tuple(map(tuple, v)) if v.ndim == 2 else tuple(v.tolist()))
                     for k, v in r.items()}, extra)

        def int_dtypes(r, extra):
            for key in _id_keys(schema, r):
                vocab = schema.feature(key).vocabulary_size
                choices = ["int64", "int16", "uint16", "uint8", "int8"]
                dtype = choices[int(rng.integers(0, len(choices)))]
                if vocab - 1 <= np.iinfo(dtype).max:
                    r[key] = r[key].astype(dtype)
            for key in _time_keys(r):
                r[key] = r[key].astype("int64" if rng.random() < 0.5 else "uint64")

        def float_dtypes(r, extra):
            keys = _num_keys(r)
            if not keys:
                return False
            for key in keys:
                r[key] = r[key].astype("float64")

        def layouts(r, extra):
            kind = int(rng.integers(0, 3))
            for key in list(r):
                value = r[key]
                if kind == 0:
                    value = np.asfortranarray(value)
                elif kind == 1:
                    value = np.repeat(value, 2, axis=0)[::2]  # a strided view
                else:
                    value = value.copy()
                    value.flags.writeable = False
                r[key] = value

        def shuffled_keys(r, extra):
            keys = list(r)
            return ({k: r[k] for k in rng.permutation(keys)}, extra)

        def superset(r, extra):
            if entry not in ("encode", "decode"):
                return False
            full = _copy(self.full)
            full.update(r)
            return full, extra

        def state_lists(r, extra):
            if entry != "decode":
                return False
            key = self._key(list(extra))
            extra[key] = extra[key].tolist()

        def options(r, extra):
            if entry != "score_candidates" or self.fixed_shapes:
                return False
            choices = [{"parallel_candidates": int(rng.integers(1, 6))}, {"use_cache": False},
                       {"rows_per_call": int(rng.integers(1, 4))}, {"parallel_candidates": 2, "use_cache": False}]
            return r, choices[int(rng.integers(0, len(choices)))]

        makers = [rows, columns]
        for name, change in (("lists", lists), ("int_dtypes", int_dtypes), ("float_dtypes", float_dtypes),
                             ("layouts", layouts), ("shuffled_keys", shuffled_keys), ("superset", superset),
                             ("options", options), ("state_lists", state_lists), ("identity", same)):
            makers.append(lambda name=name, change=change: variant(name, change))
        makers += [self._value_variant]
        return makers

    def _value_variant(self):
        """A valid request with other values in one row: that row scores in [0, 1], the others as before."""
        from zoo.schema import time_limit

        rng, schema = self.rng, self.schema
        request, extra = _copy(self.base), self._extra()
        row = int(rng.integers(0, BATCH))
        kinds = ["oov_ids", "numeric_bound", "tiny_numeric", "empty_history", "equal_times", "huge_times",
                 "zero_candidate", "candidate_before_history"]
        kind = kinds[int(rng.integers(0, len(kinds)))]
        hist = [k for k in request if k.startswith("hist_") and k != "hist_time"]
        if kind == "oov_ids":
            keys = _id_keys(schema, request)
            for key in rng.choice(keys, size=int(rng.integers(1, len(keys) + 1)), replace=False):
                request[key][row] = schema.feature(key).vocabulary_size - 1
        elif kind in ("numeric_bound", "tiny_numeric"):
            keys = _num_keys(request)
            if not keys:
                return None
            values = [1e9, -1e9] if kind == "numeric_bound" else [1e-38, -0.0, 1e-45]
            for key in keys:
                request[key][row] = values[int(rng.integers(0, len(values)))]
        elif kind == "empty_history":
            if not hist or "hist_time" not in request:
                return None
            for key in hist + ["hist_time"]:
                request[key][row] = 0
        elif kind == "equal_times":
            if "hist_time" not in request:
                return None
            times = request["hist_time"]
            times[row] = np.where(times[row] > 0, times[row].max(), 0)
        elif kind == "huge_times":
            if "hist_time" not in request and "cand_time" not in request:
                return None
            shift = int(rng.choice([2**31, 2**40, 2**61]))
            for key in _time_keys(request):
                request[key][row] = np.where(request[key][row] > 0, request[key][row] + shift, 0)
            if max(int(request[k].max()) for k in _time_keys(request)) > time_limit()[0]:
                return Case(kind, request, extra)  # past what the backend holds (JAX): must be refused
        elif kind == "zero_candidate":
            keys = [k for k in _cand_keys(request) if k != "cand_time"]
            if not keys:
                return None
            for key in keys:
                request[key][row] = 0
        else:
            if "cand_time" not in request:
                return None
            request["cand_time"][row] = 1
        return Case(kind, request, extra, kind="valid", rows=np.arange(BATCH), changed=[row])


# ---------------------------------------------------------------------------- the entry points
class EntryPoint:
    """Calls one entry point of a model and knows its valid request and what it returns."""

    def __init__(self, model, name, simulator, seed):
        self.model, self.name = model, name
        features, _ = simulator.sample(BATCH, seed=seed)
        self.full = features
        m = {"score_candidates": CANDIDATES, "decode": DECODED}.get(name)
        if m is not None:
            many, _ = simulator.sample(BATCH * m, seed=seed + 1)
            features = dict(features)
            for key in ("cand_item_id", "cand_category"):
                features[key] = many[key].reshape(BATCH, m)
            features["cand_time"] = features["cand_time"] + np.arange(m)[None, :]
        self.extra = None
        if name == "encode":
            self.request = {k: v for k, v in features.items() if k.startswith("hist")}
        elif name == "decode":
            self.request = {k: v for k, v in features.items() if not k.startswith("hist")}
            self.extra = model.encode(self.full)
        else:
            self.request = features
            self.extra = {} if name == "score_candidates" else None
        self.expected = self.call(self.request, self.extra)

    def call(self, request, extra):
        model = self.model
        if self.name == "score":
            return model.score(request)
        if self.name == "predict":
            return model.predict(request, verbose=0)
        if self.name == "score_candidates":
            return model.score_candidates(request, **extra)
        if self.name == "encode":
            return model.encode(request)
        return model.decode(extra, request)

    def check(self, output, case):
        """None when `output` is what the valid `case` must return, else the outcome's name and why."""
        if self.name == "encode":
            if not isinstance(output, dict) or "memory" not in output:
                return "wrong", f"encode returned {type(output).__name__}"
            scores, expected = np.asarray(output["memory"]), self.expected["memory"][case.rows]
        else:
            scores, expected = np.asarray(output), self.expected[case.rows]
            if case.cols is not None:
                expected = expected[:, case.cols]
        if not np.all(np.isfinite(scores)):
            return "nan", f"{int(np.sum(~np.isfinite(scores)))} non-finite values"
        if scores.shape != expected.shape:
            return "wrong", f"shape {list(scores.shape)}, expected {list(expected.shape)}"
        if self.name != "encode" and (scores.min() < 0 or scores.max() > 1):
            return "wrong", "a score outside [0, 1]"
        same = [i for i in range(len(expected)) if i not in case.changed]
        error = float(np.max(np.abs(scores[same] - expected[same]), initial=0.0))
        if error > TOLERANCE:
            return "wrong", f"differs from the valid request's scores by {error:.2e}"
        return None


def _same(a, b):
    """Deep equality of a caller's arguments before and after a call (types, dtypes, shapes, values;
    NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return _same(a.tolist(), b.tolist())
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float) and np.isnan(a):
        return bool(np.isnan(b))
    return a == b


def run_case(entry, case):
    """(outcome, detail) of one case."""
    from zoo.errors import ZooError

    before = copy.deepcopy((case.request, case.extra))
    try:
        output = entry.call(case.request, case.extra)
    except ZooError as error:
        outcome = ("refused", "") if "\n" not in str(error) and str(error) else ("multi_line", repr(str(error)))
        if outcome[0] == "refused" and case.kind == "valid":
            outcome = ("refused_valid", str(error))
    except Exception as error:  # noqa: BLE001 - any other exception is the failure being counted
        first = (str(error).strip().splitlines() or [""])[0]
        outcome = ("traceback", f"{type(error).__name__}: {first[:200]}")
    else:
        if case.kind == "invalid":
            outcome = ("accepted_bad", "scored without an error")
        else:
            outcome = entry.check(output, case) or ("correct", "")
    if not _same(before, (case.request, case.extra)):
        outcome = ("mutated", "the caller's arguments changed in place")
    return outcome


def build_family(family, seed=0):
    """(model, simulator) of a family at its small test size (tests/model_configs.py), random weights."""
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from tests.model_configs import SMALL
    from tests.testing import small_simulator

    keras.utils.set_random_seed(seed)
    simulator = small_simulator()
    return zoo.get(family, schema=simulator.schema, **SMALL[family]), simulator


def fuzz_family(family, cases, seed=0, fixed_shapes=False, built=None):
    """{entry point: {outcome: count}}, [(entry point, mutation, outcome, detail)] of the failures, for
    `cases` generated cases split over the family's entry points. `fixed_shapes`: valid variants keep
    the valid request's B and M and the default options (one compiled function per entry point).
    `built`: the family's (model, simulator) from `build_family`, when the caller has it."""
    model, simulator = built or build_family(family, seed)
    counts, failures = {}, []
    names = ENTRY_POINTS[family]
    for index, name in enumerate(names):
        entry = EntryPoint(model, name, simulator, seed=seed + 10)
        rng = np.random.default_rng([seed, FAMILIES.index(family), index])
        generator = Generator(name, model.schema, entry.request, entry.extra, entry.full, rng, fixed_shapes)
        tally = dict.fromkeys(OUTCOMES, 0)
        for _ in range(cases // len(names) + (index < cases % len(names))):
            case = generator.case()
            outcome, detail = run_case(entry, case)
            tally[outcome] += 1
            if outcome in FAILURES:
                failures.append((name, case.mutation, outcome, detail))
        counts[name] = tally
    return counts, failures


def fuzz_threads(family, cases, seed=0, threads=8, fixed_shapes=False, built=None, timeout=600):
    """{outcome: count}, [(entry point, mutation, outcome, detail)] of the failures, for `cases` generated
    cases over the family's entry points (in turn) run from `threads` threads at once on one model."""
    import threading

    model, simulator = built or build_family(family, seed)
    names = ENTRY_POINTS[family]
    entries, generators = [], []
    for index, name in enumerate(names):
        entry = EntryPoint(model, name, simulator, seed=seed + 10)
        rng = np.random.default_rng([seed, FAMILIES.index(family), index, threads])
        entries.append(entry)
        generators.append(Generator(name, model.schema, entry.request, entry.extra, entry.full, rng, fixed_shapes))
    work = [(entries[i % len(names)], generators[i % len(names)].case()) for i in range(cases)]
    results = [None] * len(work)

    def run(start):
        for i in range(start, len(work), threads):
            results[i] = run_case(*work[i])

    pool = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for thread in pool:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in pool:
        thread.join(timeout=max(deadline - time.monotonic(), 0))
    tally, failures = dict.fromkeys(OUTCOMES, 0), []
    for (entry, case), result in zip(work, results):
        outcome, detail = result or ("traceback", f"did not finish within {timeout} s (a hang)")
        tally[outcome] += 1
        if outcome in FAILURES:
            failures.append((f"{entry.name} in threads", case.mutation, outcome, detail))
    return tally, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="generated cases per family")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=20, help="failures printed with their detail")
    parser.add_argument("--threads", type=int, default=8, help="threads of the concurrent pass (0: none)")
    parser.add_argument("--surfaces", nargs="*", default=["spec", "cli", "raw"],
                        choices=["spec", "cli", "raw", "operator"],
                        help="data paths fuzzed after the families (benchmarks/fuzz_data_paths.py); none: --surfaces")
    args = parser.parse_args()
    import keras

    print(f"backend {keras.backend.backend()}, {args.cases} cases per family, seed {args.seed}")
    columns = ("cases",) + OUTCOMES

    def line(family, name, tally, seconds=""):
        cells = "".join(f"{tally[c]:>{len(c) + 2}}" for c in columns)
        return f"{family:<10}{name:<18}{cells}{seconds:>6}"

    print(f"{'family':<10}{'entry point':<18}" + "".join(f"{c:>{len(c) + 2}}" for c in columns) + f"{'s':>6}")
    failures, totals = [], dict.fromkeys(columns, 0)
    for family in args.families:
        start = time.perf_counter()
        built = build_family(family, args.seed)
        counts, found = fuzz_family(family, args.cases, args.seed, built=built)
        if args.threads:
            counts[f"{args.threads} threads"], concurrent = fuzz_threads(family, args.cases, args.seed,
                                                                         args.threads, built=built)
            found += concurrent
        seconds = f"{time.perf_counter() - start:.0f}"
        failures += [(family,) + f for f in found]
        for name, tally in counts.items():
            tally = dict(tally, cases=sum(tally.values()))
            for column in columns:
                totals[column] += tally[column]
            print(line(family, name, tally, seconds), flush=True)
    print(line("all", "", totals))
    known = [f for f in failures if f[:3] in KNOWN]
    for key, reason in KNOWN.items():
        count = sum(1 for f in known if f[:3] == key)
        if count:
            print(f"known (not fixed here): {count:>4} x {'.'.join(key[:2])} {key[2]}: {reason}")
    failures = [f for f in failures if f[:3] not in KNOWN]
    print(f"{len(failures)} failure(s) besides the known ones")
    for family, name, mutation, outcome, detail in failures[: args.examples]:
        print(f"FAILURE {family}.{name} {mutation}: {outcome}: {detail}")
    surfaces = [s for s in args.surfaces if s != "raw" or keras.backend.backend() == "tensorflow"]
    if surfaces:
        import fuzz_data_paths

        print(f"data paths ({', '.join(surfaces)}; the raw signature under TensorFlow only):")
        failures += fuzz_data_paths.run(surfaces, args.cases, args.seed, args.examples)
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
