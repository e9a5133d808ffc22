"""The zoo's DeepFM (or DCN-v2) against FuxiCTR's on Criteo-format rows, from the raw file to test metrics:
epoch by epoch over seeds, with each side's whole wall time, preprocessing CPU time and peak memory (issues
#39, #40).

    python benchmarks/vs_fuxictr_criteo.py --fuxictr-python ~/fuxi/bin/python --fuxictr-zoo ~/FuxiCTR/model_zoo
    python benchmarks/vs_fuxictr_criteo.py --rows 1000000 --seeds 0 --backends tensorflow   # the zoo side only
    python benchmarks/vs_fuxictr_criteo.py --model dcnv2 --rows 1000000 --epochs 1 --seeds 0 --fuxictr-python ...

Rows: --rows generated rows in Criteo's format (CSV with the header label,I1..I13,C1..C26; 13 counts with
~21% empty, 26 categories drawn Zipf-like from fields of 10 to 200,000 values) whose label carries signal:
logit = -1.1 + the sum over the categorical fields of a per-value effect (N(0, 0.35) for each field's 2,000
most frequent values; the rarer share one effect each) + 0.15 * log1p(I1..I4) + a C1 x C2 interaction, so
that a model can learn something (~26% positives). The file is split by row order, 80/10/10; FuxiCTR reads
the three slices as its train/valid/test files, the zoo the one file with that split in its data spec.
Generating and slicing are not timed. FuxiCTR clips the gradients' global norm at 10 (its BaseModel's
max_gradient_norm); the zoo's recipes do not clip, and --clip-backends adds zoo sides that do.

Preprocessing, the same on both sides (BARS' Criteo_x4, FuxiCTR's benchmark): a missing count -> 0, a
count x > 2 -> floor(ln(x)^2), else int(x), used as a category; categories seen fewer than 10 times in
the training rows -> OOV; an empty category is a value of its own. Model, the same sizes on both sides:
DeepFM with 16-dimensional embeddings, MLP (200, 80) Dense -> BatchNorm -> Dice (the zoo's defaults),
Adam 1e-3, batch 1024, --epochs epochs. With --model dcnv2, DCN-v2 instead on both sides: 3 full-rank cross
layers and that MLP side by side ("parallel", FuxiCTR's DCNv2 with parallel_dnn_hidden_units (200, 80),
Dice and BatchNorm; the zoo's dcnv2 defaults), the two combined by one linear layer; each side evaluates the validation rows after every epoch and
keeps its best validation epoch for the test metrics (the zoo: `zoo.recipes.train`, the documented path
of `python -m zoo fit`, which also writes its reports, figures and baselines; FuxiCTR: save_best_only).
Each cell (side, seed) runs in its own process, one at a time: whole s is that process' wall time
(imports included), prep CPU-s its CPU time building the data (the zoo: the data-spec engine's build of a
fresh cache; FuxiCTR: FeatureProcessor fit + build_dataset), peak MB its peak resident memory; a second
table splits the whole time into phases (class Phases: startup, preprocessing, each epoch's training and
validation passes, what follows the epochs) with the steady training rate of the epochs after the first. Results
go to OUT/cells.jsonl (a rerun skips the cells there) and OUT/table_ROWS.md (DCN-v2: table_dcnv2_ROWS.md; mean
+- s.d. over the seeds).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cell_log import CellLog, answered, cpu_seconds, fuxictr_arguments, run_cell  # noqa: E402  (benchmarks/; standard library only, as FuxiCTR's side needs)
NUMERIC = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]
CARDINALITY = [1_000, 500, 200_000, 100_000, 300, 24, 12_000, 600, 3, 50_000, 5_000, 150_000, 3_000, 27, 10_000,
               120_000, 10, 4_000, 2_000, 4, 140_000, 17, 15, 60_000, 100, 40_000]
SIZES = {"mlp_units": (200, 80)}


def write_rows(path, rows, seed=0):
    """The generated Criteo-format CSV (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    effects = [rng.normal(0, 0.35, size=min(k, 2_000) + 1) for k in CARDINALITY]
    pair = rng.normal(0, 0.5, size=(31, 31))
    with open(path, "w") as f:
        f.write(",".join(["label"] + NUMERIC + CATEGORICAL) + "\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            logit = np.full(n, -1.1)
            counts = np.floor(rng.lognormal(1.5, 1.6, size=(n, 13))).astype(np.int64)
            empty = rng.random((n, 13)) < 0.21
            logit += 0.15 * np.where(empty[:, :4], 0.0, np.log1p(counts[:, :4])).sum(axis=1) - 0.45
            columns = [None] + [np.where(empty[:, j], "", counts[:, j].astype(str)) for j in range(13)]
            ids = []
            for k, effect in zip(CARDINALITY, effects):
                drawn = np.minimum(rng.zipf(1.3, n) - 1, k - 1)
                logit += effect[np.minimum(drawn, len(effect) - 1)]
                ids.append(drawn)
                columns.append(np.char.mod("%08x", (drawn * 2654435761 + k) % (2**32)))
            logit += pair[np.minimum(ids[0], 30), np.minimum(ids[1], 30)]
            columns[0] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int).astype(str)
            f.write("\n".join(",".join(row) for row in zip(*columns)) + "\n")


def split_files(path, folder):
    """The file's rows by order, 80/10/10, as train/valid/test CSV files with the header (FuxiCTR's input)."""
    lines = Path(path).read_text().splitlines()
    header, rows = lines[0], lines[1:]
    a, b = int(len(rows) * 0.8), int(len(rows) * 0.9)
    out = {}
    for name, part in (("train", rows[:a]), ("valid", rows[a:b]), ("test", rows[b:])):
        out[name] = str(Path(folder) / f"{name}.csv")
        Path(out[name]).write_text("\n".join([header] + part) + "\n")
    return out, a


def zoo_spec():
    columns = {name: {"role": "cand", "type": "numeric", "bars": True, "min_count": 10} for name in NUMERIC}
    columns.update({name: {"role": "cand", "min_count": 10} for name in CATEGORICAL})
    return {"source": {"format": "csv", "delimiter": ",", "quote": None, "header": True},
            "label": {"column": "label"}, "columns": columns, "embedding_dim": 16,
            "split": {"by": "order", "fractions": [0.8, 0.1, 0.1]}}


class Phases:
    """Where a side's wall time goes (standard library only: FuxiCTR's side uses it too). Each epoch's
    training pass (from the epoch's start to its last step, the first epoch's compilation included) and its
    validation pass; `fit_s` the whole fit (the zoo: `zoo.recipes.fit`; FuxiCTR: `model.fit`), `after_fit_s`
    what follows it to the test metrics (the zoo's train() also scores the validation split again, writes
    its reports, figures, baselines and preset). The steady rate counts the training rows of the epochs
    after the first over their training passes (no compilation, no first-epoch warm-up)."""

    def __init__(self):
        self.train_s, self.val_s = [], []
        self.fit_s = self.after_fit_s = 0.0
        self.threads = None
        self._mark = None

    def start_train(self):
        self._mark = time.perf_counter()

    def end_train(self):
        self.train_s.append(time.perf_counter() - self._mark)

    def start_val(self):
        self._mark = time.perf_counter()

    def end_val(self):
        self.val_s.append(time.perf_counter() - self._mark)

    def callback(self, keras):
        phases = self

        class Timer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                phases.start_train()

            def on_test_begin(self, logs=None):  # (Keras validates after the epoch's last step)
                phases.end_train()
                phases.start_val()

            def on_test_end(self, logs=None):
                phases.end_val()

        return Timer()

    def record(self, train_rows):
        steady = self.train_s[1:]
        return {"train_s": self.train_s, "val_s": self.val_s, "fit_s": self.fit_s, "after_fit_s": self.after_fit_s,
                "steady_rows_per_s": train_rows * len(steady) / sum(steady) if steady else None}


def zoo_cell(spec):
    """Runs in the zoo's process (KERAS_BACKEND set): one training from the raw file to test metrics."""
    import resource

    import keras
    import tensorflow  # noqa: F401  (tf.data feeds every backend: its import is not preprocessing)

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.recipes.protocols import get_recipe

    source = zoo.recipes.DataSource(spec["csv"], spec=spec["spec"], seed=spec["seed"])
    started, cpu_started = time.perf_counter(), cpu_seconds()
    source.load("train")  # the engine's build of the fresh cache (train() then reads it)
    prep_cpu, prep_wall = cpu_seconds() - cpu_started, time.perf_counter() - started
    recipe = get_recipe("suan", early_stopping_patience=spec["epochs"],  # the best of all epochs, none cut short
                        clipnorm=spec.get("clipnorm"),  # (a side's variant: the global norm clipped as FuxiCTR's,
                        table_update=spec.get("table_update"))  # or the tables updated by rows)
    phases = Phases()
    fit = zoo.recipes.fit

    def timed_fit(*args, callbacks=(), **kwargs):  # train() looks zoo.recipes.fit up when it calls it
        started = time.perf_counter()
        history = fit(*args, callbacks=[*callbacks, phases.callback(keras)], **kwargs)
        phases.fit_s = time.perf_counter() - started
        tuner = getattr(history, "thread_tuner", None)  # torch's thread counts, measured (recipes/thread_tuner.py)
        phases.threads = [{"step": p["step"], "threads": p["threads"], "ms": p["ms"]} for p in tuner.probes] if tuner else None
        return history

    zoo.recipes.fit = timed_fit
    started = time.perf_counter()
    result = zoo.recipes.train(spec.get("model", "deepfm"), source, spec["out"], recipe=recipe, epochs=spec["epochs"], batch_size=1024,
                               hyperparameters=SIZES, log=None)
    phases.after_fit_s = time.perf_counter() - started - phases.fit_s
    return {"val_auc": [float(v) for v in result["history"]["val_auc"]], "kept_epoch": result["kept_epoch"],
            "auc": result["metrics"]["test_auc"], "logloss": result["metrics"]["test_logloss"],
            "prep_cpu_s": prep_cpu, "prep_s": prep_wall, "parameters": int(result["model"].count_params()),
            "backend": keras.backend.backend(), **phases.record(spec["train_rows"]), "thread_probes": phases.threads,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def fuxictr_cell(spec):
    """Runs in FuxiCTR's environment (imports no zoo code): its DeepFM or DCNv2 from the three CSV files."""
    import logging
    import resource

    import polars as pl
    import torch
    from fuxictr.features import FeatureMap
    from fuxictr.preprocess import FeatureProcessor, build_dataset
    from fuxictr.pytorch.dataloaders import RankDataLoader
    from fuxictr.pytorch.torch_utils import seed_everything

    logging.basicConfig(level=logging.WARNING)
    sys.path.insert(0, spec["folder"])
    import src  # FuxiCTR's model_zoo/DeepFM/DeepFM_torch/src or model_zoo/DCNv2/src

    class Processor(FeatureProcessor):
        def convert_to_bucket(self, name):  # BARS Criteo_x4: x > 2 -> floor(ln(x)^2), else int(x)
            x = pl.col(name).cast(pl.Float64)
            return pl.when(x > 2).then((x.log() ** 2).floor()).otherwise(x).cast(pl.Int64).cast(pl.String)

    Processor.__qualname__ = "Processor"  # FuxiCTR pickles its processor: a module-level name
    globals()["Processor"] = Processor

    data_root, dataset_id = spec["dir"], "zoo_criteo"
    feature_cols = [{"name": NUMERIC, "active": True, "dtype": "float", "type": "categorical",
                     "preprocess": "convert_to_bucket", "fill_na": 0.0},
                    {"name": CATEGORICAL, "active": True, "dtype": "str", "type": "categorical"}]
    label_col = {"name": "label", "dtype": "float"}
    params = {
        "model_id": "DeepFM_zoo", "gpu": -1, "loss": "binary_crossentropy", "metrics": ["logloss", "AUC"],
        "task": "binary_classification", "optimizer": "adam", "learning_rate": 1e-3, "embedding_regularizer": 0,
        "net_regularizer": 0, "batch_size": 1024, "epochs": spec["epochs"], "shuffle": True, "seed": spec["seed"],
        "monitor": "AUC", "monitor_mode": "max", "early_stop_patience": spec["epochs"], "save_best_only": True,
        "model_root": str(Path(data_root) / "checkpoints"), "verbose": 0, "data_format": "csv",
        "data_root": data_root, "dataset_id": dataset_id, "feature_cols": feature_cols, "label_col": label_col,
        "train_data": spec["csv"]["train"], "valid_data": spec["csv"]["valid"], "test_data": spec["csv"]["test"],
        "min_categr_count": 10, "embedding_dim": 16, "hidden_units": list(SIZES["mlp_units"]),
        "hidden_activations": "Dice", "batch_norm": True, "net_dropout": 0,
    }
    if spec.get("model") == "dcnv2":  # the zoo's dcnv2 defaults: 3 full-rank cross layers beside the MLP
        params.update(model_id="DCNv2_zoo", model_structure="parallel", use_low_rank_mixture=False,
                      num_cross_layers=3, parallel_dnn_hidden_units=list(SIZES["mlp_units"]), stacked_dnn_hidden_units=[],
                      dnn_activations="Dice")
    (Path(params["model_root"]) / dataset_id).mkdir(parents=True, exist_ok=True)
    seed_everything(seed=params["seed"])
    started, cpu_started = time.perf_counter(), cpu_seconds()
    processor = Processor(feature_cols=feature_cols, label_col=label_col, dataset_id=dataset_id, data_root=data_root)
    params["train_data"], params["valid_data"], params["test_data"] = build_dataset(
        processor, train_data=params["train_data"], valid_data=params["valid_data"], test_data=params["test_data"],
        min_categr_count=10)
    prep_cpu, prep_wall = cpu_seconds() - cpu_started, time.perf_counter() - started
    feature_map = FeatureMap(dataset_id, str(Path(data_root) / dataset_id))
    feature_map.load(str(Path(data_root) / dataset_id / "feature_map.json"), params)
    model = (src.DCNv2 if spec.get("model") == "dcnv2" else src.DeepFM)(feature_map, **params)

    def generators(stage):
        made = RankDataLoader(feature_map, stage=stage, **params)
        return made.make_iterator() if hasattr(made, "make_iterator") else made

    train_gen, valid_gen = generators("train")
    validation, evaluate = [], model.evaluate

    phases, train_epoch = Phases(), model.train_epoch

    def evaluate_and_record(*args, **kwargs):  # (FuxiCTR validates at the epoch's end, from train_epoch)
        phases.end_train()
        phases.start_val()
        logs = evaluate(*args, **kwargs)
        phases.end_val()
        validation.append(float(logs["AUC"]))
        return logs

    def timed_train_epoch(*args, **kwargs):
        phases.start_train()
        return train_epoch(*args, **kwargs)

    model.evaluate, model.train_epoch = evaluate_and_record, timed_train_epoch
    started = time.perf_counter()
    model.fit(train_gen, validation_data=valid_gen, **params)
    phases.fit_s = time.perf_counter() - started
    model.evaluate = evaluate
    metrics = model.evaluate(generators("test"))
    phases.after_fit_s = time.perf_counter() - started - phases.fit_s
    return {"val_auc": validation, "kept_epoch": max(range(len(validation)), key=validation.__getitem__) + 1,
            "auc": float(metrics["AUC"]), "logloss": float(metrics["logloss"]), "prep_cpu_s": prep_cpu,
            "prep_s": prep_wall, "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "torch_threads": torch.get_num_threads(), **phases.record(spec["train_rows"]),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def table(cells, sides, epochs):
    def spread(values, form=".4f"):
        values = list(values)
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):{form}} ± {sd:{form}}"

    lines = ["| side | " + " | ".join(f"val AUC epoch {e + 1}" for e in range(epochs))
             + " | kept epoch | test AUC | test LogLoss | whole s | prep CPU-s | peak MB | seeds |",
             "|---" * (epochs + 8) + "|"]
    for side in sides:
        done = [c for c in cells if c["side"] == side and "error" not in c]
        if not done:
            continue
        per_epoch = [spread(c["val_auc"][e] for c in done if len(c["val_auc"]) > e) for e in range(epochs)]
        lines.append(f"| {side} | " + " | ".join(per_epoch) + f" | {', '.join(str(c['kept_epoch']) for c in done)} | "
                     f"{spread(c['auc'] for c in done)} | {spread(c['logloss'] for c in done)} | "
                     f"{spread((c['whole_s'] for c in done), '.1f')} | {spread((c['prep_cpu_s'] for c in done), '.1f')} | "
                     f"{spread((c['peak_mb'] for c in done), ',.0f')} | {len(done)} |")
    lines += ["", "Where the whole time goes (mean over the seeds; cells recorded with phases):", "",
              "| side | startup s | prep s | epoch 1 train s | later epochs train s | validation s | "
              "after the epochs s | steady rows/s | whole s |", "|---" * 9 + "|"]
    for side in sides:
        done = [c for c in cells if c["side"] == side and "error" not in c and "train_s" in c]
        if not done:
            continue

        def mean(key):
            return statistics.mean(key(c) for c in done)

        other = mean(lambda c: c["whole_s"] - c["prep_s"] - c["fit_s"] - c["after_fit_s"])
        later = all(len(c["train_s"]) > 1 for c in done)  # (a one-epoch run has no steady epoch: "-")
        lines.append(f"| {side} | {other:.1f} | {mean(lambda c: c['prep_s']):.1f} | "
                     f"{mean(lambda c: c['train_s'][0]):.1f} | "
                     + (f"{mean(lambda c: sum(c['train_s'][1:])):.1f} | " if later else "- | ")
                     + f"{mean(lambda c: sum(c['val_s'])):.1f} | "
                     f"{mean(lambda c: c['after_fit_s'] + c['fit_s'] - sum(c['train_s']) - sum(c['val_s'])):.1f} | "
                     + (f"{mean(lambda c: c['steady_rows_per_s']):,.0f} | " if later else "- | ")
                     + f"{mean(lambda c: c['whole_s']):.1f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("deepfm", "dcnv2"), default="deepfm")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--backends", nargs="*", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--lazy-backends", nargs="*", default=[], metavar="BACKEND",
                        help="also run the zoo on these backends with table_update='lazy_adam' (the tables updated at "
                        "the rows a batch touches), as sides 'zoo BACKEND, lazy Adam'")
    parser.add_argument("--clip-backends", nargs="*", default=[], metavar="BACKEND",
                        help="also run the zoo on these backends with the gradients' global norm clipped at 10 "
                        "(FuxiCTR's max_gradient_norm), as sides 'zoo BACKEND, clip 10'")
    fuxictr_arguments(parser, "runs/vs_fuxictr_criteo", "cells.jsonl and table_ROWS.md")
    args = parser.parse_args()
    if answered(args, zoo_cell, fuxictr_cell):
        return
    log = CellLog(args.out)
    for cell in log.cells:  # (cells from before --model were DeepFM's)
        cell.setdefault("model", "deepfm")
    done = log.done("side", "seed", "rows", "model")
    sides = ([f"zoo {b}" for b in args.backends] + [f"zoo {b}, clip 10" for b in args.clip_backends]
             + [f"zoo {b}, lazy Adam" for b in args.lazy_backends]
             + (["FuxiCTR"] if args.fuxictr_python else []))
    with tempfile.TemporaryDirectory(prefix="zoo-criteo-") as scratch:
        csv = str(Path(scratch) / "rows.csv")
        write_rows(csv, args.rows)
        spec_path = str(Path(scratch) / "spec.json")
        Path(spec_path).write_text(json.dumps(zoo_spec()))
        parts, train_rows = split_files(csv, scratch)
        for seed in args.seeds:
            for side in sides:
                if (side, seed, args.rows, args.model) in done:
                    continue
                work = Path(scratch) / f"{side.replace(' ', '_').replace(',', '')}{seed}"
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
                if side == "FuxiCTR":
                    folder = Path(args.fuxictr_zoo) / ("DCNv2" if args.model == "dcnv2" else "DeepFM/DeepFM_torch")
                    cell = {"csv": parts, "dir": str(work), "epochs": args.epochs, "seed": seed,
                            "train_rows": train_rows, "model": args.model, "folder": str(folder.resolve())}
                    result = run_cell([args.fuxictr_python, __file__, "--fuxictr-cell", json.dumps(cell)],
                                      dict(os.environ, PYTHONPATH="", OMP_WAIT_POLICY="PASSIVE"))
                else:
                    cell = {"csv": csv, "spec": spec_path, "out": str(work / "run"), "epochs": args.epochs,
                            "seed": seed, "train_rows": train_rows, "model": args.model,
                            "clipnorm": 10.0 if side.endswith("clip 10") else None,
                            "table_update": "lazy_adam" if side.endswith("lazy Adam") else None}
                    env = dict(os.environ, KERAS_BACKEND=side.split()[1].rstrip(","), TF_CPP_MIN_LOG_LEVEL="3",
                               PYTHONPATH=str(ROOT), ZOO_DATA_CACHE=str(work / "cache"))
                    result = run_cell([sys.executable, __file__, "--zoo-cell", json.dumps(cell)], env)
                log.add({"side": side, "seed": seed, "rows": args.rows, "model": args.model, **result})
                shutil.rmtree(work, ignore_errors=True)
    text = table([c for c in log.cells if c["rows"] == args.rows and c["model"] == args.model], sides, args.epochs)
    (log.out / f"table_{'' if args.model == 'deepfm' else 'dcnv2_'}{args.rows}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
