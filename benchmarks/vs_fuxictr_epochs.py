"""The zoo's DIN and DeepFM against FuxiCTR's, epoch by epoch, at equal sizes and seeds, with each default
where the two differ changed one at a time (issue #40).

    python benchmarks/vs_fuxictr_epochs.py --fuxictr-python ~/fuxi/bin/python --fuxictr-zoo ~/FuxiCTR/model_zoo
    python benchmarks/vs_fuxictr_epochs.py --models din --seeds 0 1 2 --epochs 3 --out runs/epochs

The rows, sizes and FuxiCTR side are benchmarks/vs_fuxictr.py's (ML-100K under the ReST protocol, L = 50,
embedding 32; DIN attention (32, 16), MLP (64, 32); DeepFM MLP (64, 32); Dense -> BatchNorm -> Dice; Adam
1e-3, batch 1024), run here one process at a time without turns (this measures quality, not speed). Each
cell (model, side, seed) trains --epochs epochs, evaluates the validation split after every epoch and the
test split after the last; FuxiCTR's seed is its `seed`, the zoo's `keras.utils.set_random_seed` (the
data's shuffle order stays the pipeline's). The zoo's sides, named by what they fix where the two
libraries' defaults differ (FuxiCTR 2.3.10, BaseModel and its layers), everything else the zoo's own:
- `zoo`: the zoo as it is (since issue #40, DIN and DeepFM start their tables from N(0, 1e-4));
- `U(±0.05)` / `N(0,1e-4)`: every embedding table from Keras' U(-0.05, 0.05) (the zoo's default before
  #40, and still its other models') or N(0, 1e-4) (FuxiCTR's embedding_initializer);
- `clip 10`: the gradients' global norm clipped at 10 (FuxiCTR's max_gradient_norm; the zoo's recipes
  do not clip);
- `eps 1e-8`: Adam's epsilon 1e-8 (torch's) instead of Keras' 1e-7;
- `Dice 0.99`: Dice's own statistics decay as FuxiCTR's Dice (torch BatchNorm1d momentum 0.01, eps 1e-9, i.e.
  Keras momentum 0.99); the BatchNorm before it keeps 0.9 (torch's default 0.1) on both sides.
Cells recorded before #40's change drew N(0,1e-4) with one Keras RandomNormal per layer (tables of one
shape then start equal); since, with zoo.layers.EmbeddingNormal (each table its own draw).
Fill values (FuxiCTR maps an empty categorical and a numeric 0 to OOV) do not arise on these rows: every
id is present and there are no numerics. Results go to OUT/cells.jsonl, a line per cell, and a rerun
skips the cells already there (resumable); the table (mean +- s.d. over the seeds) is printed and written
to OUT/table.md.
"""

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cell_log import CellLog, answer, run_cell  # noqa: E402  (benchmarks/)
VARIANTS = {  # side -> the settings it fixes (absent: the zoo's own default)
    "zoo": {},
    "U(±0.05)": {"init": "uniform"},
    "N(0,1e-4)": {"init": "normal"},
    "U(±0.05), clip 10": {"init": "uniform", "clip": True},
    "U(±0.05), eps 1e-8": {"init": "uniform", "eps": True},
    "N(0,1e-4), clip 10": {"init": "normal", "clip": True},
    "N(0,1e-4), clip 10, eps 1e-8": {"init": "normal", "clip": True, "eps": True},
    "Dice 0.99": {"dice": True},
}


def zoo_cell(spec):
    """One zoo run (TensorFlow): {"val_auc": [per epoch], "auc", "logloss"} on the test split."""
    import keras

    import backend_parity
    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.layers import feature_embedding
    fit_module = importlib.import_module("zoo.recipes.fit")  # (zoo.recipes.fit is also the function's name)

    changes = VARIANTS[spec["variant"]]
    if changes.get("init") == "uniform":  # every table U(+-0.05), whatever the model asks for
        feature_embedding.EmbeddingNormal = feature_embedding.EmbeddingUniform
    elif changes.get("init") == "normal":
        feature_embedding.EmbeddingUniform = feature_embedding.EmbeddingNormal
    if "clip" in changes or "eps" in changes:
        def make_optimizer(recipe, total_steps=None):
            return keras.optimizers.Adam(recipe.learning_rate, global_clipnorm=10.0 if "clip" in changes else None,
                                         epsilon=1e-8 if "eps" in changes else 1e-7)

        fit_module.make_optimizer = make_optimizer
    if changes.get("dice"):
        from zoo.layers import dice_mlp

        class FuxiDice(dice_mlp.Dice):  # FuxiCTR's Dice statistics, whatever DiceMLP passes
            def __init__(self, momentum=None, epsilon=None, **kwargs):
                super().__init__(momentum=0.99, epsilon=1e-9, **kwargs)

        dice_mlp.Dice = FuxiDice
    options = dict(sequence_length=50, verbose=False)
    train, schema = zoo.datasets.load("movielens", spec["data"], split="train", batch_size=1024, **options)
    val, _ = zoo.datasets.load("movielens", spec["data"], split="validation", batch_size=4096, **options)
    test, _ = zoo.datasets.load("movielens", spec["data"], split="test", batch_size=4096, **options)
    keras.utils.set_random_seed(spec["seed"])
    model = zoo.get(spec["model"], schema=schema, **backend_parity.hyperparameters(spec["model"], False))
    history = zoo.recipes.fit(model, train, val, recipe="suan", epochs=spec["epochs"], batch_size=1024,
                              learning_rate=1e-3, seeds=(spec["seed"],), verbose=0)
    optimizer = history.trainer.optimizer  # the variant reached the run
    if changes.get("dice"):
        assert {layer.momentum for layer in model._flatten_layers() if type(layer).__name__ == "FuxiDice"} == {0.99}
    if "clip" in changes:
        assert optimizer.global_clipnorm == 10.0, optimizer.global_clipnorm
    if "eps" in changes:
        assert optimizer.epsilon == 1e-8, optimizer.epsilon
    report = zoo.recipes.evaluate(model, test, verbose=0)
    return {"val_auc": [float(v) for v in history.history["val_auc"]], "auc": report["auc"],
            "logloss": report["logloss"]}


