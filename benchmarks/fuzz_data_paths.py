"""Fuzz of the data paths (issue #37): the spec engine, the command line's output paths and the raw
signature; and an operator's mistakes and accidents (reliability round 5). Every case must end in a correct
result or one clear line: no traceback, no signal, no silent wrong result. Run through
`benchmarks/fuzz_entry_points.py --surfaces spec cli raw [operator]` (or alone):

    python benchmarks/fuzz_data_paths.py --surfaces spec cli raw --cases 200 [--seed 0]
    python benchmarks/fuzz_data_paths.py --surfaces operator [--seed 0]     # about 7 minutes on 2 cores

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
- operator: fixed cases, each a fresh `python -m zoo` process (its own session; peak memory from wait4)
  but for the plain Keras call, in eight families (a row each):
  1. own input: no command writes over what it reads: score --out LOG (also through a symbolic link, a
     hard link and ./LOG relative), request --out LOG, spec draft --out LOG, evaluate --report LOG and
     --plots PRESET, fit/compare --out and tune --dir a folder holding LOG, score --history-from H --out H.
  2. kills: SIGKILL of the command's process at delays drawn from the seed's generator, one in each of
     KILLS parts of its measured run time: score --out NEW.csv (absent, or every row), export BASE/1
     (absent, or saved_model.pb and variables/; again once its TensorFlow child, which may outlive the
     kill, has ended), fit over a folder holding a first fit's preset (zoo.load reads the preset, whose
     config.json and model.weights.h5 are both the old or both the new ones, as metadata.json records);
     each rerun once (a killed run's temporary removed); compare --seeds 2 killed once then resumed: the
     leaderboard's models equal an uninterrupted run's (but for samples_per_second, scoring_us_per_row).
  3. full disks: score, export, evaluate --report, spec draft and request past a file size limit
     (RLIMIT_FSIZE, once their inputs are cached), evaluate --report /dev/full, `list` with stdout on
     /dev/full or closed.
  4. labels: spec draft on a label that is all 1, --positive naming every value, --label that is --user,
     --positive without --label, --columns naming one twice; fit with a label rule no row meets; evaluate
     on rows of one class; compare --later on a file without the label column.
  4b. leaks: spec draft of a log with a column filled on positive rows only, a copy of the label and a
     column agreeing with it on about 96% of rows, and of a log whose header names the label twice:
     correct = each left out of the spec and printed ("left out NAME"); fit of a spec naming each
     (refused, naming it), and of one marking the copy, read as a number, "known_before_label" (stopped by
     its validation AUC, naming it).
  5. histories: score --history-from the scored file, the same history file twice (also through a link),
     a history without the labels the preset's history reads; a history holding half the scored rows:
     correct = the scores of the history without them (6 decimals), each row counted once.
  6. budget: fit bst and lightsuan at sequence_length 4096, refused within BOUND_SECONDS and under
     BOUND_BYTES of peak memory; score of 3,000 rows at --batch-size 1 within SLOW_SCORE_SECONDS.
  7. tampered state: a preset copy's preprocessing.json edited, its sha256 in metadata.json recomputed
     (zoo/presets.py: of the file's bytes): counts as text, a token twice, integer tokens, a std of 0,
     fill "median", two of the three lists of bucket edges, 200-deep nesting; score and export
     --signature raw of it.
  8. keras call: `model({k: tensor})` of a small DIN with ids -1 and 10**6 and a NaN numeric: the scores
     of the request with the OOV id (vocabulary_size - 1) and 0 in their place, and one UserWarning
     counting them.
  Refused: exit status 2 and one "error: ..." line on stderr (naming the path where a write failed);
  multi_line: any other error output, or such a line that does not name the path. Every case must leave
  its inputs byte for byte (the log, later rows, spec, preset) and no output it did not complete (nor a
  `.<name>.tmp-*` beside it): silent otherwise. Unbounded: past a time or memory bound.

Prints a row of counts per surface (per family for the operator) and the first failures; exits 1 on any
failure.
"""

import argparse
import copy
import gzip
import json
import os
import re
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


# a Keras progress line ("13/13 - 2s - 87ms/batch"): a command's progress on stderr, not part of its refusal
PROGRESS = re.compile(r"\d+/\d+ - .*/(step|batch)$")


def error_lines(text):
    """The non-empty lines of a command's stderr, its progress lines left out."""
    return [line for line in text.strip().splitlines() if line.strip() and not PROGRESS.match(line)]


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
        err = error_lines(done.stderr)
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


# ----------------------------------------------------------------------------------------------- operator

OPERATOR_FAMILIES = ("own input", "kills", "full disks", "labels", "leaks", "histories", "budget", "tampered state",
                     "keras call")
BOUND_SECONDS, BOUND_BYTES = 60, 2 << 30  # a budget refusal: within a minute, under 2 GB of peak memory
SLOW_SCORE_SECONDS = 120  # 3,000 rows scored one row a batch
KILLS = 4  # kills of each command, at delays spread over its measured run time


def _first_line(error):
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error).strip() else ''}"


def _digest(path):
    from zoo.presets import file_sha256

    return file_sha256(path)


def _snapshot(paths):
    """{file: sha256} of every file of `paths` (files or folders; links followed): what a case must leave as it was."""
    found = {}
    for given in paths:
        given = Path(given)
        if given.is_dir():
            for folder, _, names in os.walk(given):
                for name in names:
                    found[os.path.join(folder, name)] = _digest(os.path.join(folder, name))
        elif given.exists():
            found[str(given)] = _digest(given)
    return found


