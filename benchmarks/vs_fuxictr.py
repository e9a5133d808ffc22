"""DIN in the zoo (TensorFlow, JAX, torch) against FuxiCTR's DIN (torch) on the same ML-100K rows.

    python benchmarks/vs_fuxictr.py                                   # the zoo side; FuxiCTR's if importable
    python benchmarks/vs_fuxictr.py --fuxictr-python ~/fuxi/bin/python --fuxictr-din ~/FuxiCTR/model_zoo/DIN

FuxiCTR is never a dependency of the zoo. Its side runs only when `import fuxictr` works in the
interpreter given by --fuxictr-python (default: this one), e.g. a separate environment:

    python -m venv ~/fuxi && ~/fuxi/bin/pip install fuxictr torch
    git clone https://github.com/reczoo/FuxiCTR ~/FuxiCTR          # its DIN lives in model_zoo/DIN/src

Otherwise the script prints these instructions and compares the zoo with the FuxiCTR figure issue #19
measured on this machine (labelled as taken from the issue; not measured by this run).

The setting of issue #19: ML-100K rows from the zoo's reader (ReST protocol: rating >= 4 positive,
5-core, per-user time-ordered 80/10/10, history of the last L = 50 ratings), DIN with embedding 32,
attention units (32, 16), MLP (64, 32) with BatchNorm + Dice, Adam 1e-3, batch 1024, 3 epochs, the
validation split evaluated after each epoch, AUC / LogLoss on the test split. The zoo side is
benchmarks/backend_parity.py's run (zoo.recipes.fit), one process per backend, the backends training
in alternating turns of 4 steps (see there). The FuxiCTR side gets
the very same rows, written to CSV (user, candidate item, the ^-joined history of item ids and of
ratings, label), its FeatureProcessor / RankDataLoader / DIN (target item_id, sequence hist_item_id
sharing item_id's embedding, hist_rating as a pooled sequence feature), the same sizes, and is timed
around its `fit`. Both rates are training rows x epochs / the wall time of fit (compilation and
validation included); the zoo's steady-state rate (epochs 2.., no validation) is printed as well. The ratio
compares like with like: whole-fit rates when FuxiCTR ran here, steady rates against the issue's figure.
Goal: the zoo's fastest backend >= 1.5x FuxiCTR's samples/s at equal AUC and LogLoss.
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
ISSUE_FUXICTR = {"samples_per_second": 11_927, "auc": 0.784, "logloss": 0.565}  # issue #19, this machine
INSTRUCTIONS = """FuxiCTR's side was not run: `import fuxictr` fails in {python}.
To run it, in a separate environment (FuxiCTR is never installed into the zoo's):
    python -m venv ~/fuxi && ~/fuxi/bin/pip install fuxictr torch
    git clone https://github.com/reczoo/FuxiCTR ~/FuxiCTR
    python benchmarks/vs_fuxictr.py --fuxictr-python ~/fuxi/bin/python --fuxictr-din ~/FuxiCTR/model_zoo/DIN"""


def write_csv(spec):
    """The zoo's ML-100K splits as CSV files for FuxiCTR: user_id, item_id, hist_item_id, hist_rating, label."""
    import numpy as np

    from zoo.datasets import load

    paths = {}
    for split in ("train", "validation", "test"):
        dataset, _ = load("movielens", spec["data"], split=split, batch_size=4096, shuffle=False,
                          sequence_length=spec["length"], verbose=False)
        path = Path(spec["dir"]) / f"{split}.csv"
        with open(path, "w") as out:
            out.write("user_id,item_id,hist_item_id,hist_rating,label\n")
            for features, labels in dataset:
                f = {k: np.asarray(v) for k, v in features.items()}
                for i in range(len(labels)):
                    real = f["hist_item_id"][i] != 0
                    history = "^".join(map(str, f["hist_item_id"][i][real]))
                    ratings = "^".join(map(str, f["hist_rating"][i][real]))
                    out.write(f"{f['user_user_id'][i]},{f['cand_item_id'][i, 0]},{history},{ratings},"
                              f"{float(np.asarray(labels)[i, 0]):g}\n")
        paths[split] = str(path)
    return paths


def fuxictr_worker(spec):
    """FuxiCTR's DIN on the CSV files (runs in FuxiCTR's environment; imports no zoo code)."""
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
    sys.path.insert(0, spec["din_dir"])
    import src  # FuxiCTR's model_zoo/DIN/src

    length, data_root, dataset_id = spec["length"], spec["dir"], "zoo_ml100k"
    sequence = {"active": True, "dtype": "str", "type": "sequence", "splitter": "^", "max_len": length,
                "padding": "pre"}
    feature_cols = [
        {"name": "user_id", "active": True, "dtype": "str", "type": "categorical"},
        {"name": "item_id", "active": True, "dtype": "str", "type": "categorical"},
        dict(sequence, name="hist_item_id", share_embedding="item_id"),
        dict(sequence, name="hist_rating"),
    ]
    label_col = {"name": "label", "dtype": "float"}
    params = {
        "model_id": "DIN_zoo", "gpu": spec["gpu"], "loss": "binary_crossentropy", "metrics": ["logloss", "AUC"],
        "task": "binary_classification", "optimizer": "adam", "learning_rate": 1e-3, "embedding_regularizer": 0,
        "net_regularizer": 0, "batch_size": spec["batch_size"], "embedding_dim": 32, "dnn_hidden_units": [64, 32],
        "dnn_activations": "Dice", "batch_norm": True, "attention_hidden_units": [32, 16],
        "attention_hidden_activations": "sigmoid", "attention_output_activation": None, "attention_dropout": 0,
        "din_target_field": "item_id", "din_sequence_field": "hist_item_id", "din_use_softmax": False,
        "net_dropout": 0, "epochs": spec["epochs"], "shuffle": True, "seed": 2019, "monitor": "AUC",
        "monitor_mode": "max", "early_stop_patience": spec["epochs"], "save_best_only": False,
        "model_root": str(Path(data_root) / "checkpoints"), "verbose": 0, "data_format": "csv",
        "data_root": data_root, "dataset_id": dataset_id, "feature_cols": feature_cols, "label_col": label_col,
        "train_data": spec["csv"]["train"], "valid_data": spec["csv"]["validation"], "test_data": spec["csv"]["test"],
    }
    seed_everything(seed=params["seed"])
    processor = FeatureProcessor(feature_cols=feature_cols, label_col=label_col, dataset_id=dataset_id,
                                 data_root=data_root)
    params["train_data"], params["valid_data"], params["test_data"] = build_dataset(
        processor, train_data=params["train_data"], valid_data=params["valid_data"], test_data=params["test_data"])
    feature_map = FeatureMap(dataset_id, str(Path(data_root) / dataset_id))
    feature_map.load(str(Path(data_root) / dataset_id / "feature_map.json"), params)
    model = src.DIN(feature_map, **params)
    train_gen, valid_gen = RankDataLoader(feature_map, stage="train", **params).make_iterator()
    started = time.perf_counter()
    model.fit(train_gen, validation_data=valid_gen, **params)
    fit_s = time.perf_counter() - started
    test_gen = RankDataLoader(feature_map, stage="test", **params).make_iterator()
    metrics = model.evaluate(test_gen)
    rows = spec["train_rows"]
    return {"fit_s": fit_s, "fit_samples_per_second": rows * spec["epochs"] / fit_s,
            "auc": float(metrics["AUC"]), "logloss": float(metrics["logloss"]),
            "version": getattr(fuxictr, "__version__", "?")}


def fuxictr_available(python):
    done = subprocess.run([python, "-c", "import fuxictr"], capture_output=True, text=True)
    return done.returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "movielens-100k"),
                        help="ML-100K folder (u.data)")
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow", "torch"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="compute threads for every side (0: defaults)")
    parser.add_argument("--fuxictr-python", default=sys.executable, help="an interpreter where `import fuxictr` works")
    parser.add_argument("--fuxictr-din", help="FuxiCTR's model_zoo/DIN folder (its DIN is not in the pip package)")
    parser.add_argument("--gpu", type=int, default=-1, help="FuxiCTR's gpu index (-1: CPU)")
    parser.add_argument("--fuxictr-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fuxictr_worker:
        print("RESULT " + json.dumps(fuxictr_worker(json.loads(args.fuxictr_worker))), flush=True)
        return
    if not (Path(args.data) / "u.data").is_file():
        raise SystemExit(f"no ML-100K at {args.data} (u.data): pass --data")
    sys.path.insert(0, str(HERE))
    import backend_parity

    spec = backend_parity.run_spec(args.data, length=50, batch_size=1024, epochs=args.epochs, learning_rate=1e-3,
                                   threads=args.threads)
    print(f"DIN on ML-100K (L = 50, embedding 32, attention (32, 16), MLP (64, 32) BN + Dice), Adam 1e-3, batch "
          f"1024, {args.epochs} epochs; {os.cpu_count()} CPU cores, threads {args.threads or 'default'}", flush=True)
    zoo_rows = backend_parity.run_in_turns(dict(spec, model="din", turn_steps=4), args.backends, timeout=7200)
    fuxictr, source = None, "issue #19 (not measured by this run)"
    if args.fuxictr_din and fuxictr_available(args.fuxictr_python):
        with tempfile.TemporaryDirectory(prefix="zoo-vs-fuxictr-") as scratch:
            env = dict(os.environ, PYTHONPATH=str(ROOT), KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
            spec_csv = {"data": args.data, "length": 50, "dir": scratch}
            code = ("import json, sys; sys.path.insert(0, %r); import vs_fuxictr; "
                    "print(json.dumps(vs_fuxictr.write_csv(json.loads(sys.argv[1]))))" % str(HERE))
            done = subprocess.run([sys.executable, "-c", code, json.dumps(spec_csv)], env=env, capture_output=True,
                                  text=True, check=True)
            csv = json.loads(done.stdout.strip().splitlines()[-1])
            worker = {"csv": csv, "dir": scratch, "length": 50, "batch_size": 1024, "epochs": args.epochs,
                      "threads": args.threads, "gpu": args.gpu, "din_dir": str(Path(args.fuxictr_din).resolve()),
                      "train_rows": next(r["rows"] for r in zoo_rows.values() if "rows" in r)}
            done = subprocess.run([args.fuxictr_python, __file__, "--fuxictr-worker", json.dumps(worker)],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if lines:
                fuxictr, source = json.loads(lines[-1][len("RESULT "):]), "measured by this run"
            else:
                print(f"FuxiCTR's side failed:\n{done.stderr[-3000:]}")
    elif not args.fuxictr_din or not fuxictr_available(args.fuxictr_python):
        print(INSTRUCTIONS.format(python=args.fuxictr_python))
    reference = fuxictr or ISSUE_FUXICTR
    # like for like: a measured FuxiCTR is timed around its whole fit (the zoo's fit rate), the issue's figure
    # is FuxiCTR's steady training rate (the zoo's steady rate)
    rate_key = "fit_samples_per_second" if fuxictr else "samples_per_second"
    compared = "whole fit" if fuxictr else "steady"
    print(f"\n{'':<22}{'fit samples/s':>14}{'steady samples/s':>17}{'vs FuxiCTR':>11}{'AUC':>8}{'LogLoss':>9}")
    for backend, r in zoo_rows.items():
        if "error" in r:
            print(f"zoo {backend:<18}failed: {r['error']}")
            continue
        print(f"zoo {backend:<18}{r['fit_samples_per_second']:>14,.0f}{r['samples_per_second']:>17,.0f}"
              f"{r[rate_key] / reference[rate_key]:>10.2f}x{r['auc']:>8.4f}{r['logloss']:>9.4f}")
    fit_column, steady_column = (f"{reference[rate_key]:>14,.0f}", f"{'':>17}") if fuxictr else (
        f"{'':>14}", f"{reference[rate_key]:>17,.0f}")
    print(f"{'FuxiCTR DIN (torch)':<22}{fit_column}{steady_column}{'1.00':>10}x{reference['auc']:>8.4f}"
          f"{reference['logloss']:>9.4f}   <- {source}")
    done = [r for r in zoo_rows.values() if "error" not in r]
    if done:
        fastest = max(done, key=lambda r: r[rate_key])
        ratio = fastest[rate_key] / reference[rate_key]
        print(f"\nfastest zoo backend ({compared} rates): {fastest['backend']}, {ratio:.2f}x FuxiCTR's samples/s "
              f"(goal >= 1.5x), AUC "
              f"{fastest['auc'] - reference['auc']:+.4f}, LogLoss {fastest['logloss'] - reference['logloss']:+.4f} "
              f"against FuxiCTR ({source})")


if __name__ == "__main__":
    main()