def table(cells, models, sides, epochs):
    def spread(values):
        return f"{statistics.mean(values):.4f} ± {statistics.stdev(values) if len(values) > 1 else 0:.4f}"

    lines = ["| model | side | " + " | ".join(f"val AUC epoch {e + 1}" for e in range(epochs))
             + " | best epoch | test AUC | test LogLoss | seeds |", "|---" * (epochs + 6) + "|"]
    for model in models:
        for side in sides:
            done = [c for c in cells if c["model"] == model and c["side"] == side and "error" not in c]
            if not done:
                continue
            per_epoch = [spread([c["val_auc"][e] for c in done if len(c["val_auc"]) > e]) for e in range(epochs)]
            best = [max(range(len(c["val_auc"])), key=c["val_auc"].__getitem__) + 1 for c in done]
            lines.append(f"| {model} | {side} | " + " | ".join(per_epoch)
                         + f" | {', '.join(map(str, best))} | {spread([c['auc'] for c in done])} | "
                         f"{spread([c['logloss'] for c in done])} | {len(done)} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "movielens-100k"))
    parser.add_argument("--models", nargs="+", default=["din", "deepfm"], choices=["din", "deepfm"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--fuxictr-python", help="an interpreter where `import fuxictr` works")
    parser.add_argument("--fuxictr-zoo", help="FuxiCTR's model_zoo folder")
    parser.add_argument("--out", default="runs/vs_fuxictr_epochs", help="cells.jsonl and table.md (resumable)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        return answer(zoo_cell, args.cell)
    import vs_fuxictr

    log = CellLog(args.out)
    done = log.done("model", "side", "seed")
    sides = list(args.variants) + (["FuxiCTR"] if args.fuxictr_python else [])
    zoo_env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="zoo-epochs-") as scratch:
        prepared = None
        for model in args.models:
            for seed in args.seeds:
                for side in sides:
                    if (model, side, seed) in done:
                        continue
                    if side == "FuxiCTR":
                        if prepared is None:
                            prepared = run_cell([sys.executable, str(HERE / "vs_fuxictr.py"), "--prepare", json.dumps(
                                {"data": args.data, "length": 50, "dir": scratch, "models": args.models})], zoo_env)
                            if "error" in prepared:
                                raise SystemExit(f"writing FuxiCTR's CSV files failed: {prepared['error']}")
                        worker = {"model": model, "csv": prepared["csv"], "dir": f"{scratch}/{model}{seed}",
                                  "length": 50, "batch_size": 1024, "epochs": args.epochs, "threads": 0, "gpu": -1,
                                  "turn_steps": 0, "train_rows": prepared["train_rows"], "seed": seed,
                                  "embedding_dim": prepared["embedding_dim"],
                                  "hyperparameters": prepared["hyperparameters"][model],
                                  "folder": str((Path(args.fuxictr_zoo) / vs_fuxictr.FUXICTR_FOLDERS[model]).resolve())}
                        result = run_cell([args.fuxictr_python, str(HERE / "vs_fuxictr.py"), "--fuxictr-worker",
                                           json.dumps(worker)], dict(os.environ, PYTHONPATH=""))
                    else:
                        cell = {"model": model, "variant": side, "seed": seed, "epochs": args.epochs, "data": args.data}
                        result = run_cell([sys.executable, __file__, "--cell", json.dumps(cell)], zoo_env)
                    result = {"model": model, "side": side, "seed": seed,
                              **{k: result[k] for k in ("val_auc", "auc", "logloss", "error") if k in result}}
                    log.add(result)
    text = table(log.cells, args.models, sides, args.epochs)
    (log.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