def _leftovers(path):
    """The temporary files or folders of an output `path` (zoo.outputs: `.<name>.tmp-<pid>` beside it)."""
    import glob

    path = Path(path)
    return sorted(str(p) for p in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"))


def _written(before, keep, outputs):
    """Why a case wrote what it must not (None when it did not): a changed, removed or added file among `keep`
    (its inputs, snapshot `before`), an output of `outputs` left behind (an output that is also kept: only
    a temporary beside it)."""
    after = _snapshot(keep)
    changed = [p for p in before if after.get(p) != before[p]] + [p for p in after if p not in before]
    if changed:
        return f"changed {changed[0]}" + (f" and {len(changed) - 1} more" if len(changed) > 1 else "")
    kept = {os.path.realpath(p) for p in keep}
    for output in outputs:
        if os.path.realpath(output) not in kept and (os.path.exists(output) or os.path.islink(output)):
            held = sorted(os.listdir(output)) if os.path.isdir(output) else None
            return f"left {output}" + (f" (a folder holding {held})" if held is not None else "")
        if _leftovers(output):
            return f"left {_leftovers(output)[0]}"
    return None


class _Process:
    """`python -m zoo ARGV` started in its own session (its children are its process group), stdout and stderr
    read by threads (pipes: a file size limit does not reach them)."""

    def __init__(self, argv, env, cwd, preexec_fn=None, stdout=subprocess.PIPE):
        import threading

        import warnings

        self.argv = [str(a) for a in argv]
        self.start = time.perf_counter()
        with warnings.catch_warnings():  # (JAX's warning on a fork: the child runs a setrlimit or close, then exec)
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            self.popen = subprocess.Popen([sys.executable, "-m", "zoo", *self.argv], stdin=subprocess.DEVNULL,
                                          stdout=stdout, stderr=subprocess.PIPE, cwd=str(cwd), env=env,
                                          preexec_fn=preexec_fn, start_new_session=True)
        self.text = {"out": b"", "err": b""}
        self.threads = []
        for name, stream in (("out", self.popen.stdout), ("err", self.popen.stderr)):
            if stream is not None:
                thread = threading.Thread(target=self._drain, args=(name, stream), daemon=True)
                thread.start()
                self.threads.append(thread)
        self.status, self.seconds, self.rss, self.stragglers = None, None, 0, False

    def _drain(self, name, stream):
        self.text[name] = stream.read()

    def wait(self, timeout, linger=0):
        """Waits for the process (killed past `timeout`: status None) and reaps it with its peak memory; then
        waits up to `linger` seconds for the children it left (a killed export's TensorFlow child), killing
        those still running (`linger` None: leaves them to the caller). Returns self."""
        deadline = time.perf_counter() + timeout
        while True:
            pid, code, usage = os.wait4(self.popen.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(code)
                break
            if time.perf_counter() > deadline:
                self._kill()
                _, code, usage = os.wait4(self.popen.pid, 0)
                self.status = None
                break
            time.sleep(0.02)
        self.popen.returncode = os.waitstatus_to_exitcode(code)  # (reaped here: Popen must not wait again)
        self.seconds = time.perf_counter() - self.start
        self.rss = usage.ru_maxrss * 1024  # (KiB on Linux)
        self.stragglers = _end_group(self.popen.pid, linger) if linger is not None else None
        for thread in self.threads:
            thread.join(timeout=10 if linger is not None else 0)
        return self

    def _kill(self):
        """SIGKILL to the command's process alone, as an operator's `kill -9 PID`. (Not Popen.kill: it polls
        first, which reaps a process that just ended, and `wait`'s wait4 then finds no child.)"""
        import signal

        try:
            os.kill(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill_after(self, delay):
        time.sleep(max(delay, 0))
        self._kill()

    @property
    def out(self):
        return self.text["out"].decode("utf-8", "replace")

    @property
    def err(self):
        return error_lines(self.text["err"].decode("utf-8", "replace"))


def _end_group(pgid, linger=0):
    """Whether processes of group `pgid` outlived its leader; waits `linger` s for them, then kills them."""
    import contextlib
    import signal

    deadline, alive = time.perf_counter() + linger, False
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return alive
        alive = True
        if time.perf_counter() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.5)
            return alive
        time.sleep(0.2)


class _Operator:
    """The operator cases (reliability round 5), each a fresh `python -m zoo` process but for the plain Keras
    call: see `fuzz_operator`."""

    def __init__(self, fixture, seed):
        self.fixture = fixture
        self.rng = np.random.default_rng([seed, 5])
        self.folder = fixture.folder / "operator"
        self.folder.mkdir(exist_ok=True)
        self.env = dict(os.environ, ZOO_DATA_CACHE=str(fixture.folder / "operator-cache"))
        self.tally = {family: dict.fromkeys(OUTCOMES + ("unbounded",), 0) for family in OPERATOR_FAMILIES}
        self.failures = []
        self.preset, self.log, self.later = fixture.preset, fixture.log, fixture.later
        self.spec = str(fixture.spec_path)
        self.inputs = [self.log, self.later, self.spec, self.preset]

    # ------------------------------------------------------------------ helpers
    def scratch(self):
        return Path(tempfile.mkdtemp(dir=self.folder))

    def record(self, family, what, outcome, detail=""):
        self.tally[family][outcome] += 1
        if outcome in FAILURES + ("unbounded",):
            self.failures.append(("operator", f"{family}: {what}", outcome, detail))

    def zoo(self, argv, cwd=None, timeout=600, linger=0, **options):
        return _Process(argv, self.env, cwd or self.folder, **options).wait(timeout, linger)

    def write_rows(self, name, rows, header=None, drop=None, change=None):
        """A CSV of `rows` (lists of texts) under the operator folder; `drop`: a column left out; `change`:
        {column: function of the value}."""
        import csv

        header = list(header)
        keep = [i for i, h in enumerate(header) if h != drop]
        path = self.folder / name
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([header[i] for i in keep])
            for row in rows:
                row = list(row)
                for column, function in (change or {}).items():
                    row[header.index(column)] = function(row[header.index(column)])
                writer.writerow([row[i] for i in keep])
        return str(path)

    @staticmethod
    def read_rows(path):
        import csv

        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        return rows[0], rows[1:]

    def case(self, family, what, argv, expect="refused", *, keep=(), outputs=(), check=None, names=(),
             seconds=None, memory=None, cwd=None, timeout=600, **options):
        """Runs one command and records its outcome. `expect`: "refused" (exit status 2 and one "error: ..."
        line on stderr, naming one of `names` when given) or "correct" (exit status 0 and `check(process)`
        None, else why the result is wrong). The fixture's inputs and `keep` must be left byte for byte,
        `outputs` not left (nor a temporary beside them); `seconds` and `memory` bound the process."""
        keep = list(self.inputs) + list(keep)
        before = _snapshot(keep)
        process = self.zoo(argv, cwd=cwd, timeout=timeout, **options)
        outcome, detail = self.classify(process, expect, check, names)
        wrote = _written(before, keep, outputs)
        if wrote:
            outcome, detail = (outcome, f"{detail}; and it {wrote}") if outcome in FAILURES else ("silent", wrote)
        if process.status is None or (seconds and process.seconds > seconds) or (memory and process.rss > memory):
            outcome, detail = "unbounded", (f"{process.seconds:.0f} s, {process.rss / 2**20:,.0f} MiB peak "
                                            f"(bounds: {seconds or '-'} s, {(memory or 0) / 2**20:,.0f} MiB); "
                                            f"ended as {outcome} {detail}".strip())
        if process.stragglers and outcome not in FAILURES + ("unbounded",):
            outcome, detail = "silent", "left processes running after it ended"
        self.record(family, what, outcome, f"{detail} [python -m zoo {' '.join(process.argv)}]")
        return process

    @staticmethod
    def classify(process, expect, check=None, names=()):
        err, status = process.err, process.status
        one = len(err) == 1 and err[0].startswith("error: ")
        if status is None:
            return "unbounded", "killed past its timeout"
        if status < 0:
            return "signal", f"signal {-status}: {err[-1:] if err else ''}"
        if any("Traceback" in line for line in err):
            return "traceback", err[-1][:300]
        if expect == "refused":
            if status == 2 and one:
                if names and not any(str(name) in err[0] for name in names):
                    return "multi_line", f"one line, but it does not name {names[0]}: {err[0][:300]}"
                return "refused", ""
            if status == 0:
                return "silent", f"exit 0 where it must refuse: {(process.out.strip().splitlines() or [''])[-1][:200]}"
            return "multi_line", f"exit {status}: " + " | ".join(err[-3:])[:300]
        if status == 0:
            try:
                why = check(process) if check else None
            except Exception as error:  # noqa: BLE001  (exit 0 and a result that cannot be read)
                why = f"exit 0, but its result cannot be read: {_first_line(error)}"
            return ("silent", why) if why else ("correct", "")
        if status == 2 and one:
            return "silent", f"refused a valid command: {err[0][:300]}"
        return "multi_line", f"exit {status}: " + " | ".join(err[-3:])[:300]

    def score_rows(self, path):
        """{line: score} of a score CSV."""
        header, rows = self.read_rows(path)
        return {int(row[0]): float(row[1]) for row in rows}

    # ------------------------------------------------------------------ 1. no command writes over its input
    def own_input(self):
        family, preset, log, later, spec = "own input", self.preset, self.log, self.later, self.spec
        s = self.scratch()
        link, hard = s / "link.csv", s / "hard.csv"
        link.symlink_to(log)
        os.link(log, hard)
        for what, target, cwd in (("score --out LOG", log, None), ("score --out a symbolic link to LOG", link, None),
                                  ("score --out a hard link to LOG", hard, None),
                                  ("score --out ./LOG (relative)", "./" + Path(log).name, Path(log).parent)):
            self.case(family, what, ["score", preset, log, "--out", target], keep=[hard], outputs=[log, hard],
                      cwd=cwd)
        self.case(family, "request --out LOG", ["request", preset, log, "--rows", "4", "--out", log], outputs=[log])
        self.case(family, "spec draft LOG --out LOG", ["spec", "draft", log, "--label", "clicked", "--out", log],
                  outputs=[log])
        self.case(family, "evaluate --report LOG", ["evaluate", preset, "--data", log, "--report", log], outputs=[log])
        self.case(family, "evaluate --plots PRESET", ["evaluate", preset, "--data", later, "--plots", preset])
        import shutil

        for command, flag, extra in (("fit", "--out", ["--epochs", "1"]),
                                     ("compare", "--out", ["--seeds", "1", "--epochs", "1"]),
                                     ("tune", "--dir", ["--search", "k", "--max-trials", "1"])):
            held = self.scratch() / "run"
            held.mkdir()
            copy_ = held / "log.csv"
            shutil.copyfile(log, copy_)
            model = "lightsuan" if command == "tune" else "din"
            self.case(family, f"{command} {flag} a folder holding LOG",
                      [command, model, "--data", copy_, "--spec", spec, *extra, flag, held], keep=[held],
                      outputs=[held / "preset", held / "leaderboard.json"])
        history = s / "history.csv"
        shutil.copyfile(log, history)
        self.case(family, "score --history-from H --out H",
                  ["score", preset, later, "--history-from", history, "--out", history], keep=[history],
                  outputs=[history])

    # ------------------------------------------------------------------ 2. kills at random moments
    def delays(self, seconds, kills=KILLS):
        """`kills` delays, one in each of `kills` equal parts of the command's run time."""
        return [seconds * self.rng.uniform(i / kills, (i + 1) / kills) for i in range(kills)]

    def killed(self, argv, delay, linger=0, cwd=None):
        process = _Process(argv, self.env, cwd or self.folder)
        process.kill_after(delay)
        return process.wait(600, linger)

    def kills(self):
        family, preset, log = "kills", self.preset, self.log
        _, log_rows = self.read_rows(log)
        # score: NEW.csv absent, or every row
        measured = self.zoo(["score", preset, log, "--out", self.scratch() / "new.csv"])
        if measured.status != 0:
            self.record(family, "score (its uninterrupted run)", *self.classify(measured, "correct"))
            return

        def whole_scores(path):
            if not path.exists():
                return None
            _, rows = self.read_rows(path)
            return None if len(rows) == len(log_rows) else f"{path} holds {len(rows)} of {len(log_rows)} rows"

        last = None
        for delay in self.delays(measured.seconds):
            target = self.scratch() / "new.csv"
            before = _snapshot(self.inputs)
            process = self.killed(["score", preset, log, "--out", target], delay)
            why = whole_scores(target) or _written(before, self.inputs, [])
            self.record(family, f"score killed at {delay:.1f} of {measured.seconds:.1f} s ("
                        + ("written" if target.exists() else "absent") + ")", "silent" if why else "correct", why or "")
            last = target
        rerun = self.zoo(["score", preset, log, "--out", last])
        why = (self.classify(rerun, "correct")[1] or whole_scores(last) or
               (f"left {_leftovers(last)[0]}" if _leftovers(last) else None))
        self.record(family, "score rerun after a kill (a killed run's temporary removed)",
                    "silent" if why else "correct", why or "")

        # export: BASE/1 absent, or complete
        def whole_export(version):
            if not version.exists():
                return None
            if not (version / "saved_model.pb").is_file() or not (version / "variables").is_dir():
                return f"{version} is incomplete: {sorted(p.name for p in version.iterdir())}"
            return None

        measured = self.zoo(["export", preset, self.scratch() / "base" / "1"], linger=60)
        if measured.status != 0:
            self.record(family, "export (its uninterrupted run)", *self.classify(measured, "correct"))
        else:
            bases = []
            for delay in self.delays(measured.seconds):
                base = self.scratch() / "base"
                before = _snapshot(self.inputs)
                process = self.killed(["export", preset, base / "1"], delay, linger=None)
                now = whole_export(base / "1")  # the moment after the kill (its TensorFlow child may run on)
                process.stragglers = _end_group(process.popen.pid, 180)
                later_ = whole_export(base / "1")
                why = now or later_ or _written(before, self.inputs, [])
                note = (" (its TensorFlow child ran on after the kill" + (
                    ", and wrote the version)" if (base / "1").exists() else ")") if process.stragglers else
                    " (written)" if (base / "1").exists() else " (absent)")
                self.record(family, f"export killed at {delay:.1f} of {measured.seconds:.1f} s{note}",
                            "silent" if why else "correct", why or "")
                bases.append(base)
            base = next((b for b in bases if _leftovers(b / "1")), None) or next(
                (b for b in bases if not (b / "1").exists()), None)
            if base is not None:
                rerun = self.zoo(["export", preset, base / "1"], linger=60)
                why = (self.classify(rerun, "correct")[1] or whole_export(base / "1")
                       or (None if (base / "1").exists() else f"{base / '1'} absent after exit 0")
                       or (f"left {_leftovers(base / '1')[0]}" if _leftovers(base / "1") else None))
                self.record(family, "export rerun after a kill (a killed run's temporary removed)",
                            "silent" if why else "correct", why or "")

        self.fit_kills()
        self.compare_kill()

    def fit_kills(self):
        import shutil

        import zoo

        family, log, spec = "kills", self.log, self.spec
        first = self.scratch() / "existing"
        tiny = ["--set", "attention_units=(4,)", "--set", "mlp_units=(8,)"]
        command = ["fit", "din", "--data", log, "--spec", spec, "--epochs", "1"]
        done = self.zoo(command + tiny + ["--out", first])
        if done.status != 0:
            self.record(family, "fit (the first fit)", *self.classify(done, "correct"))
            return
        old = {name: _digest(first / "preset" / name) for name in ("config.json", "model.weights.h5")}
        copy_ = self.scratch() / "existing"
        shutil.copytree(first, copy_, symlinks=True)
        measured = self.zoo(command + ["--out", copy_])
        if measured.status != 0:
            self.record(family, "fit over a preset (its uninterrupted run)", *self.classify(measured, "correct"))
            return
        new_config = _digest(copy_ / "preset" / "config.json")

        def consistent(preset):
            missing = [name for name in ("config.json", "model.weights.h5", "metadata.json")
                       if not (preset / name).is_file()]
            if missing:
                return f"{preset}: {missing[0]} is missing"
            files = {name: _digest(preset / name) for name in ("config.json", "model.weights.h5")}
            recorded = json.loads((preset / "metadata.json").read_text())
            if files != old and not (files["config.json"] == new_config
                                     and files["model.weights.h5"] != old["model.weights.h5"]):
                which = {name: "old" if files[name] == old[name] else "new" for name in files}
                return f"{preset}: config.json is the {which['config.json']} one, model.weights.h5 the " \
                       f"{which['model.weights.h5']} one"
            if (recorded.get("config_sha256"), recorded.get("weights_sha256")) != (files["config.json"],
                                                                                 files["model.weights.h5"]):
                return f"{preset}/metadata.json records other checksums than its files'"
            try:
                zoo.load(str(preset))
            except Exception as error:  # noqa: BLE001
                return f"zoo.load({preset}): {_first_line(error)}"
            return None

        last = None
        for delay in self.delays(measured.seconds):
            folder = self.scratch() / "existing"
            shutil.copytree(first, folder, symlinks=True)
            before = _snapshot(self.inputs)
            self.killed(command + ["--out", folder], delay)
            why = consistent(folder / "preset") or _written(before, self.inputs, [])
            kept = "old" if not why and _digest(folder / "preset" / "config.json") == old["config.json"] else "new"
            self.record(family, f"fit over a preset killed at {delay:.1f} of {measured.seconds:.1f} s"
                        + ("" if why else f" ({kept} preset)"), "silent" if why else "correct", why or "")
            last = folder
        rerun = self.zoo(command + ["--out", last])
        if rerun.status == 2 and rerun.err and "--resume" in rerun.err[0]:  # killed after its epoch: resumable
            rerun = self.zoo(command + ["--resume", "--out", last])
        why = (self.classify(rerun, "correct")[1] or consistent(last / "preset")
               or (f"left {_leftovers(last / 'preset')[0]}" if _leftovers(last / "preset") else None))
        self.record(family, "fit rerun after a kill (a killed run's temporary removed)", "silent" if why else "correct",
                    why or "")

    def compare_kill(self):
        family = "kills"
        command = ["compare", "din", "--data", self.log, "--spec", self.spec, "--seeds", "2", "--epochs", "1"]
        whole = self.scratch() / "compare"
        measured = self.zoo(command + ["--out", whole])
        if measured.status != 0:
            self.record(family, "compare (its uninterrupted run)", *self.classify(measured, "correct"))
            return

        def models(folder):
            board = json.loads((folder / "leaderboard.json").read_text())
            return json.dumps([{k: v for k, v in m.items() if k not in ("samples_per_second", "scoring_us_per_row")}
                               for m in board["models"]], sort_keys=True)

        folder = self.scratch() / "compare"
        delay = measured.seconds * self.rng.uniform(0.1, 0.9)
        before = _snapshot(self.inputs)
        self.killed(command + ["--out", folder], delay)
        resumed = self.zoo(command + ["--out", folder])
        why = self.classify(resumed, "correct")[1] or _written(before, self.inputs, [])
        if not why and models(folder) != models(whole):
            why = f"leaderboard after a resume {models(folder)[:300]} != uninterrupted {models(whole)[:300]}"
        self.record(family, f"compare killed at {delay:.1f} of {measured.seconds:.1f} s, then resumed",
                    "silent" if why else "correct", why or "")

    # ------------------------------------------------------------------ 3. full disks, file size limits
    def warm(self, argv):
        """Runs a command once (its inputs read and cached) so that only its own output meets a size limit."""
        self.zoo(argv)

    def full_disks(self):
        family, preset, log, later = "full disks", self.preset, self.log, self.later
        limited = {"score --out": (["score", preset, log, "--out"], 2 << 10),
                   "export PATH": (["export", preset], 64 << 10),
                   "evaluate --report": (["evaluate", preset, "--data", later, "--report"], 1 << 10),
                   "spec draft --out": (["spec", "draft", log, "--label", "clicked", "--time", "ts", "--user",
                                         "user_id", "--item", "item_id", "--out"], 512),
                   "request --out": (["request", preset, later, "--rows", "4", "--out"], 512)}
        for name, (argv, limit) in limited.items():
            self.warm(argv + [self.scratch() / ("1" if name == "export PATH" else "out")])
            target = self.scratch() / ("base/1" if name == "export PATH" else "out")
            self.case(family, f"{name} past a {limit:,}-byte file size limit", argv + [target], outputs=[target],
                      names=[str(target)], preexec_fn=_file_size_limit(limit))
        self.case(family, "evaluate --report /dev/full", ["evaluate", preset, "--data", later, "--report", "/dev/full"],
                  names=["/dev/full"])
        with open("/dev/full", "wb") as full:
            self.case(family, "list > /dev/full", ["list"], names=["stdout"], stdout=full)
        self.case(family, "list with stdout closed", ["list"], stdout=subprocess.DEVNULL,
                  preexec_fn=lambda: os.close(1))

    # ------------------------------------------------------------------ 4. labels
    def labels(self):
        family, preset, log, spec = "labels", self.preset, self.log, self.spec
        header, rows = self.read_rows(log)
        ones = self.write_rows("all-ones.csv", rows, header, change={"clicked": lambda v: "1"})
        yes_no = self.write_rows("yes-no.csv", rows, header, change={"clicked": lambda v: "yes" if v == "1" else "no"})
        draft = ["spec", "draft"]
        for what, argv in (
                ("spec draft: a label column all 1", [ones, "--label", "clicked"]),
                ("spec draft: --positive naming every value", [yes_no, "--label", "clicked", "--positive", "yes,no"]),
                ("spec draft: --label user_id --user user_id", [log, "--label", "user_id", "--user", "user_id"]),
                ("spec draft: --positive without --label", [yes_no, "--positive", "yes"]),
                ("spec draft: --columns naming a column twice", [log, "--label", "clicked", "--columns",
                                                                  ",".join(["clicked", "clicked"] + header[2:])])):
            target = self.scratch() / "spec.json"
            self.case(family, what, draft + argv + ["--out", target], keep=[ones, yes_no], outputs=[target])
        rule = dict(self.fixture.spec, label={"column": "clicked", "op": "in", "value": ["Yes"]})
        rule_path = self.folder / "spec-yes.json"
        rule_path.write_text(json.dumps(rule))
        out = self.scratch() / "run"
        self.case(family, "fit: a label rule no row meets (in [\"Yes\"] on 0/1)",
                  ["fit", "din", "--data", log, "--spec", rule_path, "--epochs", "1", "--out", out], keep=[rule_path],
                  outputs=[out])
        later_header, later_rows = self.read_rows(self.later)
        one_class = self.write_rows("one-class.csv", later_rows, later_header, change={"clicked": lambda v: "0"})
        report = self.scratch() / "report.json"
        self.case(family, "evaluate: rows all of one class",
                  ["evaluate", preset, "--data", one_class, "--report", report], keep=[one_class], outputs=[report])
        unlabelled = self.write_rows("later-unlabelled.csv", later_rows, later_header, drop="clicked")
        out = self.scratch() / "compare"
        self.case(family, "compare --later: a file without the label column",
                  ["compare", "din", "--data", log, "--spec", spec, "--seeds", "1", "--epochs", "1", "--later",
                   unlabelled, "--out", out], keep=[unlabelled], outputs=[out])

    # ------------------------------------------------------------------ 4b. leaks
    def leaks(self):
        """Columns that reveal the label: left out by the draft (and printed), refused by fit on a spec that
        names them, a deliberate one (known_before_label) stopped by its validation AUC."""
        family, log = "leaks", self.log
        header, rows = self.read_rows(log)
        label, time_column = header.index("clicked"), header.index("ts")
        flip = self.rng.random(len(rows)) < 0.04  # a column agreeing with the label on about 96% of rows
        leaky_rows = [row + [row[time_column] if row[label] == "1" else "", row[label],
                             ("5" if row[label] == "1" else "1") if not flipped else ("1" if row[label] == "1" else "5")]
                      for row, flipped in zip(rows, flip)]
        leaky = self.write_rows("leaky.csv", leaky_rows, header + ["click_ts", "clicked_copy", "stars"])
        twice = self.write_rows("label-twice.csv", [row + [row[label]] for row in rows], header + ["clicked"])
        keys = ["--label", "clicked", "--user", "user_id", "--item", "item_id", "--time", "ts"]

        def left_out(target, names):
            def check(process):
                spec = json.loads(Path(target).read_text())
                kept = [name for name in names if name in spec["columns"]]
                unprinted = [name for name in names if f"left out {name}" not in process.out]
                return f"kept {kept}, not printed {unprinted}" if kept or unprinted else None
            return check

        for what, path, names in (("spec draft: filled on positives only, a copy, a 96% agreement", leaky,
                                   ["click_ts", "clicked_copy", "stars"]),
                                  ("spec draft: the label's column twice in the header", twice, ["clicked.1"])):
            target = self.scratch() / "spec.json"
            self.case(family, what, ["spec", "draft", path, *keys, "--out", target], expect="correct",
                      keep=[leaky, twice], check=left_out(target, names))
        for column, options in (("click_ts", {"role": "ctx"}), ("clicked_copy", {"role": "ctx"}),
                                ("stars", {"role": "num", "type": "numeric"}),
                                # a deliberate copy read as a number: DIN ranks the validation rows by it within
                                # 3 epochs on this small log (a timestamp on positives only, hashed, it does not)
                                ("clicked_copy", {"role": "num", "type": "numeric", "known_before_label": True})):
            spec = copy.deepcopy(self.fixture.spec)
            spec["columns"][column] = options
            spec_path = self.scratch() / "spec.json"
            spec_path.write_text(json.dumps(spec))
            out = self.scratch() / "run"
            deliberate = options.get("known_before_label", False)
            self.case(family, f"fit: a spec naming {column}" + (" (known_before_label: the AUC stop)" if deliberate
                                                                 else ""),
                      ["fit", "din", "--data", leaky, "--spec", spec_path, "--epochs", "3", "--out", out],
                      keep=[leaky, spec_path], outputs=[] if deliberate else [out], names=[column], timeout=900)

    # ------------------------------------------------------------------ 5. histories
    def histories(self):
        family, preset, log, later = "histories", self.preset, self.log, self.later
        header, rows = self.read_rows(log)
        later_header, later_rows = self.read_rows(later)
        out = self.scratch() / "scores.csv"
        self.case(family, "score LOG --history-from LOG", ["score", preset, log, "--history-from", log, "--out", out],
                  outputs=[out])
        self.case(family, "the same history file twice",
                  ["score", preset, later, "--history-from", log, "--history-from", log, "--out", out], outputs=[out])
        link = self.scratch() / "log.csv"
        link.symlink_to(log)
        self.case(family, "the same history file twice (a link to it)",
                  ["score", preset, later, "--history-from", log, "--history-from", link, "--out", out], outputs=[out])
        unlabelled = self.write_rows("history-unlabelled.csv", rows, header, drop="clicked")
        self.case(family, "a history without the label column (the preset's history reads labels)",
                  ["score", preset, later, "--history-from", unlabelled, "--out", out], keep=[unlabelled],
                  outputs=[out])
        half = len(later_rows) // 2
        earlier = self.write_rows("history-earlier.csv", rows[-half:], header)
        overlapping = self.write_rows("history-overlapping.csv", rows[-half:] + later_rows[:half], header)
        reference = self.zoo(["score", preset, later, "--history-from", earlier, "--out", self.scratch() / "ref.csv"])
        if reference.status != 0:
            self.record(family, "score --history-from (the non-overlapping part)", *self.classify(reference, "correct"))
            return
        expected = self.score_rows(reference.argv[-1])
        target = self.scratch() / "scores.csv"

        def same_scores(process):
            got = self.score_rows(target)
            if got.keys() != expected.keys():
                return f"lines {sorted(got)[:5]}... != {sorted(expected)[:5]}..."
            worst = max(abs(got[k] - expected[k]) for k in got)
            return None if worst <= 1e-6 + 1e-12 else (
                f"scores differ from the non-overlapping history's by up to {worst:.6f} (repeated rows counted twice?)")

        self.case(family, "a history overlapping the scored file by half its rows",
                  ["score", preset, later, "--history-from", overlapping, "--out", target], "correct",
                  keep=[earlier, overlapping], check=same_scores)

    # ------------------------------------------------------------------ 6. budget
    def budget(self):
        from tests.impression_logs import write_impression_log

        family, log = "budget", self.log
        long_spec = self.folder / "spec-4096.json"
        long_spec.write_text(json.dumps(dict(self.fixture.spec, sequence_length=4096)))
        for model in ("bst", "lightsuan"):
            out = self.scratch() / "run"
            self.case(family, f"fit {model} at sequence_length 4096",
                      ["fit", model, "--data", log, "--spec", long_spec, "--epochs", "1", "--out", out],
                      keep=[long_spec], outputs=[out], seconds=BOUND_SECONDS, memory=BOUND_BYTES, timeout=300)
        rows = self.folder / "later-3000.csv"
        write_impression_log(str(rows), rows=3000, seed=4, start="2024-03-20T00:00:00Z", days=2)
        target = self.scratch() / "scores.csv"

        def every_row(process):
            _, scored = self.read_rows(target)
            return None if len(scored) == 3000 else f"{len(scored)} of 3,000 rows scored"

        self.case(family, "score 3,000 rows at --batch-size 1",
                  ["score", self.preset, rows, "--batch-size", "1", "--out", target], "correct", keep=[rows],
                  check=every_row, seconds=SLOW_SCORE_SECONDS, timeout=SLOW_SCORE_SECONDS + 30)

    # ------------------------------------------------------------------ 7. tampered fitted state
    @staticmethod
    def tamper(state, how):
        fitted = state["fitted"]
        if how == "statistics counts as text":
            fitted["statistics:item_id"]["rows"] = [str(c) for c in fitted["statistics:item_id"]["rows"]]
        elif how == "a vocabulary with a duplicated token":
            fitted["category"]["tokens"][1] = fitted["category"]["tokens"][0]
        elif how == "integer tokens":
            fitted["device"]["tokens"] = list(range(1, len(fitted["device"]["tokens"]) + 1))
        elif how == "a numeric std of 0":
            state["spec"]["columns"]["price"]["scale"] = "standardize"
            fitted["price"].update(mean=fitted["price"]["fill"], std=0.0)
        elif how == "fill: \"median\"":
            fitted["price"]["fill"] = "median"
        elif how == "a missing bucket-edge list":
            fitted["statistics:user_id"]["edges"] = fitted["statistics:user_id"]["edges"][:2]
        elif how == "200-deep nesting":
            nested = "android"
            for _ in range(200):
                nested = [nested]
            fitted["device"]["tokens"] = nested
        return state

    TAMPERINGS = ("statistics counts as text", "a vocabulary with a duplicated token", "integer tokens",
                  "a numeric std of 0", "fill: \"median\"", "a missing bucket-edge list", "200-deep nesting")

    def tampered_state(self):
        """preprocessing.json edited and its sha256 in metadata.json recomputed (zoo/presets.py: the sha256 of the
        file's bytes), so that only the checks of the fitted state (datasets/fitted_checks.py) can refuse it."""
        import shutil

        family = "tampered state"
        for how in self.TAMPERINGS:
            copy_ = self.scratch() / "preset"
            shutil.copytree(self.preset, copy_)
            state = self.tamper(json.loads((copy_ / "preprocessing.json").read_text()), how)
            (copy_ / "preprocessing.json").write_text(json.dumps(state))
            metadata = json.loads((copy_ / "metadata.json").read_text())
            metadata["preprocessing_sha256"] = _digest(copy_ / "preprocessing.json")
            (copy_ / "metadata.json").write_text(json.dumps(metadata, indent=2))
            out = self.scratch() / "scores.csv"
            self.case(family, f"score: {how}", ["score", copy_, self.log, "--out", out], keep=[copy_], outputs=[out])
            version = self.scratch() / "base" / "1"
            self.case(family, f"export --signature raw: {how}", ["export", copy_, version, "--signature", "raw"],
                      keep=[copy_], outputs=[version])

    # ------------------------------------------------------------------ 8. the plain Keras call
    def keras_call(self):
        """`model({k: tensor})` (in this process) with an id of -1, an id of 10**6 and a NaN numeric: the scores of
        the same request with those ids replaced by the OOV id (vocabulary_size - 1) and the NaN by 0, and one
        UserWarning counting them (2 ids, 1 numeric)."""
        import warnings

        import keras

        import zoo
        from tests.model_configs import SMALL
        from zoo.errors import ZooError
        from tests.testing import small_simulator

        family = "keras call"
        zoo.configure_process()
        keras.utils.set_random_seed(0)
        simulator = small_simulator()
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        rng = np.random.default_rng(0)
        for weight in model.weights:  # tables of unit scale: every id moves the scores (at its init, by ~1e-6)
            if weight.path.startswith("embedding/"):
                weight.assign(rng.normal(size=weight.shape).astype("float32"))
        features, _ = simulator.sample(4, seed=7)
        size = {f.key: f.vocabulary_size for f in simulator.schema.features}
        bad = {k: np.array(v) for k, v in features.items()}
        good = {k: np.array(v) for k, v in features.items()}
        bad["cand_item_id"][0, 0], good["cand_item_id"][0, 0] = -1, size["cand_item_id"] - 1
        bad["user_user_id"][1], good["user_user_id"][1] = 10**6, size["user_user_id"] - 1
        bad["num_price"][2], good["num_price"][2] = np.nan, 0.0

        def call(request):
            return keras.ops.convert_to_numpy(model({k: keras.ops.convert_to_tensor(v) for k, v in request.items()}))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                expected = call(good)
                quiet = [str(w.message) for w in caught
                         if issubclass(w.category, UserWarning) and "repaired" in str(w.message)]
                caught.clear()
                got = call(bad)
                warned = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
            counted = [m for m in warned if "2 id(s)" in m and "1 non-finite" in m]
            if not np.all(np.isfinite(got)) or got.shape != expected.shape:
                outcome, detail = "silent", f"scores {got.ravel()[:4]}"
            elif np.abs(got - expected).max() > 1e-6:
                difference = np.abs(got - expected).max()
                outcome, detail = "silent", f"scores differ from the repaired request's by {difference:.2e}"
            elif len(counted) != 1 or quiet:
                outcome, detail = "silent", f"warnings {warned[:3]} (valid request: {quiet[:1]})"
            else:
                outcome, detail = "correct", ""
        except ZooError as error:
            outcome, detail = "silent", f"refused a call it should repair: {str(error)[:200]}"
        except Exception as error:  # noqa: BLE001
            outcome, detail = "traceback", _first_line(error)
        self.record(family, "model(tensors) with ids -1 and 10**6 and a NaN numeric", outcome, detail)


def fuzz_operator(fixture, seed):
    """({case family: {outcome: count}}, failures) of the operator cases (see the module docstring)."""
    operator = _Operator(fixture, seed)
    for family, method in zip(OPERATOR_FAMILIES, (operator.own_input, operator.kills, operator.full_disks,
                                                  operator.labels, operator.leaks, operator.histories, operator.budget,
                                                  operator.tampered_state, operator.keras_call)):
        start = time.perf_counter()
        try:
            method()
        except Exception:  # noqa: BLE001  (a harness error: counted, the other families still run)
            import traceback

            operator.record(family, "the harness", "traceback", traceback.format_exc().strip().splitlines()[-1][:300])
        operator.tally[family]["seconds"] = time.perf_counter() - start
    return operator.tally, operator.failures


def run(surfaces, cases, seed=0, examples=20, folder=None):
    """Prints a row per surface (the operator surface: a row per case family); returns the failures."""
    with tempfile.TemporaryDirectory(prefix="zoo-fuzz-data-") as scratch:
        fixture = Fixture(folder or scratch)
        operator = "operator" in surfaces
        columns = ("cases",) + OUTCOMES + (("unbounded",) if operator else ())
        width = 26 if operator else 10

        def row(name, tally, seconds):
            tally = dict(tally, cases=sum(tally.get(c, 0) for c in columns[1:]))
            cells = "".join(f"{tally.get(c, 0):>{len(c) + 2}}" for c in columns)
            return f"{name:<{width}}{cells}{seconds:>6.0f}"

        print(f"{'surface':<{width}}" + "".join(f"{c:>{len(c) + 2}}" for c in columns) + f"{'s':>6}", flush=True)
        failures = []
        for surface in surfaces:
            start = time.perf_counter()
            if surface == "operator":
                tallies, found = fuzz_operator(fixture, seed)
                for family, tally in tallies.items():
                    print(row(f"operator: {family}", tally, tally.pop("seconds", 0)), flush=True)
                failures += found
                continue
            if surface == "spec":
                tally, found = fuzz_spec(fixture, cases, seed)
            elif surface == "cli":
                tally, found = fuzz_cli(fixture, seed)
            else:
                tally, found = fuzz_raw(fixture, cases, seed)
            failures += found
            print(row(surface, tally, time.perf_counter() - start), flush=True)
        print(f"{len(failures)} failure(s)")
        for surface, what, outcome, detail in failures[:examples]:
            print(f"FAILURE {surface} {what}: {outcome}: {detail}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surfaces", nargs="+", default=list(SURFACES), choices=SURFACES + ("operator",),
                        help="default: spec cli raw (operator: its 67 fixed cases, about 7 minutes on 2 cores)")
    parser.add_argument("--cases", type=int, default=200, help="generated cases per surface (spec, raw)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=20)
    args = parser.parse_args()
    return 1 if run(args.surfaces, args.cases, args.seed, args.examples) else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
