"""The zoo's command line: `python -m zoo list | fit | evaluate | score | spec | request | reproduce | tune | export |
demo`.

Every command answers `--help` (without importing TensorFlow). A bad argument exits with status 2 and
one line on stderr. The commands are quiet: TensorFlow's start-up logs and the warnings a user cannot
act on are filtered (`--verbose` shows everything); progress bars know their totals.
"""

import argparse
import contextlib
import os
import sys

from zoo.native_logs import is_noise

# Python warnings the user cannot act on, by their message (a regular expression matched at its start).
_WARNINGS = (
    # Keras' fit passes shuffle=True by default; the zoo's pipelines shuffle the training split themselves.
    r"`shuffle=True` was passed, but will be ignored since the data `x` was provided as a tf\.data\.Dataset",
    # recipes.fit runs a fixed number of steps over repeated data; the end of a validation pass is expected.
    r"Your input ran out of data; interrupting training",
    # Attention over a single key (e.g. a profile of one user feature) is a softmax over one entry by design.
    r"You are using a softmax over axis -?\d+ of a tensor of shape .*\. This axis has size 1\.",
    # JAX without x64 holds the int64 unix seconds as int32; the models use time differences (DESIGN.md).
    r"Explicitly requested dtype int64( requested in \w+)? is not available, and will be truncated to dtype int32",
)


def _is_noise(line):
    """TensorFlow's start-up lines (zoo/native_logs.py NOISE), which the command line hides unless --verbose."""
    return is_noise(line)


def _filter_native_stderr():
    """Routes file descriptor 2 (what C++ libraries write to) through a thread that drops TensorFlow's start-up
    lines (`_is_noise`) and passes every other line on at once; Python's own sys.stderr keeps the real stderr."""
    import atexit
    import threading

    original = os.dup(2)
    sys.stderr.flush()
    sys.stderr = open(os.dup(original), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace")
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        with open(read_end, "rb") as lines:
            for line in iter(lines.readline, b""):
                if not _is_noise(line.decode("utf-8", "replace")):
                    os.write(original, line)

    thread = threading.Thread(target=forward, name="zoo-stderr-filter", daemon=True)
    thread.start()

    def restore():  # closes the pipe's last write end: the thread reads what is left, then stops
        os.dup2(original, 2)
        thread.join(timeout=5)

    atexit.register(restore)


def _quiet():
    """The command line's default: before TensorFlow is imported, keep its C++ logs to errors, filter its
    start-up lines, the warnings in `_WARNINGS` and AutoGraph's fallback notice (nothing else: errors always
    show)."""
    import logging
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for message in _WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    # AutoGraph's 4-line "could not transform ... run it as-is" (it could not write its temporary file: a
    # full disk, a size limit): the function runs as written, which the zoo's graph functions allow
    logging.getLogger("tensorflow").addFilter(
        lambda record: not record.getMessage().startswith("AutoGraph could not transform"))
    _filter_native_stderr()


def _list(args):
    import zoo

    rows = zoo.list_models()
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        parameters = f"{row['parameters']:,}" if row["parameters"] else "-"
        print(f"{row['name']:<{width}}  {parameters:>10} params  {row['description']}")
        print(f"{'':<{width}}  {'':>10}         {row['paper']}")
        print(f"{'':<{width}}  {'':>10}         presets: {', '.join(row['presets']) or '-'}; "
              f"signatures: {', '.join(row['signatures'])}")
    print()
    presets = zoo.list_presets()
    width = max(len(row["preset"]) for row in presets)
    for row in presets:
        auc = (row["metrics"] or {}).get("test_auc")
        score = f"test AUC {auc:.3f}" if auc is not None else ""
        print(f"{row['preset']:<{width}}  {row['model']:<15} {score:<15} {row['description']}")


def _demo(args):
    """The main job on the simulator: LightSUAN distilled from SUAN, parallel candidate scoring, a KerasTuner
    search, a preset, and a SavedModel called from a TensorFlow-only process."""
    from zoo import demo

    demo.run(rows=args.rows, epochs=args.epochs, out=args.out, seed=args.seed)


def _override(text):
    """`--set key=value`: the value is a Python literal when it parses as one (4, 0.1, (64, 32)) or nan/inf,
    else a string. Values are never converted further: building the model checks each against its range
    (zoo.hyperparameters), so `--set window_size=eight` is refused in one line naming window_size."""
    import ast

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"bad override '{text}': write key=value (e.g. depth=4)")
    key, value = text.split("=", 1)
    if not key.strip():
        raise argparse.ArgumentTypeError(f"bad override '{text}': the key before '=' is empty")
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if value.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
            value = float(value)  # refused by the range check, which names the key
    return key.strip(), value


def _source(args):
    """The run's rows (zoo.recipes.DataSource) from the data flags: --data, --path, --protocol,
    --data-option, --spec, --rows, --seed."""
    from zoo.recipes.data_source import DataSource

    return DataSource(args.data, path=args.path, protocol=args.protocol, options=dict(args.data_options or []),
                      spec=getattr(args, "spec", None), rows=args.rows, limit=getattr(args, "rows_given", False),
                      seed=args.seed, **({"history_from": tuple(args.history_from)}
                                         if args.command == "fit" and args.history_from else {}))


def _progress():
    from zoo.recipes.train import progress  # (zoo.recipes loads a backend: imported when a command runs)

    return progress()


