"""DIN, DeepFM and DCN-v2 in the zoo (TensorFlow, JAX, torch) against FuxiCTR's (torch) on the same ML-100K rows.

    python benchmarks/vs_fuxictr.py --make-venv ~/fuxi --fuxictr-zoo ~/FuxiCTR/model_zoo --epochs 2
    python benchmarks/vs_fuxictr.py --fuxictr-python ~/fuxi/bin/python --fuxictr-zoo ~/FuxiCTR/model_zoo
    python benchmarks/vs_fuxictr.py --models din                      # the zoo side; DIN against issue #19

FuxiCTR is never a dependency of the zoo. Its side runs in another interpreter (--fuxictr-python, where
`import fuxictr` works), and needs FuxiCTR's model_zoo folder (--fuxictr-zoo: its DIN, DeepFM and DCNv2
live in the repository's model_zoo/, not in the pip package; e.g. `git clone
https://github.com/reczoo/FuxiCTR`). --make-venv DIR creates that interpreter: a virtual environment in
DIR (if absent) with FuxiCTR and its dependencies pip-installed at PINS (CPU torch; polars < 2, which
FuxiCTR 2.3.10 needs). Without FuxiCTR's side the script prints how to get it and compares DIN with the
FuxiCTR figure issue #19 measured on this machine (labelled as such; not measured by this run).

The setting (issue #19, widened by #28): ML-100K rows from the zoo's reader (ReST protocol: rating >= 4
positive, 5-core, per-user time-ordered 80/10/10, history of the last L = 50 ratings), Adam 1e-3,
batch 1024, --epochs epochs, the validation split evaluated after each epoch, AUC / LogLoss on the test
split. Sizes, the same on both sides: the embedding size of the zoo's schema (32) and the hidden units
backend_parity gives each model (DIN: attention (32, 16), MLP (64, 32); DeepFM and DCN-v2: their default
preset's, MLP (64, 32), DCN-v2 with its cross layers, full rank, parallel), every MLP Dense -> BatchNorm
-> Dice as the zoo's DiceMLP.

The zoo side is benchmarks/backend_parity.py's worker (zoo.recipes.fit), one process per backend. The
FuxiCTR side gets the very same rows, written to CSV (user, candidate item, the ^-joined history of item
ids and of ratings, label), and runs its FeatureProcessor / RankDataLoader / model from model_zoo:
user_id and item_id categorical, hist_item_id a sequence sharing item_id's embedding, hist_rating a
sequence; DIN attends over hist_item_id with item_id as the target and mean-pools hist_rating; DeepFM
and DCNv2 mean-pool both sequences (the zoo's FieldTokens: the mean of the visible behaviours). Two
things of FuxiCTR's as measured: the pip package 2.3.10 reads the data through Ray Data (a local Ray
instance; a full shuffle of the training set each epoch), and that time is FuxiCTR's; and its embedding
tables that init_weights skips (see initialise_skipped_tables) are given FuxiCTR's own initializer, which
changes starting values only (without it DeepFM reaches test AUC 0.67 in 2 epochs, not 0.79).

All processes of one model (the zoo's backends and FuxiCTR) start together, then train in turns of
--turn-steps steps, one process at a time, in rotation, each process' clock stopped while it waits, so
that load from elsewhere on the machine hits every side alike. The zoo's processes wait for their first
turn at the start of training (inside zoo.recipes.fit, whose set-up is timed); FuxiCTR's waits before
its set-up (data set, Ray, loaders: not timed), so that this untimed work does not run beside a zoo
process' timed fit. Rates, on both sides:
- fit samples/s: training rows x epochs / the wall time of fit (compilation and validation included);
- steady samples/s: rows x (epochs - 1) / the training time of epochs 2.. (each from its start to the
  end of its last training step; no compilation, no validation);
- fit x, steady x: those rates over FuxiCTR's;
- step ms: the median time from one training step's end to the next's in epochs 2.. (loading the batch
  included);
- 1st step s: the first step's time less a steady step: tracing and XLA compilation for the zoo (JAX
  and TensorFlow; torch runs eagerly), the data loader's start (Ray's shuffle) for FuxiCTR;
- set-up s, end s (the zoo): the part of the whole fit before its first epoch (zoo.recipes.fit's and
  Keras' set-up, until on_train_begin) and after its last (from on_train_end until fit returns).
Goal: the zoo >= 1.5x FuxiCTR's samples/s on every backend, at equal AUC (within 0.003) and LogLoss.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cell_log import cpu_seconds  # noqa: E402  (benchmarks/, standard library only)
from backend_parity import Timeline  # noqa: E402  (benchmarks/; it imports no zoo code, so FuxiCTR's venv can too)
MODELS = {"din": "DIN", "deepfm": "DeepFM", "dcnv2": "DCNv2"}  # zoo name -> FuxiCTR class
FUXICTR_FOLDERS = {"din": "DIN", "deepfm": "DeepFM/DeepFM_torch", "dcnv2": "DCNv2"}  # in model_zoo, each with src/
PINS = ["fuxictr==2.3.10", "torch==2.13.0", "pandas", "scikit-learn", "pyyaml", "h5py", "tqdm", "pyarrow",
        "keras_preprocessing", "polars<2"]
ISSUE_FUXICTR = {"din": {"samples_per_second": 11_927, "auc": 0.784, "logloss": 0.565}}  # issue #19, this machine
INSTRUCTIONS = """FuxiCTR's side was not run: {reason}.
To run it (FuxiCTR is never installed into the zoo's environment):
    git clone https://github.com/reczoo/FuxiCTR ~/FuxiCTR
    python benchmarks/vs_fuxictr.py --make-venv ~/fuxi --fuxictr-zoo ~/FuxiCTR/model_zoo"""


# ----------------------------------------------------------------------------------------------- zoo side


def prepare(spec):
    """The zoo's ML-100K splits as CSV files for FuxiCTR (user_id, item_id, hist_item_id, hist_rating, label),
    the training rows, the embedding size and each model's hyperparameters (backend_parity's)."""
    import numpy as np

    import backend_parity
    from zoo.datasets import load

    paths, rows = {}, {}
    for split in ("train", "validation", "test"):
        dataset, schema = load("movielens", spec["data"], split=split, batch_size=4096, shuffle=False,
                               sequence_length=spec["length"], verbose=False)
        path = Path(spec["dir"]) / f"{split}.csv"
        rows[split] = 0
        with open(path, "w") as out:
            out.write("user_id,item_id,hist_item_id,hist_rating,label\n")
            for features, labels in dataset:
                f = {k: np.asarray(v) for k, v in features.items()}
                labels = np.asarray(labels)
                for i in range(len(labels)):
                    real = f["hist_item_id"][i] != 0
                    history = "^".join(map(str, f["hist_item_id"][i][real]))
                    ratings = "^".join(map(str, f["hist_rating"][i][real]))
                    out.write(f"{f['user_user_id'][i]},{f['cand_item_id'][i, 0]},{history},{ratings},"
                              f"{float(labels[i, 0]):g}\n")
                rows[split] += len(labels)
        paths[split] = str(path)
    return {"csv": paths, "train_rows": rows["train"], "embedding_dim": schema.features[0].embedding_dim,
            "hyperparameters": {m: backend_parity.hyperparameters(m, False) for m in spec["models"]}}


# ----------------------------------------------------------------------------------------------- FuxiCTR side


def fuxictr_params(model, sizes, embedding_dim):
    """FuxiCTR's constructor arguments for `model` at the zoo's sizes (MLPs Dense -> BatchNorm -> Dice)."""
    mlp = {"batch_norm": True, "net_dropout": 0, "embedding_dim": embedding_dim}
    if model == "din":
        return dict(mlp, dnn_hidden_units=list(sizes["mlp_units"]), dnn_activations="Dice",
                    attention_hidden_units=list(sizes["attention_units"]), attention_hidden_activations="sigmoid",
                    attention_output_activation=None, attention_dropout=0, din_target_field="item_id",
                    din_sequence_field="hist_item_id", din_use_softmax=False)
    if model == "deepfm":
        return dict(mlp, hidden_units=list(sizes["mlp_units"]), hidden_activations="Dice")
    if sizes["projection_dim"] is not None:
        raise SystemExit(f"dcnv2: FuxiCTR's DCNv2 has no low-rank cross without the mixture; the zoo's preset has "
                         f"projection_dim {sizes['projection_dim']}")
    return dict(mlp, model_structure=sizes["structure"], use_low_rank_mixture=False,
                num_cross_layers=sizes["num_cross_layers"], stacked_dnn_hidden_units=list(sizes["mlp_units"]),
                parallel_dnn_hidden_units=list(sizes["mlp_units"]), dnn_activations="Dice")


def initialise_skipped_tables(model):
    """Gives FuxiCTR's embedding tables that its init_weights skips their initializer (the padding row kept zero).

    FeatureEmbeddingDict.init_weights skips every feature that names share_embedding, also in a dict that
    does not share (use_sharing=False: the 1-dim tables of DeepFM's LogisticRegression, where hist_item_id
    gets a table of its own). That table keeps torch's N(0, 1), and the 50 summed history weights start
    DeepFM's logit at std ~6 (test AUC 0.67 after 2 epochs against the zoo's 0.79). Only initial values
    change; FuxiCTR's default, std 1e-4 normal, is what init_weights gives every other table."""
    import torch
    from fuxictr.pytorch.layers import FeatureEmbeddingDict

    for module in model.modules():
        if not isinstance(module, FeatureEmbeddingDict):
            continue
        tables = module.embedding_layers
        for name, table in tables.items():
            shared = module._feature_map.features[name].get("share_embedding")
            own = shared and (shared not in tables or table is not tables[shared])
            if own and isinstance(table, torch.nn.Embedding):
                module.embedding_initializer(table.weight[1:, :] if table.padding_idx is not None else table.weight)


