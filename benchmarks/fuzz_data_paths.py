"""Fuzz of the data paths (issue #37): the spec engine, the command line's output paths and the raw
signature. Every case must end in a correct result or one clear line: no traceback, no signal, no silent
wrong result. Run through `benchmarks/fuzz_entry_points.py --surfaces spec cli raw` (or alone):

    python benchmarks/fuzz_data_paths.py --surfaces spec cli raw --cases 200 [--seed 0]

The fixture is a team's impression log (tests/impression_logs.py), its drafted spec, a DIN preset fitted
on it (1 epoch, tiny) and that preset's `raw` SavedModel, in a temporary folder.

- spec: `zoo.datasets.prepare(spec, log)` on a mutated spec (a value replaced by a wrong type, a
  negative, zero, NaN, infinity, 2**63, a bad date, deep nesting) or a mutated log (a bad cell: text
  where a number or time belongs, a year-3000 time, an empty label; a ragged row, a duplicate header, an
  empty file, a gzip copy, CRLF line ends, a byte-order mark). Correct: the rows are accounted (read =
  kept + repaired + dropped) and every produced array passes `Schema.validate`; or a one-line ZooError.
  Silent: a result whose arrays are out of the schema, or a bad cell kept without being counted.
- cli: each output a command writes (score --out, spec draft --out, request --out, evaluate --report and
  --plots, fit --out, calibrate --out, export PATH, compare --out) pointed at an existing folder (where a
  file belongs), a file (where a folder belongs), /dev/full, a path under a file and /proc (not
  writable), and fit, export (64 KB) and score (16 KB of a 28 KB CSV, once its inputs are cached) writing
  past a file size limit (a write that fails midway, as on a full disk), each in a fresh `python -m zoo`
  process. Correct: exit status 2 with one "error: ..." line on stderr naming the path. Signal: the
  process ended by one.
- raw: the raw SavedModel called from TensorFlow with a mutated request (a number that is not one, an
  unknown id, a bad request time, a history entry with a bad time, a wrong rank, disagreeing B, M or H,
  more scores than the budget). Correct: finite pctr in [0, 1] with what was repaired or unknown
  counted; or InvalidArgumentError whose text holds one "assertion failed: [...]" line. Silent: NaN
  scores, or a bad request time scored.

Prints a row of counts per surface and the first failures; exits 1 on any failure.
"""

import argparse
import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SURFACES = ("spec", "cli", "raw")
OUTCOMES = ("correct", "refused", "traceback", "multi_line", "silent", "signal")
FAILURES = ("traceback", "multi_line", "silent", "signal")


class Fixture:
    """The log, its spec, a fitted DIN preset and its raw export, built once in `folder`."""

    def __init__(self, folder):
        from tests.impression_logs import impression_spec, write_impression_log

        self.folder = Path(folder)
        self.log = write_impression_log(str(self.folder / "log.csv"), rows=300)
        self.later = write_impression_log(str(self.folder / "later.csv"), rows=60, seed=2,
                                          start="2024-03-20T00:00:00Z", days=2)
        self.spec = impression_spec(sequence_length=4)
        self.spec_path = self.folder / "spec.json"
        self.spec_path.write_text(json.dumps(self.spec))
        self._preset = None
        self._export = None

    @property
    def large_later(self):
        """2,000 later rows (a score CSV of about 28 KB)."""
        from tests.impression_logs import write_impression_log

        path = self.folder / "large_later.csv"
        if not path.exists():
            write_impression_log(str(path), rows=2000, seed=3, start="2024-03-20T00:00:00Z", days=2)
        return str(path)

    @property
    def preset(self):
        if self._preset is None:
            import zoo
            zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

            source = zoo.recipes.DataSource(self.log, spec=str(self.spec_path))
            run = zoo.recipes.train("din", source, str(self.folder / "run"), epochs=1, batch_size=64,
                                    hyperparameters={"attention_units": (4,), "mlp_units": (8,)}, log=None)
            self._preset = run["preset"]
        return self._preset

    @property
    def export(self):
        if self._export is None:
            import zoo
            zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

            path = self.folder / "export" / "1"
            zoo.export(self.preset, path, signature="raw")
            self._export = path
        return self._export


def one_line(text):
    return len(str(text).strip().splitlines()) == 1


# ----------------------------------------------------------------------------------------------- spec engine