def _training_options(args):
    """The recipe fields the command line's training flags set (zoo.recipes.train.training_recipe)."""
    return {"epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": getattr(args, "learning_rate", None),
            "seed": args.seed, "table_update": getattr(args, "table_update", None),
            "clipnorm": getattr(args, "clipnorm", None)}


def _fit(args):
    """Train a registered model by a recipe (its batch size, batching, trainer and schedule); write a
    preset, a JSON report of the validation and test splits and figures."""
    from zoo.recipes.train import train

    train(args.model, _source(args), args.out, recipe=args.recipe, epochs=args.epochs, batch_size=args.batch_size,
          learning_rate=args.learning_rate, table_update=args.table_update, clipnorm=args.clipnorm,
          hyperparameters=dict(args.set or []),
          calibrate=args.calibrate,
          resume=args.resume, warm_start=args.from_preset,
          distribution_options={"strategy": args.strategy, "devices": args.devices, "model_axis": args.model_axis,
                                "shard_dense": args.shard_dense, "batch_scaling": args.batch_scaling})


def _reproduce(args):
    """Run (or complete) a paper's table on your data: resumable cells, mean ± s.d., CIs, bootstrap."""
    from zoo.recipes.reproduce import reproduce

    summary = reproduce(
        args.table, args.path, args.out, data=args.data, seeds=tuple(args.seeds) if args.seeds else None,
        grid=not args.no_grid, smoke=args.smoke, max_rows=args.max_rows, rows=args.row, epochs=args.epochs,
        data_options=dict(args.data_options or []),
    )
    from zoo.recipes.reproduce import markdown

    print(markdown(summary))


def _compare(args):
    """Train every model (seeds x the recipe, early stopping) and the trivial baselines on the same split of
    your log; print and write a leaderboard (zoo.recipes.compare), resumable."""
    import zoo
    from zoo.recipes.compare import markdown

    board = zoo.recipes.compare(args.models, args.data, args.spec, args.out, seeds=args.seeds, epochs=args.epochs,
                                batch_size=args.batch_size, learning_rate=args.learning_rate, clipnorm=args.clipnorm,
                                later=args.later,
                                history_from_log=not args.no_history_from_log, recipe=args.recipe)
    print(markdown(board))
    print(f"leaderboard.md, leaderboard.json and leaderboard.png in {args.out}")


def _raw_file(args, preprocessor):
    """The raw file a preset's preprocessor reads: --data FILE for a spec preset; --path for a reader's
    preset (--data naming its data set). Flags that contradict the preset are refused in one line."""
    from zoo.errors import ZooError

    if preprocessor.spec is not None:
        if args.data == "simulator":
            raise ZooError(f"{args.preset} was trained on a data spec: give --data FILE (rows in the same format)")
        if args.path:
            raise ZooError("with a preset trained on a data spec, --data is the file itself (no --path)")
        return args.data
    state = preprocessor.state
    if args.data != state["dataset"]:
        raise ZooError(f"{args.preset} was fitted on {state['dataset']} data, not {args.data}")
    if args.protocol not in (None, state["protocol"]) or args.data_options:
        raise ZooError(f"{args.preset} fixes the protocol and options of its data ({state['protocol']}, "
                       f"{state['options']}): drop --protocol/--data-option")
    if not args.path:
        raise ZooError(f"--data {args.data} needs --path (the raw file or folder)")
    return args.path


def _reads_raw_rows(args, model):
    """Whether a command reads --data through the preset's preprocessor (else: the simulator, or a reader
    preset's data set named without its contract: the split read by _data)."""
    from zoo.errors import ZooError

    preprocessor = model.preprocessor
    raw = preprocessor is not None and (preprocessor.spec is not None or args.data != "simulator")
    if getattr(args, "history_from", None) and not (raw and preprocessor.spec is not None):
        raise ZooError("--history-from reads earlier logs through a preset trained on a data spec; this one has none")
    return raw


def _calibrate(args):
    """Fit post-hoc calibration (Platt or temperature scaling) of a preset on held-out rows and save the
    calibrated preset, kept only where it lowers their LogLoss (--keep always: kept anyway). A preset with a
    data contract calibrates on the labelled rows of --data (zoo.recipes.calibrate_preset: a spec preset's
    held-out file; a reader's own data gives its protocol's validation split); others on the validation
    split of the simulator or --data/--path."""
    import zoo

    model = zoo.load(args.preset)
    path = _raw_file(args, model.preprocessor) if _reads_raw_rows(args, model) else None
    result = zoo.recipes.calibrate_preset(args.preset, args.out, path, args.method, source=_source(args),
                                          keep=args.keep, history_from=args.history_from,
                                          batch_size=args.batch_size, model=model, verbose=_progress())
    report, split = result["report"], result["split"]
    before, after = report["logloss_before"], report["logloss_after"]
    print(f"{args.method}: slope {report['slope']:.4f}, intercept {report['intercept']:.4f} on {report['rows']:,} "
          f"{split if split != 'all' else args.data} rows: LogLoss {before:.5f} -> {after:.5f}, ECE "
          f"{report['ece_before']:.4f} -> {report['ece_after']:.4f}; "
          + ("kept" if report["kept"] else f"not kept ({report.get('reason') or 'it does not lower the LogLoss'}); "
                                         "the preset is saved uncalibrated"))
    test_report, metrics = result["test_report"], result["uncalibrated_metrics"]
    if test_report is not None:
        print(f"test split ({test_report['rows']:,} rows): AUC {test_report['auc']:.4f}, LogLoss "
              f"{test_report['logloss']:.5f}, ECE {test_report['calibration']['ece']:.4f}"
              + (f" (uncalibrated: LogLoss {metrics['test_logloss']:.5f})" if "test_logloss" in metrics else ""))
    print(f"preset in {args.out}")