class TurnClock(Timeline):
    """The FuxiCTR run's side of the turns, on backend_parity's Timeline (its clock stops while the run
    waits for its turn; PAUSE after every `turn_steps` training steps and once before the first). It
    records each epoch's start and each training step's end."""

    def __init__(self, turn_steps):
        super().__init__(turn_steps)
        self.step_end = []

    def watch(self, model):
        """Wraps `model`'s train_epoch and train_step (FuxiCTR's BaseModel) to record and take turns."""
        train_epoch, train_step = model.train_epoch, model.train_step

        def timed_epoch(data_generator):
            self.epoch_begin.append(self.now())
            self.step_end.append([])
            return train_epoch(data_generator)

        def timed_step(batch_data):
            loss = train_step(batch_data)
            loss.item()  # waits for the step, as train_epoch's own loss.item() does
            self.step_end[-1].append(self.now())
            self.steps += 1
            if self.turn_steps and self.steps % self.turn_steps == 0:
                self.wait_for_turn()
            return loss

        model.train_epoch, model.train_step = timed_epoch, timed_step

    def steady_seconds(self):
        """Training time of epochs 2..: each epoch's start to the end of its last training step."""
        return sum(ends[-1] - begin for begin, ends in zip(self.epoch_begin[1:], self.step_end[1:]))

    def median_step_seconds(self):
        """The median time from one training step's end to the next's in epochs 2.. (the batch's loading included)."""
        import numpy as np

        return float(np.median(np.concatenate([np.diff(ends) for ends in self.step_end[1:]])))