BAD_VALUES = [-1, 0, "abc", None, 2**63, float("inf"), float("nan"), [], {}, True, "1997-13-45", 10**12,
              [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
SPEC_PATHS = [("seed",), ("sequence_length",), ("label", "column"), ("label", "op"), ("label", "value"),
              ("time", "format"), ("time", "column"), ("user",), ("item",), ("columns", "price", "fill"),
              ("columns", "price", "buckets"), ("columns", "price", "log1p"), ("columns", "title", "hash_buckets"),
              ("columns", "title", "embedding_dim"), ("columns", "category", "min_count"),
              ("columns", "device", "max_size"), ("columns", "user_id", "role"), ("history", "fields"),
              ("history", "feedback"), ("statistics", "keys"), ("statistics", "buckets"),
              ("statistics", "prior_rows"), ("split",), ("source", "delimiter"), ("negatives",)]
CELLS = {"clicked": ["", "abc", "2", "-1", "nan", "1e400"], "ts": ["", "abc", "-5", "3000-01-01T00:00:00Z",
                                                                   "1e20", "2024-13-45T00:00:00Z"],
         "price": ["abc", "inf", "-inf", "1e400", "nan", "", "-0", "1e40", "-1e300"], "item_id": ["", "\u00e9\u00e8", "x" * 5000],
         "user_id": ["", "user-999"], "category": [""], "title": ["\x00", ""], "device": ["", "tv"]}
# cells whose value is invalid: kept only if counted (a repair or a drop) or refused
MUST_COUNT = {("clicked", v) for v in ("", "abc", "-1", "nan", "1e400")} | {
    ("ts", v) for v in ("", "abc", "-5", "3000-01-01T00:00:00Z", "1e20", "2024-13-45T00:00:00Z")} | {
    ("price", v) for v in ("abc", "inf", "-inf", "1e400", "nan")}  # (1e40, -1e300: within +-1e9 after log1p)


def _spec_case(rng, fixture):
    """(description, spec, log path, must be counted) of one mutation."""
    spec = copy.deepcopy(fixture.spec)
    if rng.random() < 0.5:  # a bad spec value
        path = SPEC_PATHS[rng.integers(len(SPEC_PATHS))]
        value = BAD_VALUES[rng.integers(len(BAD_VALUES))]
        node = spec
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        return f"spec {'.'.join(path)}={str(value)[:20]}", spec, fixture.log, False
    lines = Path(fixture.log).read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    kind = rng.integers(8)
    out = Path(tempfile.mkdtemp(dir=fixture.folder)) / "log.csv"
    if kind <= 2:  # a bad cell (the impression log quotes titles: rewrite the row with the csv module)
        import csv
        import io

        rows = list(csv.reader(io.StringIO("".join(lines))))
        column = list(CELLS)[rng.integers(len(CELLS))]
        value = CELLS[column][rng.integers(len(CELLS[column]))]
        row = int(rng.integers(1, len(rows)))
        rows[row][rows[0].index(column)] = value
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        out.write_text(buffer.getvalue())
        return f"cell {column}={value[:12]!r}", spec, str(out), (column, value) in MUST_COUNT
    if kind == 3:
        out.write_text(lines[0] + lines[1].rstrip("\n") + ",extra\n" + "".join(lines[2:]))
        return "ragged row", spec, str(out), False
    if kind == 4:
        out.write_text(",".join(header + [header[0]]) + "\n" + "".join(line.rstrip("\n") + ",x\n" for line in lines[1:]))
        return "duplicate header", spec, str(out), False
    if kind == 5:
        out.write_text(["", lines[0]][rng.integers(2)])
        return "empty or header only", spec, str(out), False
    if kind == 6:
        gz = out.with_suffix(".csv.gz")
        gz.write_bytes(gzip.compress("".join(lines).encode()))
        return "gzip", spec, str(gz), False
    text = "".join(lines)
    out.write_bytes(("\ufeff" + text).encode() if rng.random() < 0.5 else text.replace("\n", "\r\n").encode())
    return "BOM or CRLF", spec, str(out), False


def fuzz_spec(fixture, cases, seed):
    from zoo import datasets
    from zoo.errors import ZooError

    rng = np.random.default_rng(seed)
    tally, failures = dict.fromkeys(OUTCOMES, 0), []
    for i in range(cases):
        what, spec, log, must_count = _spec_case(rng, fixture)
        cache = tempfile.mkdtemp(dir=fixture.folder)  # (a fresh cache: every case is built)
        try:
            processed = datasets.prepare(spec, log, verbose=False, cache_dir=cache)
            outcome, detail = _check_processed(processed, must_count)
        except ZooError as error:
            outcome, detail = ("refused", "") if one_line(error) else ("multi_line", str(error)[:300])
        except Exception as error:  # noqa: BLE001  (what the fuzz looks for)
            outcome, detail = "traceback", f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        tally[outcome] += 1
        if outcome in FAILURES:
            failures.append(("spec", what, outcome, detail))
    return tally, failures


def _check_processed(processed, must_count):
    """("correct" or "silent", detail) of a processed log: its account adds up, its arrays are in the schema."""
    schema = processed.schema
    for file, account in processed.info["accounting"].items():
        if not isinstance(account, dict) or "read" not in account:
            continue
        parts = sum(account.get(k, 0) for k in ("kept", "repaired", "dropped"))
        if account["read"] != parts:
            return "silent", f"{file}: read {account['read']} != kept + repaired + dropped {parts}"
    counted = 0
    for account in processed.info["accounting"].values():
        if isinstance(account, dict):
            counted += account.get("repaired", 0) + account.get("dropped", 0)
    for split in ("train", "validation", "test"):
        rows = processed.num_rows(split)
        if not rows:
            continue
        features, labels = processed.take(split, np.arange(rows))
        try:
            schema.validate(features, labels)
        except Exception as error:  # noqa: BLE001
            return "silent", f"{split}: {str(error)[:200]}"
    if must_count and not counted:
        return "silent", "a bad cell was kept and not counted"
    return "correct", ""


# ----------------------------------------------------------------------------------------------- command line

TARGETS = ("a folder", "a file", "/dev/full", "under a file", "/proc")


def _cli_cases(fixture):
    """[(description, argv, target kind)] for every output a command writes."""
    preset, log, later = fixture.preset, fixture.log, fixture.later
    spec = str(fixture.spec_path)
    tiny = ["--set", "attention_units=(4,)", "--set", "mlp_units=(8,)", "--epochs", "1"]
    file_outputs = {
        "score --out": lambda t: ["score", preset, later, "--out", t],
        "score --out (2,000 rows)": lambda t: ["score", preset, fixture.large_later, "--out", t],
        "spec draft --out": lambda t: ["spec", "draft", log, "--label", "clicked", "--time", "ts", "--user",
                                       "user_id", "--item", "item_id", "--out", t],
        "request --out": lambda t: ["request", preset, later, "--rows", "4", "--out", t],
        "evaluate --report": lambda t: ["evaluate", preset, "--data", later, "--report", t],
    }
    folder_outputs = {
        "evaluate --plots": lambda t: ["evaluate", preset, "--data", later, "--plots", t],
        "fit --out": lambda t: ["fit", "din", "--data", log, "--spec", spec, *tiny, "--out", t],
        "calibrate --out": lambda t: ["calibrate", preset, "--data", later, "--out", t],
        "export PATH": lambda t: ["export", preset, t, "--signature", "raw"],
        "compare --out": lambda t: ["compare", "din", "--data", log, "--spec", spec, "--seeds", "1", "--epochs", "1",
                                    "--out", t],
    }
    cases = []
    for name, argv in {**file_outputs, **folder_outputs}.items():
        if name.endswith("(2,000 rows)"):
            continue
        for target in TARGETS:
            if target == "a folder" and name in folder_outputs or target == "a file" and name in file_outputs:
                continue
            cases.append((f"{name} -> {target}", argv, target))
    for name, limit in (("fit --out", 64 << 10), ("export PATH", 64 << 10), ("score --out (2,000 rows)", 16 << 10)):
        cases.append((f"{name} -> past a {limit:,}-byte file size limit", {**file_outputs, **folder_outputs}[name],
                      f"size limit {limit}"))  # a write that fails midway, as on a full disk
    return cases


def _target(fixture, kind):
    scratch = Path(tempfile.mkdtemp(dir=fixture.folder))
    if kind == "a folder":
        (scratch / "out").mkdir()
        return str(scratch / "out")
    if kind == "a file":
        (scratch / "out").write_text("x")
        return str(scratch / "out")
    if kind == "/dev/full":
        return "/dev/full"
    if kind == "under a file":
        (scratch / "file").write_text("x")
        return str(scratch / "file" / "out")
    if kind.startswith("size limit"):
        return str(scratch / "out")
    return "/proc/zoo-fuzz/out"


def _file_size_limit(size):
    """A function setting RLIMIT_FSIZE to `size` bytes in the child: a write past it fails with EFBIG (Python
    ignores SIGXFSZ)."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def fuzz_cli(fixture, seed):
    tally, failures = dict.fromkeys(OUTCOMES, 0), []
    env = dict(os.environ, ZOO_DATA_CACHE=str(fixture.folder / "cli-cache"))
    for what, argv, kind in _cli_cases(fixture):
        command = [sys.executable, "-m", "zoo", *argv(_target(fixture, kind))]
        limit = _file_size_limit(int(kind.split()[-1])) if kind.startswith("size limit") else None
        if limit is not None:  # its inputs read and cached first: only its own output meets the limit
            subprocess.run([sys.executable, "-m", "zoo", *argv(str(fixture.folder / "warm-up"))], capture_output=True,
                           env=env, cwd=str(fixture.folder), timeout=900)
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(fixture.folder), timeout=900,
                              preexec_fn=limit)
        err = [line for line in done.stderr.strip().splitlines() if line.strip()]
        if done.returncode < 0:
            outcome, detail = "signal", f"signal {-done.returncode}: {err[-1:] if err else ''}"
        elif done.returncode == 2 and len(err) == 1 and err[0].startswith("error: "):
            outcome, detail = "refused", ""
        elif done.returncode == 0:
            outcome, detail = "silent", "exit 0 for an output it cannot write"
        elif any("Traceback" in line for line in err):
            outcome, detail = "traceback", err[-1][:200]
        else:
            outcome, detail = "multi_line", " | ".join(err[-3:])[:300]
        tally[outcome] += 1
        if outcome in FAILURES:
            failures.append(("cli", what, outcome, detail))
    return tally, failures


# ----------------------------------------------------------------------------------------------- raw signature

def fuzz_raw(fixture, cases, seed):
    import tensorflow as tf

    from zoo.datasets import Preprocessor
    from zoo.datasets.spec import DataSpec
    from zoo.serving.raw import input_names
    from zoo.serving.request import build_request

    state = Preprocessor.from_preset(fixture.preset).state
    body, _ = build_request(state, fixture.later, 4)
    base = {k: np.asarray(v, dtype=object) for k, v in body["inputs"].items()}  # (object: no fixed text width)
    names = input_names(DataSpec.read(state["spec"]))
    loaded = tf.saved_model.load(str(fixture.export))
    function = loaded.signatures["raw"]
    rng = np.random.default_rng(seed)
    by_kind = {}
    for name, (column, kind) in names.items():
        by_kind.setdefault(kind, []).append((name, column))
    numeric = [name for name, column in by_kind.get("row", []) if state["spec"]["columns"].get(column, {}).get("type")
               == "numeric"]
    time_name = next(n for n, (c, k) in names.items() if k == "time")
    history = [n for n, (c, k) in names.items() if k == "history"]
    history_time = next(n for n in history if names[n][0] == state["spec"]["time"]["column"])
    cand = [n for n, (c, k) in names.items() if k == "cand"]
    tally, failures = dict.fromkeys(OUTCOMES, 0), []
    for i in range(cases):
        request = {k: v.copy() for k, v in base.items()}
        kind = rng.integers(9)
        must = None  # "repaired", "unknown", "cut" or "refused"
        if kind == 0 and numeric:
            value = ["abc", "inf", "-inf", "1e400", "nan", "1e-400", "", "0x10", " 3", "1e40"][rng.integers(10)]
            request[numeric[0]][rng.integers(len(request[numeric[0]]))] = value
            what, must = f"numeric {value!r}", "repaired" if value in ("abc", "inf", "-inf", "1e400", "nan", "0x10") else None
        elif kind == 1:
            value = ["", "-5", "1e20", "abc", "9" * 20, "2600-01-01T00:00:00Z", "2024-13-45T00:00:00Z"][rng.integers(7)]
            request[time_name][rng.integers(len(request[time_name]))] = value
            what, must = f"request time {value!r}", "refused"
        elif kind == 2:
            key = cand[0]
            request[key][rng.integers(request[key].shape[0]), 0] = "never-seen-" + str(i)
            what, must = "unknown candidate", "unknown"
        elif kind == 3:
            row = rng.integers(request[history_time].shape[0])
            value = ["abc", "", "-5", "3000-01-01T00:00:00Z"][rng.integers(4)]
            if request[history_time].shape[1]:
                request[history_time][row, 0] = value
            what = f"history time {value!r}"
        elif kind == 4:
            key = list(request)[rng.integers(len(request))]
            request[key] = request[key].reshape(-1) if request[key].ndim == 2 else request[key][:, None]
            what, must = f"rank of {key}", "refused"
        elif kind == 5:
            key = list(request)[rng.integers(len(request))]
            request[key] = request[key][:-1]
            what, must = f"B of {key}", "refused"
        elif kind == 6 and len(history) > 1:
            request[history[-1]] = request[history[-1]][:, :-1] if request[history[-1]].shape[1] else \
                np.full((request[history[-1]].shape[0], 1), "", dtype=object)
            what, must = "H disagrees", "refused"
        elif kind == 7:
            request = {k: np.repeat(v, 20_000, axis=0) for k, v in request.items()}
            what, must = "80,000 rows (past the request budget)", "refused"
        else:
            what = "valid"
        tensors = {k: tf.constant(v) for k, v in request.items()}
        try:
            out = function(**tensors)
            pctr = out["pctr"].numpy()
            counts = {k: int(np.sum(out[k].numpy())) for k in ("repaired", "unknown_ids", "history_cut") if k in out}
            if not np.all(np.isfinite(pctr)) or pctr.min() < 0 or pctr.max() > 1:
                outcome, detail = "silent", f"pctr {pctr.ravel()[:4]}"
            elif must == "refused":
                outcome, detail = "silent", "served a request it should refuse"
            elif must == "repaired" and not counts.get("repaired"):
                outcome, detail = "silent", f"not counted: {counts}"
            elif must == "unknown" and not counts.get("unknown_ids"):
                outcome, detail = "silent", f"not counted: {counts}"
            else:
                outcome, detail = "correct", ""
        except tf.errors.InvalidArgumentError as error:
            lines = [line for line in str(error).splitlines() if "assertion failed: [" in line]
            if len(lines) == 1:
                outcome, detail = ("refused", "") if must == "refused" else ("silent", f"refused: {lines[0][:200]}")
            else:
                outcome, detail = "traceback", str(error).strip().splitlines()[0][:200]
        except Exception as error:  # noqa: BLE001
            outcome, detail = "traceback", f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        tally[outcome] += 1
        if outcome in FAILURES:
            failures.append(("raw", what, outcome, detail))
    return tally, failures


def run(surfaces, cases, seed=0, examples=20, folder=None):
    """Prints a row per surface; returns the failures."""
    with tempfile.TemporaryDirectory(prefix="zoo-fuzz-data-") as scratch:
        fixture = Fixture(folder or scratch)
        columns = ("cases",) + OUTCOMES
        print(f"{'surface':<10}" + "".join(f"{c:>{len(c) + 2}}" for c in columns) + f"{'s':>6}", flush=True)
        failures = []
        for surface in surfaces:
            start = time.perf_counter()
            if surface == "spec":
                tally, found = fuzz_spec(fixture, cases, seed)
            elif surface == "cli":
                tally, found = fuzz_cli(fixture, seed)
            else:
                tally, found = fuzz_raw(fixture, cases, seed)
            tally = dict(tally, cases=sum(tally.values()))
            failures += found
            print(f"{surface:<10}" + "".join(f"{tally[c]:>{len(c) + 2}}" for c in columns)
                  + f"{time.perf_counter() - start:>6.0f}", flush=True)
        print(f"{len(failures)} failure(s)")
        for surface, what, outcome, detail in failures[:examples]:
            print(f"FAILURE {surface} {what}: {outcome}: {detail}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surfaces", nargs="+", default=list(SURFACES), choices=SURFACES)
    parser.add_argument("--cases", type=int, default=200, help="generated cases per surface (spec, raw)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=20)
    args = parser.parse_args()
    return 1 if run(args.surfaces, args.cases, args.seed, args.examples) else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