def _evaluate(args):
    """Score a preset on labelled rows; print and write the metrics report (AUC, LogLoss, GAUC, calibration)
    and the figures. A preset that carries its data contract reads --data through it
    (model.evaluate: `python -m zoo evaluate DIR --data FILE`); others score the test split of
    the simulator or of --data/--path."""
    import json
    import warnings

    import zoo

    model = zoo.load(args.preset)
    with contextlib.redirect_stdout(sys.stderr):  # the progress and the lines: stdout holds the JSON alone
        if _reads_raw_rows(args, model):
            path = _raw_file(args, model.preprocessor)
            with warnings.catch_warnings():  # (the rows that trained the model: said below, in one line)
                warnings.filterwarnings("ignore", message=".* this preset was trained on, so these metrics")
                report = model.evaluate(path, report_path=args.report, plots_dir=args.plots,
                                        history_from=args.history_from, batch_size=args.batch_size or 1024,
                                        verbose=_progress())
            if report["data"]["split"] != "all":
                print(f"evaluate: {report['data']['rows']}")
            if report["data"].get("account"):  # unknown ids, repairs, the earlier logs' rows: as score says them
                print(f"evaluated {report['rows']:,} row(s) of {path} ({report['data']['account']})")
            if report["data"].get("trained_on"):
                from zoo.recipes.raw_rows import trained_on_warning

                print(f"warning: {trained_on_warning(report['data']['trained_on'])}")
            if report.get("baselines"):
                from zoo.recipes.baselines import summary_line

                print(summary_line(model.registered_name, report["baselines"]))
        else:
            data = _source(args).split_for(model, "test", args.batch_size)
            report = zoo.recipes.evaluate(model, data, report_path=args.report, plots_dir=args.plots,
                                          verbose=_progress(), user_key="user_user_id")
    shown = {k: v for k, v in report.items() if k in ("model", "rows", "auc", "logloss", "gauc")}
    shown["calibration"] = {k: v for k, v in report["calibration"].items() if k != "per_bin"}
    print(json.dumps(shown, indent=2))


def _score(args):
    """Score every row of a raw file through a preset's data contract (model.predict's reading,
    zoo.recipes.raw_rows.score_rows); write line, score (and label) as CSV (`--out -`: to stdout, and the
    account to stderr)."""
    import csv

    from zoo.outputs import new_file
    from zoo.recipes.raw_rows import score_rows

    to_stdout = args.out == "-"
    with contextlib.redirect_stdout(sys.stderr) if to_stdout else contextlib.nullcontext():
        scored = score_rows(args.preset, args.file, history_from=args.history_from, batch_size=args.batch_size,
                            verbose=_progress())
    with new_file(args.out, newline="") if not to_stdout else contextlib.nullcontext(sys.stdout) as f:
        writer = csv.writer(f)
        writer.writerow(["line", "score"] + (["label"] if scored.labels is not None else []))
        for i in range(len(scored.scores)):
            writer.writerow([int(scored.lines[i]), f"{scored.scores[i]:.6f}"]
                            + ([int(scored.labels[i])] if scored.labels is not None else []))
    print(f"scored {len(scored.scores):,} row(s) of {args.file} with {args.preset}; wrote "
          f"{args.out if not to_stdout else 'them to stdout'} ({scored.info['repairs']})",
          file=sys.stderr if to_stdout else sys.stdout)


def _request(args):
    """Print (or write) the TF Serving REST body of the raw signature for the first rows of a raw file."""
    import json

    from zoo.errors import ZooError
    from zoo.outputs import new_file
    from zoo.serving.request import build_request

    from zoo import presets
    from zoo.datasets import Preprocessor

    preprocessor = Preprocessor.from_preset(presets.resolve(args.preset))
    if preprocessor is None:
        raise ZooError(f"{args.preset} carries no data contract (preprocessing.json): the raw signature serves "
                       "presets trained on a data spec")
    body, lines = build_request(preprocessor.state, args.file, args.rows, history_from=args.history_from)
    text = json.dumps(body)
    if args.out is None:
        print(text)
        return
    with new_file(args.out) as f:
        f.write(text + "\n")
    print(f"wrote {args.out}: the raw signature's inputs for lines {lines[0]}..{lines[-1]} of {args.file}; send it "
          f"with: curl -d @{args.out} http://localhost:8501/v1/models/<name>:predict")


def _spec(args):
    """Data specs: `draft FILE` prints a spec drafted from a sample of your log (each guess noted)."""
    import json

    from zoo.datasets import spec_draft
    from zoo.outputs import new_file

    spec = spec_draft.draft(args.file, label=args.label, time=args.time, user=args.user, item=args.item,
                            sample_rows=args.sample_rows, sequence_length=args.sequence_length,
                            positive=args.positive, columns=args.columns)
    text = json.dumps(spec, indent=2)
    if args.out is None:
        print(text)
        for line in spec_draft.left_out(spec):  # (stderr: the spec alone on stdout)
            print(line, file=sys.stderr)
        return
    with new_file(args.out) as f:
        f.write(text + "\n")
    guesses = sum(note.startswith("guess") or "; guess" in note for note in spec["notes"].values())
    print(f"wrote {args.out}: {len(spec['columns'])} column(s); {guesses} guess(es) noted in its 'notes' to check")
    for line in spec_draft.left_out(spec):
        print(line)