def fuxictr_worker(spec):
    """One FuxiCTR model on the CSV files (runs in FuxiCTR's environment; imports no zoo code)."""
    import logging

    import fuxictr
    import torch
    from fuxictr.features import FeatureMap
    from fuxictr.preprocess import FeatureProcessor, build_dataset
    from fuxictr.pytorch.dataloaders import RankDataLoader
    from fuxictr.pytorch.torch_utils import seed_everything

    logging.basicConfig(level=logging.WARNING)
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    sys.path.insert(0, spec["folder"])
    import src  # FuxiCTR's model_zoo/<model>/src

    # FuxiCTR's set-up (its data set, Ray, the loaders) is outside its clock: it runs in its first turn, not
    # beside the zoo's processes, whose clocks run from the start of zoo.recipes.fit
    clock = TurnClock(spec["turn_steps"])
    clock.wait_for_turn()
    model_name, data_root = spec["model"], spec["dir"]
    dataset_id = f"zoo_ml100k_{model_name}"
    pooled = {"feature_encoder": "layers.MaskedAveragePooling()"}  # FuxiCTR's default for a sequence, spelled out
    sequence = {"active": True, "dtype": "str", "type": "sequence", "splitter": "^", "max_len": spec["length"],
                "padding": "pre"}
    feature_cols = [
        {"name": "user_id", "active": True, "dtype": "str", "type": "categorical"},
        {"name": "item_id", "active": True, "dtype": "str", "type": "categorical"},
        dict(sequence, name="hist_item_id", share_embedding="item_id",
             **({"feature_encoder": None} if model_name == "din" else pooled)),  # DIN attends over the sequence
        dict(sequence, name="hist_rating", **pooled),
    ]
    label_col = {"name": "label", "dtype": "float"}
    params = {
        "model_id": f"{MODELS[model_name]}_zoo", "gpu": spec["gpu"], "loss": "binary_crossentropy",
        "metrics": ["logloss", "AUC"], "task": "binary_classification", "optimizer": "adam", "learning_rate": 1e-3,
        "embedding_regularizer": 0, "net_regularizer": 0, "batch_size": spec["batch_size"], "epochs": spec["epochs"],
        "shuffle": True, "seed": spec.get("seed", 2019), "monitor": "AUC", "monitor_mode": "max", "early_stop_patience": spec["epochs"],
        "save_best_only": False, "model_root": str(Path(data_root) / "checkpoints"), "verbose": 0,
        "data_format": "csv", "data_root": data_root, "dataset_id": dataset_id, "feature_cols": feature_cols,
        "label_col": label_col, "train_data": spec["csv"]["train"], "valid_data": spec["csv"]["validation"],
        "test_data": spec["csv"]["test"],
        **fuxictr_params(model_name, spec["hyperparameters"], spec["embedding_dim"]),
    }
    (Path(params["model_root"]) / dataset_id).mkdir(parents=True, exist_ok=True)  # where fit saves its checkpoint
    seed_everything(seed=params["seed"])
    prep_started, prep_cpu = time.perf_counter(), cpu_seconds()
    processor = FeatureProcessor(feature_cols=feature_cols, label_col=label_col, dataset_id=dataset_id,
                                 data_root=data_root)
    params["train_data"], params["valid_data"], params["test_data"] = build_dataset(
        processor, train_data=params["train_data"], valid_data=params["valid_data"], test_data=params["test_data"])
    feature_map = FeatureMap(dataset_id, str(Path(data_root) / dataset_id))
    feature_map.load(str(Path(data_root) / dataset_id / "feature_map.json"), params)
    prep_s, prep_cpu_s = time.perf_counter() - prep_started, cpu_seconds() - prep_cpu  # FuxiCTR's preprocessing
    model = getattr(src, MODELS[model_name])(feature_map, **params)
    initialise_skipped_tables(model)

    def generators(stage):
        """RankDataLoader's generators: the pip package's returns them, the repository's has make_iterator()."""
        made = RankDataLoader(feature_map, stage=stage, **params)
        return made.make_iterator() if hasattr(made, "make_iterator") else made

    train_gen, valid_gen = generators("train")
    clock.watch(model)
    validation, evaluate = [], model.evaluate

    def evaluate_and_record(*args, **kwargs):  # fit's validation after each epoch: its AUC, epoch by epoch
        logs = evaluate(*args, **kwargs)
        validation.append(float(logs["AUC"]))
        return logs

    model.evaluate = evaluate_and_record
    started = clock.now()
    model.fit(train_gen, validation_data=valid_gen, **params)
    fit_s = clock.now() - started
    model.evaluate = evaluate
    test_gen = generators("test")
    metrics = model.evaluate(test_gen)
    rows, epochs = spec["train_rows"], len(clock.epoch_begin)
    return {"model": model_name, "side": "fuxictr", "fit_s": fit_s, "fit_samples_per_second": rows * epochs / fit_s,
            "samples_per_second": rows * (epochs - 1) / clock.steady_seconds(), "step_s": clock.median_step_seconds(),
            "start_s": max(clock.step_end[0][0] - clock.epoch_begin[0] - clock.median_step_seconds(), 0.0),
            "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "auc": float(metrics["AUC"]), "logloss": float(metrics["logloss"]), "version": fuxictr.__version__,
            "val_auc": validation, "prep_s": prep_s, "prep_cpu_s": prep_cpu_s}


