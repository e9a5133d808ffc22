"""DIN from MovieLens-100K's raw ratings to test metrics: the zoo on each backend against FuxiCTR 2.3.10, the
whole run of each in its own process, one at a time (issue #39's third comparison; the steady rates in turns
are benchmarks/vs_fuxictr.py's, the Criteo-format runs benchmarks/vs_fuxictr_criteo.py's).

    python benchmarks/vs_fuxictr_din_whole.py --fuxictr-python FUXI/bin/python --fuxictr-zoo FuxiCTR/model_zoo
    python benchmarks/vs_fuxictr_din_whole.py --backends torch --seeds 0 1    # the zoo side only

The setting is vs_fuxictr.py's (issue #19's): ML-100K by the ReST protocol (rating >= 4 positive, 5-core,
per-user time-ordered 80/10/10, the last L = 50 ratings as the history), DIN with attention (32, 16) and MLP
(64, 32) Dense -> BatchNorm -> Dice, embedding 32, Adam 1e-3, batch 1024, --epochs epochs, the validation
split after each epoch, each side keeping its best validation epoch for the test metrics.

- The zoo: `zoo.recipes.train("din", DataSource("movielens", DATA))` in a fresh process, from u.data (the
  documented path of `python -m zoo fit din --data movielens`, which also writes its reports, figures,
  baselines and preset); prep CPU-s is the data set's build (reading u.data, the 5-core filter, the splits,
  the histories) into a fresh cache.
- FuxiCTR has no reader that builds the histories from a rating log: a FuxiCTR user writes that step. Its
  side starts from the CSV files that vs_fuxictr.py writes from the zoo's splits (user, item, the ^-joined
  history of items and of ratings, label; written once, before the cells, not timed), and runs its own
  FeatureProcessor + build_dataset (its prep), model_zoo's DIN and the test evaluation (vs_fuxictr.py's
  worker, no turns). So FuxiCTR's whole time leaves out the history building that the zoo's includes.

Per cell: whole s (the process' wall time, imports included), prep CPU-s, peak MB, the steady training rate
(the training rows of epochs 2.. over their training passes), test AUC and LogLoss. Cells go to
OUT/cells.jsonl (a rerun skips those there) and OUT/table.md. Goal (#39): each zoo side's whole time at most
half of FuxiCTR's, its steady rate above FuxiCTR's, AUC within 0.003.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cell_log import CellLog, answered, cpu_seconds, fuxictr_arguments, run_cell  # noqa: E402  (benchmarks/; standard library only)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "movielens-100k"


def zoo_cell(spec):
    """In the zoo's process (KERAS_BACKEND set): DIN from u.data to test metrics."""
    import resource

    import keras
    import tensorflow  # noqa: F401  (tf.data feeds every backend: its import is not preprocessing)

    import backend_parity
    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from vs_fuxictr_criteo import Phases
    from zoo.recipes.protocols import get_recipe

    source = zoo.recipes.DataSource("movielens", spec["data"], options={"sequence_length": 50}, seed=spec["seed"])
    started, cpu_started = time.perf_counter(), cpu_seconds()
    source.load("train")  # the build of a fresh cache (train() then reads it)
    prep_cpu, prep_wall = cpu_seconds() - cpu_started, time.perf_counter() - started
    recipe = get_recipe("suan", early_stopping_patience=spec["epochs"])  # the best of all epochs, none cut short
    phases, fit = Phases(), zoo.recipes.fit

    def timed_fit(*args, callbacks=(), **kwargs):  # train() looks zoo.recipes.fit up when it calls it
        started = time.perf_counter()
        history = fit(*args, callbacks=[*callbacks, phases.callback(keras)], **kwargs)
        phases.fit_s = time.perf_counter() - started
        return history

    zoo.recipes.fit = timed_fit
    started = time.perf_counter()
    result = zoo.recipes.train("din", source, spec["out"], recipe=recipe, epochs=spec["epochs"], batch_size=1024,
                               hyperparameters=backend_parity.hyperparameters("din", False), log=None)
    phases.after_fit_s = time.perf_counter() - started - phases.fit_s
    return {"val_auc": [float(v) for v in result["history"]["val_auc"]], "kept_epoch": result["kept_epoch"],
            "auc": result["metrics"]["test_auc"], "logloss": result["metrics"]["test_logloss"],
            "prep_cpu_s": prep_cpu, "prep_s": prep_wall, "backend": keras.backend.backend(),
            **phases.record(spec["train_rows"]), "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def fuxictr_cell(spec):
    """In FuxiCTR's environment (no zoo code): vs_fuxictr.py's worker, without turns, plus this cell's memory."""
    import resource

    from vs_fuxictr import fuxictr_worker

    result = fuxictr_worker(spec)
    steady = result["samples_per_second"]
    return {"val_auc": result["val_auc"], "kept_epoch": 1 + max(range(len(result["val_auc"])),
                                                                 key=lambda e: (result["val_auc"][e], -e)),
            "auc": result["auc"], "logloss": result["logloss"], "prep_cpu_s": result["prep_cpu_s"],
            "prep_s": result["prep_s"], "fit_s": result["fit_s"], "steady_rows_per_s": steady,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def table(cells, sides):
    def spread(values, form=".4f"):
        values = list(values)
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):{form}} ± {sd:{form}}"

    reference = [c for c in cells if c["side"] == "FuxiCTR" and "error" not in c]
    whole_ref = statistics.mean(c["whole_s"] for c in reference) if reference else None
    rate_ref = statistics.mean(c["steady_rows_per_s"] for c in reference) if reference else None
    lines = ["| side | test AUC | test LogLoss | kept epochs | whole s | vs FuxiCTR | prep CPU-s | steady rows/s | "
             "vs FuxiCTR | peak MB | seeds |", "|---" * 11 + "|"]
    for side in sides:
        done = [c for c in cells if c["side"] == side and "error" not in c]
        if not done:
            continue
        whole = statistics.mean(c["whole_s"] for c in done)
        rate = statistics.mean(c["steady_rows_per_s"] for c in done)
        lines.append(f"| {side} | {spread(c['auc'] for c in done)} | {spread(c['logloss'] for c in done)} | "
                     f"{', '.join(str(c['kept_epoch']) for c in done)} | {spread((c['whole_s'] for c in done), '.1f')} | "
                     f"{f'{whole / whole_ref:.2f}x' if whole_ref else '-'} | "
                     f"{spread((c['prep_cpu_s'] for c in done), '.1f')} | {spread((c['steady_rows_per_s'] for c in done), ',.0f')} | "
                     f"{f'{rate / rate_ref:.2f}x' if rate_ref else '-'} | {spread((c['peak_mb'] for c in done), ',.0f')} | "
                     f"{len(done)} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="ML-100K's folder (u.data)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--backends", nargs="*", default=["tensorflow", "jax", "torch"])
    fuxictr_arguments(parser, "runs/vs_fuxictr_din_whole", "cells.jsonl and table.md")
    args = parser.parse_args()
    if answered(args, zoo_cell, fuxictr_cell):
        return
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the steady rate is that of epochs 2..)")
    if args.fuxictr_python and not args.fuxictr_zoo:
        parser.error("--fuxictr-python needs --fuxictr-zoo (FuxiCTR's model_zoo folder: its DIN is not in the pip package)")
    if not (Path(args.data) / "u.data").is_file():
        raise SystemExit(f"no ML-100K at {args.data} (u.data): pass --data")
    log = CellLog(args.out)
    done = log.done("side", "seed", "epochs")
    sides = [f"zoo {b}" for b in args.backends] + (["FuxiCTR"] if args.fuxictr_python else [])
    import vs_fuxictr

    with tempfile.TemporaryDirectory(prefix="zoo-din-whole-") as scratch:
        # FuxiCTR's input, the zoo's splits as its CSV files, and the training rows (not timed)
        env = dict(os.environ, PYTHONPATH=str(ROOT), KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
        made = subprocess.run([sys.executable, str(HERE / "vs_fuxictr.py"), "--prepare",
                               json.dumps({"data": args.data, "length": 50, "dir": scratch, "models": ["din"]})],
                              env=env, capture_output=True, text=True)
        lines = [line for line in made.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise SystemExit(f"writing FuxiCTR's CSV files failed:\n{made.stderr[-3000:]}")
        prepared = json.loads(lines[-1][len("RESULT "):])
        for seed in args.seeds:
            for side in sides[seed % len(sides):] + sides[:seed % len(sides)]:  # who goes first rotates with the seed
                if (side, seed, args.epochs) in done:
                    continue
                work = Path(scratch) / f"{side.replace(' ', '_')}{seed}"
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
                if side == "FuxiCTR":
                    cell = {"model": "din", "csv": prepared["csv"], "dir": str(work), "length": 50, "batch_size": 1024,
                            "epochs": args.epochs, "threads": 0, "gpu": -1, "turn_steps": 0, "seed": seed,
                            "train_rows": prepared["train_rows"], "embedding_dim": prepared["embedding_dim"],
                            "hyperparameters": prepared["hyperparameters"]["din"],
                            "folder": str((Path(args.fuxictr_zoo) / vs_fuxictr.FUXICTR_FOLDERS["din"]).resolve())}
                    result = run_cell([args.fuxictr_python, __file__, "--fuxictr-cell", json.dumps(cell)],
                                      dict(os.environ, PYTHONPATH="", OMP_WAIT_POLICY="PASSIVE"))
                else:
                    cell = {"data": args.data, "out": str(work / "run"), "epochs": args.epochs, "seed": seed,
                            "train_rows": prepared["train_rows"]}
                    env = dict(os.environ, KERAS_BACKEND=side.split()[1], TF_CPP_MIN_LOG_LEVEL="3",
                               PYTHONPATH=f"{ROOT}{os.pathsep}{HERE}", ZOO_DATA_CACHE=str(work / "cache"))
                    result = run_cell([sys.executable, __file__, "--zoo-cell", json.dumps(cell)], env)
                log.add({"side": side, "seed": seed, "epochs": args.epochs, **result})
                shutil.rmtree(work, ignore_errors=True)
    text = table([c for c in log.cells if c["epochs"] == args.epochs], sides)
    (log.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