def _tune(args):
    """KerasTuner search over B, r, k or a loss weight of a registered model: a line per trial, a table at
    the end, the best values (and, with --save-best, the best trial as a preset)."""
    import zoo
    from zoo.errors import ZooError
    from zoo.recipes.tuning import best_line, lead_line

    from zoo.recipes.train import training_recipe

    source = _source(args)
    train, schema = source.load("train", args.rows, batch_size=args.batch_size)
    val, _ = source.load("validation", max(args.rows // 5, 1), batch_size=args.batch_size)
    warm_start = None
    if args.warm_start:
        warm_start = zoo.load(args.warm_start)
        if warm_start.schema.with_candidates(1).to_dict() != schema.with_candidates(1).to_dict():
            raise ZooError(f"--warm-start {args.warm_start}: the preset was built for another schema than this data's")
    tuner = zoo.recipes.tune(
        args.model, train, val, schema=schema, search=args.search, tuner=args.tuner, max_trials=args.max_trials,
        epochs=args.epochs or 1, directory=args.dir, seed=args.seed, verbose=2 if args.verbose else 1,
        recipe=training_recipe(args.recipe, **_training_options(args)),
        warm_start=warm_start, executions_per_trial=args.executions_per_trial, **dict(args.set or []),
    )
    print(best_line(tuner))
    print(lead_line(tuner))
    if args.save_best:
        record, preprocessing = source.record()
        zoo.recipes.save_best(tuner, args.save_best, metadata={"training_data": record}, preprocessing=preprocessing)
        print(f"best trial saved as a preset in {args.save_best}")


def _export(args):
    """Write a TF Serving SavedModel of a registered model or a preset."""
    import zoo

    options = {"m2": args.m2} if args.m2 is not None else {}
    path = zoo.export(args.preset, args.path, signature=args.signature, **options)
    print(f"exported {args.preset} ({args.signature}) to {path}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2)."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message}\n")


def _names(text):
    """A comma-separated list of non-empty texts."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"'{text}' has an empty name: write V1,V2")
    return names


def _whole(text, low, high=None, why="it must be at least 1"):
    """`text` as a whole number in [low, high]; argparse's one-line error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"{value}; {why}")
    return value


def _count(text):
    """A whole number >= 1 (batch sizes, epochs, rows, trials, lengths)."""
    return _whole(text, 1)


def _seed(text):
    """A random seed: a whole number from 0 to 2**32 - 1."""
    return _whole(text, 0, 2**32 - 1, "a seed is from 0 to 4294967295")


def _rate(text):
    """A learning rate: a finite number > 0."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}; it must be a finite number > 0")
    return value


class _Rows(argparse.Action):
    """--rows N, remembering that it was given (a limit on a data set's rows, not only the simulator's)."""

    def __call__(self, parser, namespace, value, option_string=None):
        if value < 1:
            parser.error(f"--rows is {value}; it must be at least 1")
        namespace.rows, namespace.rows_given = value, True


def _add_data_arguments(parser, rows):
    parser.add_argument("--data", default="simulator",
                        help="'simulator' (default) or a data set name (zoo.datasets.names())")
    parser.add_argument("--path", help="the data set's raw file or folder")
    parser.add_argument("--protocol",
                        help="the data set's preprocessing (zoo.datasets.names(); default: the data set's)")
    parser.add_argument("--rows", type=int, default=rows, action=_Rows,
                        help=f"rows to simulate (default {rows}); with --data, use only the first N rows of the "
                        "training split (held-out splits: N/5, evaluate: N)")
    parser.add_argument("--batch-size", type=_count, help="batch size (default: the recipe's, else 256)")
    parser.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")


def _parser():
    parser = _Parser(prog="python -m zoo", description="keras-ctr-zoo command line")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    commands.add_parser("list", help="list the registered models and the shipped presets").set_defaults(run=_list)

    fit = commands.add_parser("fit", help=_fit.__doc__)
    fit.add_argument("model", help="registered model name")
    _add_data_arguments(fit, 20_000)
    fit.add_argument("--recipe", default="suan", help="training protocol (suan, rest, deres, distill)")
    fit.add_argument("--epochs", type=_count, help="override the recipe's epochs")
    fit.add_argument("--learning-rate", type=_rate, help="override the recipe's (peak) learning rate")
    fit.add_argument("--table-update", choices=["dense", "lazy_adam", "rowwise_adagrad", "sgd"],
                     help="how the embedding tables are updated: dense (Adam over every row) or at the rows a batch "
                     "touches only (zoo.recipes.SparseTableAdam); default: lazy_adam when the largest table has "
                     "100,000 rows or more (zoo.recipes.fit.SPARSE_TABLE_ROWS), else dense")
    fit.add_argument("--clipnorm", type=_rate, help="clip the gradients' global norm at this value (FuxiCTR clips at "
                     "10); default: the recipe's (suan: no clipping)")
    fit.add_argument("--set", type=_override, action="append", metavar="KEY=VALUE",
                     help="model hyperparameter override")
    fit.add_argument("--out", default="runs/fit",
                     help="output folder: preset, reports, figures, backup (default runs/fit)")
    fit.add_argument("--resume", action="store_true", help="continue the interrupted run in <out>/backup")
    fit.add_argument("--from", dest="from_preset", metavar="PRESET",
                     help="start from this preset (trained on a data spec): --data is read under its spec, its "
                          "vocabularies grow by the new values, its weights carry over (zoo.recipes.warm_start)")
    fit.add_argument("--history-from", action="append", metavar="FILE",
                     help="with --from: earlier log(s) (the preset's own, typically) whose rows build the histories "
                          "and running statistics of the new rows (read, not trained on), repeatable")
    fit.add_argument("--strategy", choices=["data", "model", "multi-worker"],
                     help="train on several devices: data (replicas), model (JAX: embedding tables split by rows), "
                          "multi-worker (JAX: one process per host, KERAS_DISTRIBUTION_* set by the launcher)")
    fit.add_argument("--devices", type=_count, help="how many local devices (default all; alone: --strategy data)")
    fit.add_argument("--model-axis", type=_count, help="devices each table is split over (default all; JAX)")
    fit.add_argument("--shard-dense", action="store_true", help="also split 2-D Dense kernels by columns (JAX)")
    fit.add_argument("--batch-scaling", choices=["global", "linear", "sqrt"],
                     help="global (default): the recipe's batch is the global batch, its learning rate kept; linear "
                          "or sqrt: the recipe's batch per replica, the learning rate x N or x sqrt(N)")
    fit.add_argument("--calibrate", choices=["platt", "temperature"],
                     help="after training, fit post-hoc calibration on the validation split (kept where it lowers "
                     "the validation LogLoss; the preset applies it in predict, score and every export)")
    fit.add_argument("--data-option", dest="data_options", type=_override, action="append", metavar="KEY=VALUE",
                     help="a data set protocol option, e.g. sequence_length=50")
    fit.add_argument("--spec", help="a data spec (JSON, see `spec draft`): --data is then your log (file, glob "
                     "or folder of shards)")
    fit.set_defaults(run=_fit)

    reproduce = commands.add_parser("reproduce", help=_reproduce.__doc__)
    reproduce.add_argument("table", help="rest-table2, suan-table2, deres-table2, scaling or deres-scaling")
    reproduce.add_argument("--path", required=True, help="the data set's raw file or folder")
    reproduce.add_argument("--data", help="another data set for the table (e.g. avazu for deres-table2)")
    reproduce.add_argument("--out", default="runs/reproduce", help="results folder (default runs/reproduce)")
    reproduce.add_argument("--seeds", type=_seed, nargs="+", help="seeds (default: the recipe's)")
    reproduce.add_argument("--row", action="append", help="run only this row (label or model name); repeatable")
    reproduce.add_argument("--epochs", type=_count, help="override the recipe's epochs")
    reproduce.add_argument("--no-grid", action="store_true", help="skip the recipe's validation grid")
    reproduce.add_argument("--smoke", action="store_true", help="tiny models, a few hundred rows, one seed")
    reproduce.add_argument("--data-option", dest="data_options", type=_override, action="append", metavar="KEY=VALUE",
                           help="a data set protocol option, e.g. sequence_length=50")
    reproduce.add_argument("--max-rows", type=_count, help="rows of each split (default: all; smoke: 300)")
    reproduce.set_defaults(run=_reproduce)

    compare = commands.add_parser("compare", help=_compare.__doc__)
    compare.add_argument("models", nargs="+", metavar="MODEL", help="registered model names")
    compare.add_argument("--data", required=True, help="your log (file, glob or folder of shards)")
    compare.add_argument("--spec", required=True, help="its data spec (JSON, see `spec draft`)")
    compare.add_argument("--out", default="runs/compare", help="results folder; a rerun resumes it (default runs/compare)")
    compare.add_argument("--seeds", type=_count, default=3, help="seeds per model (default 3)")
    compare.add_argument("--epochs", type=_count, default=10,
                         help="most epochs per run; each stops early on the validation AUC (default 10)")
    compare.add_argument("--batch-size", type=_count, default=1024, help="rows per training step (default 1024)")
    compare.add_argument("--learning-rate", type=_rate, help="override the recipe's learning rate")
    compare.add_argument("--clipnorm", type=_rate, help="clip the gradients' global norm at this value (as fit's)")
    compare.add_argument("--later", help="a later labelled file whose every row is scored too")
    compare.add_argument("--no-history-from-log", action="store_true",
                         help="the later rows' histories from the later file alone (default: also from --data)")
    compare.add_argument("--recipe", default="suan", help="training protocol (default suan: Adam; the batch is --batch-size's)")
    compare.set_defaults(run=_compare)

    evaluate = commands.add_parser("evaluate", help=_evaluate.__doc__)
    evaluate.add_argument("preset", help="preset directory, preset name or registered model name (its default preset)")
    _add_data_arguments(evaluate, 5_000)
    evaluate.add_argument("--report", help="write the JSON report here")
    evaluate.add_argument("--plots",
                          help="write figures into this folder (ROC, calibration, score histograms, the model's)")
    evaluate.add_argument("--history-from", action="append", metavar="FILE",
                          help="earlier log(s) whose rows build the histories and running statistics of the scored rows "
                      "(read, not scored; a spec preset), repeatable")
    evaluate.set_defaults(run=_evaluate)

    calibrate = commands.add_parser("calibrate", help=_calibrate.__doc__)
    calibrate.add_argument("preset", help="preset directory, preset name or registered model name (its default preset)")
    _add_data_arguments(calibrate, 5_000)
    calibrate.add_argument("--method", default="platt", choices=["platt", "temperature"],
                           help="platt (slope and intercept, default) or temperature (a slope alone)")
    calibrate.add_argument("--keep", default="if_better", choices=["if_better", "always"],
                           help="keep the calibration only if it lowers the held-out LogLoss (default), or always")
    calibrate.add_argument("--out", required=True, help="the calibrated preset's folder (may be the preset's own)")
    calibrate.add_argument("--history-from", action="append", metavar="FILE",
                           help="earlier log(s) whose rows build the histories and running statistics of the scored rows "
                      "(read, not scored; a spec preset), repeatable")
    calibrate.set_defaults(run=_calibrate)

    tune = commands.add_parser("tune", help=_tune.__doc__)
    tune.add_argument("model", help="registered model name")
    _add_data_arguments(tune, 5_000)
    tune.add_argument("--search", action="append", required=True,
                      help="search key, repeatable: B (num_blocks of deres_p/deres_s/attnres, the UAB count num_layers "
                      "of suan/lightsuan), r (dilation), k (window_size), lambda (eq 17, lightsuan), lambda_seq, "
                      "lambda_align (rest)")
    tune.add_argument("--tuner", default="random", choices=["random", "bayesian", "hyperband"])
    tune.add_argument("--max-trials", type=_count, default=4)
    tune.add_argument("--epochs", type=_count, help="epochs per trial (default 1)")
    tune.add_argument("--learning-rate", type=_rate, help="override the recipe's (peak) learning rate")
    tune.add_argument("--table-update", choices=["dense", "lazy_adam", "rowwise_adagrad", "sgd"],
                      help="how the embedding tables are updated (as fit's; default by the largest table's size)")
    tune.add_argument("--clipnorm", type=_rate, help="clip the gradients' global norm at this value (as fit's)")
    tune.add_argument("--recipe", default="suan")
    tune.add_argument("--dir", default="runs/tuning", help="search directory; an interrupted search resumes from it")
    tune.add_argument("--set", type=_override, action="append", metavar="KEY=VALUE", help="fixed hyperparameter")
    tune.add_argument("--save-best", help="save the best trial as a preset here")
    tune.add_argument("--spec", help="a data spec (JSON): --data is then your log")
    tune.add_argument("--warm-start", help="a preset every trial starts from (fine-tuning: searches of r, k or a "
                      "loss weight, which keep the weights' shapes)")
    tune.add_argument("--executions-per-trial", type=_count, default=1,
                      help="runs per trial (KerasTuner's; the score is their mean, the spread is printed) (default 1)")
    tune.add_argument("--data-option", dest="data_options", type=_override, action="append", metavar="KEY=VALUE",
                      help="a data set protocol option, e.g. sequence_length=50")
    tune.set_defaults(run=_tune)

    score = commands.add_parser("score", help=_score.__doc__)
    score.add_argument("preset", help="preset directory or name (it must carry its data contract)")
    score.add_argument("file", help="the raw rows: a file, glob or folder in the format the preset was trained on")
    score.add_argument("--out", default="scores.csv",
                       help="the CSV to write: line, score[, label] (default scores.csv; - writes it to stdout)")
    score.add_argument("--batch-size", type=_count, default=1024, help="rows per batch (default 1024)")
    score.add_argument("--history-from", action="append", metavar="FILE",
                       help="earlier log(s) whose rows build the histories and running statistics of the scored rows "
                      "(read, not scored; a spec preset), repeatable")
    score.set_defaults(run=_score)

    request = commands.add_parser("request", help=_request.__doc__)
    request.add_argument("preset", help="preset directory or name (trained on a data spec)")
    request.add_argument("file", help="raw rows in the format the preset was trained on")
    request.add_argument("--rows", type=_count, default=1, help="how many rows, from the first (default 1)")
    request.add_argument("--out", help="write the body to this file (default: print it)")
    request.add_argument("--history-from", action="append", metavar="FILE",
                         help="earlier log(s) whose rows join the sent rows' histories (not sent; as score's "
                         "--history-from), repeatable")
    request.set_defaults(run=_request)

    spec = commands.add_parser("spec", help=_spec.__doc__)
    spec_commands = spec.add_subparsers(dest="spec_command", required=True, parser_class=_Parser)
    draft = spec_commands.add_parser("draft", help="print a data spec drafted from a sample of FILE")
    draft.add_argument("file", help="your log: a CSV/TSV (with a header), Parquet or JSON-lines file, or a folder")
    draft.add_argument("--label", help="the label column (0/1, or numbers the draft turns into a rule)")
    draft.add_argument("--time", help="the time column (unix s/ms or ISO 8601)")
    draft.add_argument("--user", help="the user key column")
    draft.add_argument("--item", help="the item key column")
    draft.add_argument("--positive", type=_names, metavar="V1,V2",
                       help="the label column's positive values (a text label such as an event kind)")
    draft.add_argument("--columns", type=_names, metavar="A,B,C",
                       help="the columns' names in file order, for a CSV without a header")
    draft.add_argument("--sample-rows", type=_count, default=10_000, help="rows to sample (default 10000)")
    draft.add_argument("--sequence-length", type=_count, default=50, help="history length L (default 50)")
    draft.add_argument("--out", help="write the spec to this file (default: print it)")
    draft.set_defaults(run=_spec)

    export = commands.add_parser("export", help=_export.__doc__)
    export.add_argument("preset", help="preset directory, preset name or registered model name (its default preset)")
    export.add_argument("path", help="<base>/<version> directory to write, e.g. export/din/1")
    export.add_argument("--signature", default="serving_default",
                        help="serving_default, parallel_candidates, encode_decode, or raw (a preset trained on a "
                             "data spec: its preprocessing inside the graph, beside the id signatures)")
    export.add_argument("--m2", type=_count, help="candidates per parallel pass (parallel_candidates)")
    export.set_defaults(run=_export)
    demo = commands.add_parser("demo", help=_demo.__doc__)
    demo.add_argument("--rows", type=_count, default=20_000, help="training rows to simulate (default 20000)")
    demo.add_argument("--epochs", type=_count, default=5, help="epochs of the distill recipe (default 5)")
    demo.add_argument("--out", default="demo_out",
                      help="where to write the preset, the tuning project and the export (default demo_out/)")
    demo.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    demo.set_defaults(run=_demo)
    for command in list(commands.choices.values()) + [draft]:
        command.add_argument("--verbose", action="store_true", help="show TensorFlow's logs and every warning")
        if "--spec" not in command._option_string_actions:
            command.set_defaults(spec=None)
        if "--data-option" not in command._option_string_actions:
            command.set_defaults(data_options=None)
    return parser


def _known_names():
    """(registered model names, shipped preset names), read from the source files without importing a
    backend: the models' declarations (zoo.declarations) and each `<model>_presets.py` PRESETS table."""
    import ast
    from pathlib import Path

    from zoo import declarations

    presets = []
    for path in sorted((Path(__file__).resolve().parent / "models").glob("*_presets.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PRESETS" for t in node.targets):
                presets += list(ast.literal_eval(node.value))
    return sorted(declarations.models()), presets


def _precheck(args):
    """The argument mistakes found before a backend is imported (a second, not TensorFlow's ~10 s start-up):
    unknown model or preset names (with the closest), missing files and folders. Deeper checks follow."""
    import difflib

    from zoo.errors import ZooError

    models, presets = _known_names()

    def closest(name, names):
        match = difflib.get_close_matches(name, names, n=1)
        return f"; did you mean '{match[0]}'?" if match else ""

    for model in [getattr(args, "model", None)] + list(getattr(args, "models", None) or []):
        if model is not None and model not in models:
            raise ZooError(f"unknown model '{model}' (known: {', '.join(sorted(models))}){closest(model, models)}")
    if getattr(args, "set", None) and getattr(args, "model", None):  # --set values, by the rules building checks
        from zoo import declarations, hyperparameters

        declared = declarations.models()[args.model]
        hyperparameters.overrides(args.model, dict(args.set), declared["hyperparameters"], declared["required"])
    for value in [getattr(args, "later", None)] + list(getattr(args, "history_from", None) or []):
        if value and not os.path.exists(value) and not any(c in value for c in "*?["):
            raise ZooError(f"{value}: no such file or folder")
    parent = getattr(args, "from_preset", None)
    if parent is not None:
        if not os.path.isdir(parent):
            raise ZooError(f"--from {parent}: no such preset folder")
        if args.spec:
            raise ZooError(f"--from {parent}: the new log is read under the preset's own spec; leave --spec out")
        if args.data == "simulator":
            raise ZooError(f"--from {parent}: name the new log with --data")
    elif args.command == "fit" and args.history_from:
        raise ZooError("--history-from in fit goes with --from (a fit that continues a preset's)")
    preset = getattr(args, "preset", None)
    if preset is not None and preset not in models + presets:
        if os.sep in preset or preset.startswith("."):
            if not os.path.isdir(preset):
                raise ZooError(f"{preset}: no such preset directory")
        elif not os.path.isdir(preset):
            raise ZooError(f"unknown model '{preset}' (known: {', '.join(sorted(models))}; presets: "
                           f"{', '.join(sorted(presets))}){closest(preset, models + presets)}")
    for name in ("spec", "file"):
        value = getattr(args, name, None)
        if value and not os.path.exists(value) and not any(c in value for c in "*?["):
            raise ZooError(f"{value}: no such file or folder")
    path = getattr(args, "path", None)
    if path and args.command in ("fit", "evaluate", "calibrate", "tune") and not os.path.exists(path):  # export's is its output
        raise ZooError(f"{path}: no such file or folder")
    if getattr(args, "spec", None):
        _precheck_spec(args.spec, args.data)
    _precheck_preset_rows(args)
    _precheck_outputs(args)


def _precheck_outputs(args):
    """Refuses an output that is one of the command's inputs (zoo.outputs.check_apart), whatever its
    spelling: score's, request's and spec draft's --out file, evaluate's --report; the --out folder of fit,
    compare, reproduce and calibrate (calibrate may rewrite the preset it reads: the preset is swapped
    whole), evaluate's --plots, tune's --dir and --save-best. Export's path is checked by zoo.export."""
    from zoo.outputs import check_apart

    out = getattr(args, "out", None)
    preset = getattr(args, "preset", None)
    preset = preset if preset and os.path.isdir(preset) else None
    inputs = [getattr(args, name, None) for name in ("file", "path", "spec")] + list(
        getattr(args, "history_from", None) or [])
    if getattr(args, "data", None) and os.path.exists(args.data):
        inputs.append(args.data)
    for flag, value in (("--report", getattr(args, "report", None)), ("--save-best", getattr(args, "save_best", None))):
        if value is not None:  # evaluate's report file; tune's best preset folder
            check_apart(value, inputs + [preset, getattr(args, "warm_start", None)], flag=flag,
                        folder=flag == "--save-best")
    for flag, value in (("--plots", getattr(args, "plots", None)), ("--dir", getattr(args, "dir", None))):
        if value is not None:  # evaluate's figures; tune's search folder
            check_apart(value, inputs + [preset, getattr(args, "warm_start", None)], flag=flag, folder=True)
    if out is None or (out == "-" and args.command == "score"):
        return
    if args.command in ("score", "request", "spec"):
        check_apart(out, inputs + [preset])
    elif args.command in ("fit", "compare", "reproduce"):
        check_apart(out, inputs + [getattr(args, "from_preset", None)], folder=True)
    elif args.command == "calibrate":
        own = preset is not None and os.path.isdir(out) and os.path.samefile(out, preset)
        check_apart(out, inputs + ([preset] if not own else []), folder=True)


def _precheck_preset_rows(args):
    """The rows a command reads through a spec preset's data contract (score and request: FILE; evaluate and
    calibrate: --data FILE, whose label column is needed too), checked against the spec the preset
    carries (their headers only, before a backend or the model loads): a missing column is one line."""
    import json

    from zoo.datasets import fitted, spec_reading
    from zoo.datasets.spec import DataSpec
    from zoo.errors import ZooError

    preset = getattr(args, "preset", None)
    if args.command not in ("score", "request", "evaluate", "calibrate") or not preset or not os.path.isfile(
            os.path.join(preset, fitted.FILE_NAME)):
        return
    try:
        with open(os.path.join(preset, fitted.FILE_NAME), encoding="utf-8") as stream:
            state = json.load(stream)
    except (OSError, ValueError, RecursionError):
        return  # zoo.load's checks say what is wrong with the file
    if not isinstance(state, dict) or state.get("dataset") != "spec" or not isinstance(state.get("spec"), dict):
        return
    spec = DataSpec.read(state["spec"])
    labelled = args.command in ("evaluate", "calibrate")
    rows = getattr(args, "file", None) if not labelled else (None if args.data == "simulator" else args.data)
    label = spec.label.get("column")
    for path, optional in [(rows, () if labelled or not label else (label,))] + [
            (earlier, (label,) if label and not spec.earlier_labels_read() else ())
            for earlier in getattr(args, "history_from", None) or []]:
        if path is None:
            continue
        try:
            files = spec_reading.source_files(path, spec.source["format"])
        except ZooError:
            continue  # (a missing path was refused above; a folder of other files is the reader's to say)
        for file in files:
            spec.check_file(file, optional)


def _precheck_spec(spec_path, data):
    """A data spec's mistakes before a backend loads: its keys, values and rules (DataSpec), and the columns it
    names against every file of --data (their headers only)."""
    from zoo.datasets import spec_reading
    from zoo.datasets.spec import DataSpec
    from zoo.errors import ZooError

    spec = DataSpec.read(spec_path)
    if data == "simulator":
        raise ZooError("--spec reads your log: give it as --data FILE")
    for file in spec_reading.source_files(data, spec.source["format"]):  # training reads labels: none is optional
        spec.check_file(file)


def main(argv=None):
    from zoo.errors import ZooError

    args = _parser().parse_args(argv)
    try:
        _precheck(args)
        if sys.stdout is None and _result_on_stdout(args):
            raise ZooError("stdout is closed, and this command writes its result there: give it a place to write "
                           "(a file with --out, or a pipe)")
    except ZooError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command != "spec":  # drafting a spec needs no model (nor the backend the models import)
        import zoo.models  # noqa: F401  (registers the models; under `python -m zoo` the package loads on first use)

    try:
        with _named_stdout():
            args.run(args)
    except ZooError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a file the command writes or reads: a folder, a full disk, no permission
        print(f"error: {_os_error(error)}", file=sys.stderr)
        return 2
    try:
        if sys.stdout is not None:
            sys.stdout.flush()  # what stdout still buffers: a full disk or a closed pipe fails here
    except OSError as error:
        print(f"error: stdout: {error.strerror or error}", file=sys.stderr)
        return 2
    return 0


class _NamedStream:
    """A text stream whose failed writes name it: an OSError without a file name gets `name`."""

    def __init__(self, stream, name):
        self._stream, self._name = stream, name

    def _named(self, call, *args):
        try:
            return call(*args)
        except OSError as error:
            error.filename = error.filename or self._name
            raise

    def write(self, text):
        return self._named(self._stream.write, text)

    def flush(self):
        return self._named(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _named_stdout():
    """sys.stdout as a `_NamedStream` while a command runs, so a full disk or a closed pipe behind stdout is
    one line naming stdout."""
    stream = sys.stdout
    if stream is None:
        yield
        return
    sys.stdout = _NamedStream(stream, "stdout")
    try:
        yield
    finally:
        sys.stdout = stream


def _result_on_stdout(args):
    """Whether the command's result (not only its progress) goes to stdout: list, evaluate (its JSON), spec
    draft and request without --out, score --out -."""
    out = getattr(args, "out", None)
    return (args.command in ("list", "evaluate") or (args.command in ("spec", "request") and out is None)
            or (args.command == "score" and out == "-"))


def _os_error(error):
    """'PATH: what went wrong' of an OSError, in one line."""
    what = error.strerror or (str(error).splitlines() or [type(error).__name__])[0]
    what = " ".join(str(what).split())  # one line (HDF5's write errors span several)
    return f"{error.filename}: {what}" if error.filename else what


def _command_line(argv):
    """`python -m zoo`: the zoo's process settings (zoo.configure_process, before any backend loads), quiet
    unless --verbose, then `main`."""
    import zoo

    zoo.configure_process()
    if "--verbose" not in argv:
        _quiet()
    else:  # everything TensorFlow writes, its start-up lines too
        from zoo import native_logs

        native_logs.uninstall()
    return main(argv)


if __name__ == "__main__":
    sys.exit(_command_line(sys.argv[1:]))