# ----------------------------------------------------------------------------------------------- parent


def make_venv(folder):
    """DIR/bin/python with FuxiCTR at PINS: creates the environment and installs what it lacks."""
    folder = Path(folder).expanduser().resolve()
    python = folder / "bin" / "python"
    if not python.exists():
        print(f"creating a virtual environment for FuxiCTR in {folder}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    if not fuxictr_available(python):
        print(f"installing {' '.join(PINS)} into {folder} (a few minutes)", flush=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], capture_output=True, text=True)
        if done.returncode != 0 or not fuxictr_available(python):
            raise SystemExit(f"installing FuxiCTR into {folder} failed:\n{done.stderr[-3000:]}")
    return str(python)


def fuxictr_available(python):
    done = subprocess.run([str(python), "-c", "import fuxictr"], capture_output=True, text=True)
    return done.returncode == 0


def fuxictr_missing(python, zoo_folder, models):
    """Why FuxiCTR's side cannot run, or None."""
    if not zoo_folder:
        return "no --fuxictr-zoo (FuxiCTR's model_zoo folder)"
    absent = [str(Path(zoo_folder) / FUXICTR_FOLDERS[m] / "src") for m in models
              if not (Path(zoo_folder) / FUXICTR_FOLDERS[m] / "src").is_dir()]
    if absent:
        return f"--fuxictr-zoo {zoo_folder} lacks {', '.join(absent)}"
    if not fuxictr_available(python):
        return f"`import fuxictr` fails in {python} (--fuxictr-python, or --make-venv DIR)"
    return None


RATES = (("fit_samples_per_second", "whole fit"), ("samples_per_second", "steady"))


def print_table(results, models, backends, reference_of):
    print(f"\n{'model':<8}{'side':<17}{'params':>8}{'fit samples/s':>14}{'steady samples/s':>17}{'fit x':>7}"
          f"{'steady x':>9}{'step ms':>8}{'1st step s':>11}{'set-up s':>9}{'end s':>7}{'AUC':>8}{'LogLoss':>9}")

    def cell(r, key, width, form, scale=1):
        return f"{scale * r[key]:>{width}{form}}" if r.get(key) is not None else f"{'-':>{width}}"

    for model in models:
        reference, source = reference_of(model)
        for side in [f"zoo {b}" for b in backends] + ["FuxiCTR (torch)"]:
            r = reference if side.startswith("FuxiCTR") else results[model].get(side)
            if r is None or "error" in r:
                print(f"{model:<8}{side:<17}  {'failed: ' + r['error'][-200:] if r else 'not run'}")
                continue
            ratios = "".join(
                f"{r[key] / reference[key]:>{width - 1}.2f}x" if reference and key in r and key in reference
                else f"{'-':>{width}}" for (key, _), width in zip(RATES, (7, 9)))
            first_step = dict(r, first_step_s=r.get("compile_s", r.get("start_s")))
            note = f"   <- {source}" if side.startswith("FuxiCTR") else ""
            print(f"{model:<8}{side:<17}{cell(r, 'parameters', 8, ',')}{cell(r, 'fit_samples_per_second', 14, ',.0f')}"
                  f"{r['samples_per_second']:>17,.0f}{ratios}{cell(r, 'step_s', 8, '.1f', 1000)}"
                  f"{cell(first_step, 'first_step_s', 11, '.1f')}{cell(r, 'setup_s', 9, '.1f')}"
                  f"{cell(r, 'teardown_s', 7, '.1f')}{r['auc']:>8.4f}{r['logloss']:>9.4f}{note}")


def print_goals(results, models, backends, reference_of):
    print("\ngoal: the zoo >= 1.5x FuxiCTR's samples/s on every backend, AUC and LogLoss within 0.003 of FuxiCTR's "
          "(or better)")
    for model in models:
        reference, source = reference_of(model)
        if not reference or "error" in reference:
            print(f"{model}: no FuxiCTR figure")
            continue
        for backend in backends:
            r = results[model].get(f"zoo {backend}")
            if not r or "error" in r:
                continue
            speed = ", ".join(
                f"{name} {r[key] / reference[key]:.2f}x ({'ok' if r[key] >= 1.5 * reference[key] else 'short'})"
                for key, name in RATES if key in reference)
            auc, logloss = r["auc"] - reference["auc"], r["logloss"] - reference["logloss"]
            accuracy = (f"AUC {auc:+.4f} ({'ok' if auc >= -0.003 else 'short'}), "
                        f"LogLoss {logloss:+.4f} ({'ok' if logloss <= 0.003 else 'short'})")
            print(f"{model} {backend}: {speed}; {accuracy}")
        print(f"  (FuxiCTR: {source})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "movielens-100k"),
                        help="ML-100K folder (u.data)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow", "torch"],
                        choices=["jax", "tensorflow", "torch"])
    parser.add_argument("--epochs", type=int, default=3, help="at least 2 (epoch 1 holds the compilation)")
    parser.add_argument("--turn-steps", type=int, default=4,
                        help="training steps per turn (0: one side after the other)")
    parser.add_argument("--threads", type=int, default=0, help="compute threads for every side (0: defaults)")
    parser.add_argument("--fuxictr-python", default=sys.executable, help="an interpreter where `import fuxictr` works")
    parser.add_argument("--make-venv", metavar="DIR",
                        help="create (if absent) a virtual environment in DIR with FuxiCTR at the pinned versions and "
                        "use its interpreter as --fuxictr-python")
    parser.add_argument("--fuxictr-zoo", metavar="DIR",
                        help="FuxiCTR's model_zoo folder (its DIN, DeepFM and DCNv2 are not in the pip package)")
    parser.add_argument("--gpu", type=int, default=-1, help="FuxiCTR's gpu index (-1: CPU)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per model")
    parser.add_argument("--json", help="also write every side's result to this file")
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--fuxictr-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare:
        sys.path.insert(0, str(HERE))
        print("RESULT " + json.dumps(prepare(json.loads(args.prepare))), flush=True)
        return
    if args.fuxictr_worker:
        print("RESULT " + json.dumps(fuxictr_worker(json.loads(args.fuxictr_worker))), flush=True)
        return
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: epoch 1 holds the compilation")
    if not (Path(args.data) / "u.data").is_file():
        raise SystemExit(f"no ML-100K at {args.data} (u.data): pass --data")
    started = time.perf_counter()
    fuxictr_python = make_venv(args.make_venv) if args.make_venv else args.fuxictr_python
    missing = fuxictr_missing(fuxictr_python, args.fuxictr_zoo, args.models)
    if missing:
        print(INSTRUCTIONS.format(reason=missing), flush=True)
    sys.path.insert(0, str(HERE))
    import backend_parity

    spec = backend_parity.run_spec(args.data, length=50, batch_size=1024, epochs=args.epochs, learning_rate=1e-3,
                                   threads=args.threads)
    print(f"ML-100K, L = 50, Adam 1e-3, batch 1024, {args.epochs} epochs, turns of {args.turn_steps} steps; "
          f"{os.cpu_count()} CPU cores, threads {args.threads or 'default'}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="zoo-vs-fuxictr-") as scratch:
        env = dict(os.environ, PYTHONPATH=str(ROOT), KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run(
            [sys.executable, __file__, "--prepare", json.dumps({"data": args.data, "length": 50, "dir": scratch,
                                                               "models": args.models})],
            env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise SystemExit(f"writing the CSV files failed:\n{done.stderr[-3000:]}")
        prepared = json.loads(lines[-1][len("RESULT "):])
        for i, model in enumerate(args.models):
            sizes = prepared["hyperparameters"][model]
            print(f"{model}: embedding {prepared['embedding_dim']}, "
                  f"{', '.join(f'{k} {v}' for k, v in sizes.items())}", flush=True)
            zoo_spec = dict(spec, model=model, turn_steps=args.turn_steps)
            commands = {f"zoo {b}": ([sys.executable, str(HERE / "backend_parity.py"), "--worker",
                                      json.dumps(zoo_spec)], backend_parity.worker_env(spec, b))
                        for b in args.backends}
            if not missing:
                worker = {"model": model, "csv": prepared["csv"], "dir": scratch, "length": 50, "batch_size": 1024,
                          "epochs": args.epochs, "threads": args.threads, "gpu": args.gpu,
                          "turn_steps": args.turn_steps, "train_rows": prepared["train_rows"],
                          "embedding_dim": prepared["embedding_dim"], "hyperparameters": sizes,
                          "folder": str((Path(args.fuxictr_zoo) / FUXICTR_FOLDERS[model]).resolve())}
                fuxictr_env = dict(os.environ, PYTHONPATH="")
                if args.threads:
                    fuxictr_env["OMP_NUM_THREADS"] = str(args.threads)
                commands["FuxiCTR (torch)"] = ([fuxictr_python, __file__, "--fuxictr-worker", json.dumps(worker)],
                                               fuxictr_env)
            order = list(commands)
            order = order[i % len(order):] + order[:i % len(order)]  # who goes first rotates from model to model
            model_started = time.perf_counter()
            results[model] = backend_parity.take_turns({side: commands[side] for side in order}, args.timeout)
            for side in order:
                r = results[model][side]
                note = r.get("error") or (f"{r['fit_samples_per_second']:,.0f} samples/s whole fit, "
                                          f"{r['samples_per_second']:,.0f} steady, AUC {r['auc']:.4f}, "
                                          f"LogLoss {r['logloss']:.4f}")
                print(f"  {model:<7}{side:<17}{note}", flush=True)
            print(f"  ({model}: {time.perf_counter() - model_started:.0f} s)", flush=True)

    def reference_of(model):
        """(FuxiCTR's result for `model` or None, where it comes from)."""
        measured = results[model].get("FuxiCTR (torch)")
        if measured:
            return measured, f"measured by this run, FuxiCTR {measured.get('version', '?')}"
        if model in ISSUE_FUXICTR:
            return ISSUE_FUXICTR[model], "issue #19's steady rate (not measured by this run)"
        return None, "none"

    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print_table(results, args.models, args.backends, reference_of)
    print_goals(results, args.models, args.backends, reference_of)
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
