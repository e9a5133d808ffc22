"""`compare(models, data, spec, out)`: models and the trivial baselines on the same split of a team's log.

    python -m zoo compare din bst lightsuan --data my_log.csv --spec spec.json --out runs/compare \\
        --seeds 3 --epochs 10 --later later.csv
    board = zoo.recipes.compare(["din", "bst"], "my_log.csv", "spec.json", "runs/compare", later="later.csv")

Every model is built from the spec's schema at its class defaults and trained by the recipe ("suan":
Adam 1e-3) at `batch_size` rows a step (default `BATCH_SIZE`, 1024) with early stopping on the validation
AUC (patience `PATIENCE`, the best epoch's weights kept), once per seed; each (model, seed) is a cell, run and kept as the `reproduce` machinery
keeps its cells (zoo.recipes.reproduce: `cells/<model>/seed<k>.json` and the scores), so an interrupted
comparison resumes where it stopped. A cell also keeps its preset (`cells/<model>/seed<k>_preset`).

The rows scored are the spec's test split, and with `later` every row of a later file (read through the
fitted preprocessing; its histories and running statistics also see the training log, `history_from`).
On the same rows stand the baselines of zoo.recipes.baselines: the global rate, each item's rate, each
user's running rate over their strictly earlier rows, and their logistic combination (fitted in-sample
on the scored rows, so an optimistic baseline). For the test split they read the training split; for the
later rows the whole training log, as the models' fitted tables do.

The leaderboard (`leaderboard.md`, `leaderboard.json`, `leaderboard.png`) gives per model the mean ±
s.d. over seeds of AUC, LogLoss and GAUC (by the raw user key) on each set of rows, the parameters, the
training samples per second (training rows x epochs run / training seconds), the scoring cost (µs per
row on the test split) and the paired bootstrap of the seed-mean AUC against the best baseline
(`BOOTSTRAP` resamples of the rows, shared by every model of one set of rows): "beats" when its 95%
interval lies above 0. The winner is the model with the
best mean validation AUC (the test and later rows pick nothing); its best-validation seed's preset is
copied to `<out>/preset`.
"""

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from zoo.errors import ZooError
from zoo.outputs import fingerprint, new_file, replacing_folder
from zoo.recipes import baselines as baseline_recipes
from zoo.recipes.evaluate import predict_rows, scoring_batch
from zoo.recipes.metrics import auc, bootstrap_aucs, check_two_classes, gauc, logloss, paired_bootstrap
from zoo.recipes.protocols import get_recipe
from zoo.recipes.reproduce import Reproduction, Row, Table, _slug, _t95, save_array
from zoo.recipes.train import folder_lock

PATIENCE = 2  # epochs without a better validation AUC before a run on a team's own log stops
# Rows per step. The reference libraries' default (FuxiCTR's), and on the MovieLens impression log of
# benchmarks/own_data_compare.py the better one: DIN's test AUC 0.7463 at 1024 against 0.7293 at the suan
# recipe's 256 (later rows 0.7560 against 0.7392; one seed, the best validation epoch of each).
BATCH_SIZE = 1024
EPOCHS = 10  # at most: each run stops early (the best validation epoch has always come within 4 here)
BOOTSTRAP = baseline_recipes.RESAMPLES  # resamples of the scored rows, shared by every model and the baseline of one set


class Comparison(Reproduction):
    """Runs one comparison (see the module docstring)."""

    def __init__(self, models, data, spec, out="runs/compare", *, seeds=3, epochs=EPOCHS, batch_size=BATCH_SIZE,
                 learning_rate=None, clipnorm=None, later=None, history_from_log=True, recipe="suan",
                 hyperparameters=None, log=print):
        from zoo import datasets, registry
        from zoo.datasets.spec import DataSpec

        models = list(dict.fromkeys(models))
        if not models:
            raise ZooError("compare: name at least one model")
        unknown = [m for m in models if m not in registry.names()]
        if unknown:
            raise ZooError(f"compare: unknown model '{unknown[0]}' (known: {', '.join(sorted(registry.names()))})")
        if not isinstance(seeds, int) or not 1 <= seeds <= 100:
            raise ZooError(f"compare: seeds should be a whole number from 1 to 100, found {seeds!r}")
        spec = DataSpec.read(spec).to_dict()
        rows = tuple(Row(m, m, dict((hyperparameters or {}).get(m, {}))) for m in models)
        table = Table(name="compare", data="spec", recipe=recipe, rows=rows, references=())
        super().__init__(table, data, out, seeds=tuple(range(seeds)), epochs=epochs,
                         log=log or (lambda line: None))  # (log=None: silent, as train's)
        self.data, self.out, self.spec = spec, Path(out), spec
        self.later = later
        self.training = {"batch_size": batch_size, **({"learning_rate": learning_rate} if learning_rate else {}),
                         **({"clipnorm": clipnorm} if clipnorm else {})}
        self.history_from = [data] if history_from_log else None
        if later is not None and spec["label"].get("events"):
            raise ZooError(f"compare --later {later}: an event log's rows are all positives (negatives are sampled in "
                           "the spec's own splits only), so later rows rank nothing; compare on the test split")
        self.processed = datasets.prepare(spec, data, verbose=False)
        self._later_processed = None
        if self.processed.num_rows("test"):
            check_two_classes(self.processed.column("test", "labels").reshape(-1), f"the test split of {data}")
        if later is not None:  # refused now, not after the models trained
            check_two_classes(self.later_processed().column("all", "labels").reshape(-1), f"the rows of {later}")

    # -- cells --------------------------------------------------------------------------------------
    def dependencies(self, row, seed, grid_point=None):
        """Reproduction's, and the spec, the training options, the later file and the histories' source."""
        return {**super().dependencies(row, seed, grid_point), "spec": self.spec, "training": self.training,
                "later": fingerprint([self.later]) if self.later is not None else None,
                "history_from": self.history_from}

    def _recipe(self, row, seed, grid_point=None):
        recipe = get_recipe(super()._recipe(row, seed, grid_point), **self.training)
        if recipe.early_stopping_patience is None:
            recipe = get_recipe(recipe, early_stopping_patience=PATIENCE)
        return recipe

    def later_processed(self):
        """The later file read through the fitted preprocessing (its histories also from the training log)."""
        if self._later_processed is None and self.later is not None:
            from zoo import datasets

            self._later_processed = datasets.prepare(None, self.later, preprocessing=self.processed.preprocessing(),
                                                     history_from=self.history_from, verbose=False)
            if not self._later_processed.info.get("labeled", True):
                raise ZooError(f"{self.later}: no label column, so no metric can be computed on its rows")
        return self._later_processed

    def train_cell(self, row, seed, grid_point=None):
        from zoo.datasets.pipeline import make_dataset

        model, result, labels, scores = super().train_cell(row, seed, grid_point)
        directory = self.out / "cells" / _slug(row.label)
        directory.mkdir(parents=True, exist_ok=True)
        result["train_rows"] = int(self.processed.num_rows("train"))
        result["samples_per_second"] = (result["train_rows"] * result["epochs_run"] / result["fit_seconds"]
                                        if result["fit_seconds"] else None)
        result["scoring_us_per_row"] = 1e6 * result["test_seconds"] / max(result["test_rows"], 1)
        later = self.later_processed()
        if later is not None:
            scoring = time.perf_counter()
            dataset, _ = make_dataset(later, "all", batch_size=scoring_batch(1024, later.schema.sequence_length),
                                      shuffle=False)
            later_labels, later_scores, _ = predict_rows(model, dataset)
            result["later_seconds"] = round(time.perf_counter() - scoring, 4)
            save_array(directory / f"seed{seed}_later_scores.npy", later_scores.astype("float32"))
            save_array(self.out / "later_labels.npy", later_labels.astype("float32"))
            save_array(self.out / "later_lines.npy", later.source_lines("all"))  # each scored row's file line
            result["later_auc"] = auc(later_labels, later_scores)
        model.save_to_preset(str(directory / f"seed{seed}_preset"), preprocessing=self.processed.preprocessing(),
                             metadata={"compare": {"seed": seed, "val_auc": result["val_auc"],
                                                   "test_auc": result["test_auc"], "recipe": result["recipe"]}})
        return model, result, labels, scores

    # -- the leaderboard ----------------------------------------------------------------------------
    def _sets(self):
        """{name: (labels [n], raw users [n] or None, baseline scores {name: [n]})} of the scored rows."""
        split_arrays = baseline_recipes.split_arrays
        sets = {}
        labels_path = self.out / "test_labels.npy"
        if labels_path.exists():
            train = split_arrays(self.processed, "train")
            rows = split_arrays(self.processed, "test")
            labels = np.load(labels_path)
            if not np.array_equal(labels.reshape(-1), rows["labels"].reshape(-1)):
                raise ZooError("compare: the test rows scored are not the test split's rows in order")
            sets["test"] = (labels, rows.get("user"), baseline_recipes.baseline_scores(train, rows))
        later = self.later_processed()
        if later is not None and (self.out / "later_labels.npy").exists():
            parts = [split_arrays(self.processed, split) for split in ("train", "validation", "test")]
            known = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
            rows = split_arrays(later, "all")
            sets["later"] = (np.load(self.out / "later_labels.npy"), rows.get("user"),
                             baseline_recipes.baseline_scores(known, rows))
        return sets

    def summarise(self):
        """leaderboard.json, leaderboard.md and leaderboard.png from every model's finished cells."""
        sets = self._sets()
        board = {"data": str(self.path), "later": None if self.later is None else str(self.later),
                 "history_from": self.history_from, "models": [], "baselines": {}}
        for name, (labels, users, scores) in sets.items():
            board["baselines"][name] = {base: _metrics(labels, users, s) for base, s in scores.items()}
        cells = [(row, *self._results(row)) for row in self.table.rows]
        cells = [(row, results, scores) for row, results, scores in cells if results]
        later_scores = {row.label: [np.load(self.out / "cells" / _slug(row.label) / f"seed{r['seed']}_later_scores.npy")
                                    for r in results] for row, results, _ in cells if "later" in sets}
        resampled = {}  # set -> (AUCs [vectors, resamples] of every model seed and the best baseline, their index)
        for name, (labels, _, scores) in sets.items():
            best = max(board["baselines"][name], key=lambda b: board["baselines"][name][b]["auc"])
            vectors = [scores[best]] + [v for row, _, test in cells for v in (test if name == "test" else
                                                                              later_scores[row.label])]
            resampled[name] = (best, bootstrap_aucs(labels, np.stack(vectors), resamples=BOOTSTRAP))
        offset = 1
        for row, results, test_scores in cells:
            entry = {"model": row.model, "seeds": len(results), "parameters": results[0]["parameters"],
                     "epochs_run": [r["epochs_run"] for r in results],
                     "val_auc": _spread([r["val_auc"] for r in results]),
                     "samples_per_second": float(np.mean([r["samples_per_second"] for r in results])),
                     "scoring_us_per_row": float(np.mean([r["scoring_us_per_row"] for r in results]))}
            for name, (labels, users, scores) in sets.items():
                stacked = np.stack(test_scores if name == "test" else later_scores[row.label])
                per_seed = [_metrics(labels, users, s) for s in stacked]
                best, aucs = resampled[name]
                seeds = len(stacked)
                entry[name] = {key: _spread([m[key] for m in per_seed if m[key] is not None])
                               for key in ("auc", "logloss", "gauc")}
                try:
                    test = paired_bootstrap(labels, stacked, np.repeat(scores[best][None], seeds, axis=0),
                                            aucs=(aucs[offset:offset + seeds], np.repeat(aucs[:1], seeds, axis=0)))
                except ZooError:  # too few rows of both classes to resample
                    test = {"difference": float(np.mean([auc(labels, v) for v in stacked]) - auc(labels, scores[best])),
                            "ci95": [float("nan"), float("nan")]}
                entry[name]["vs_best_baseline"] = {"baseline": best, "difference": test["difference"],
                                                   "ci95": test["ci95"], "beats": bool(test["ci95"][0] > 0)}
            entry["best_seed"] = results[int(np.argmax([r["val_auc"] for r in results]))]["seed"]
            board["models"].append(entry)
            offset += len(results)
        if board["models"]:
            winner = max(board["models"], key=lambda m: m["val_auc"]["mean"])
            source = self.out / "cells" / _slug(winner["model"]) / f"seed{winner['best_seed']}_preset"
            board["winner"] = {"model": winner["model"], "seed": winner["best_seed"], "preset": str(self.out / "preset"),
                               "chosen_by": "the best mean validation AUC"}
            if source.exists():
                old = self.out / "preset"
                with replacing_folder(old, owned=tuple(os.listdir(old)) if old.is_dir() else ()) as scratch:
                    shutil.copytree(source, scratch, dirs_exist_ok=True)
        for name, text in (("leaderboard.json", json.dumps(board, indent=2)), ("leaderboard.md", markdown(board))):
            with new_file(self.out / name) as f:
                f.write(text)
        if board["models"]:
            from zoo.recipes import plots

            plots.leaderboard(board, self.out / "leaderboard.png")
        return board


def _metrics(labels, users, scores):
    """{"auc", "logloss", "gauc"} of one score vector (gauc None without users, or with no user of both classes)."""
    try:
        grouped = None if users is None else gauc(users, labels, scores)
    except ZooError:
        grouped = None
    return {"auc": auc(labels, scores), "logloss": logloss(labels, scores), "gauc": grouped}


def _spread(values):
    values = np.asarray(values, np.float64)
    n = len(values)
    return {"mean": float(values.mean()) if n else None, "sd": float(values.std(ddof=1)) if n > 1 else None,
            "ci95_half": float(_t95(n) * values.std(ddof=1) / np.sqrt(n)) if n > 1 else None}


def _shown(spread, digits=4):
    if spread["mean"] is None:
        return "-"
    return f"{spread['mean']:.{digits}f}" + (f" ± {spread['sd']:.{digits}f}" if spread["sd"] is not None else "")


def markdown(board):
    """The leaderboard as Markdown: one table per set of scored rows, models first (by AUC), then baselines."""
    lines = [f"## compare on {board['data']}", ""]
    for name in board["baselines"]:
        what = ("the spec's test split" if name == "test" else
                f"every row of {board['later']} (histories also from {', '.join(board['history_from'] or []) or 'itself'})")
        lines += [f"### {name}: {what}", "",
                  "| model | params | seeds | AUC | LogLoss | GAUC | vs best baseline (95% CI) | train samples/s | "
                  "scoring µs/row |", "|---|---|---|---|---|---|---|---|---|"]
        for m in sorted(board["models"], key=lambda m: -m[name]["auc"]["mean"]):
            vs = m[name]["vs_best_baseline"]
            verdict = "beats" if vs["beats"] else "does NOT beat"
            lines.append(f"| {m['model']} | {m['parameters']:,} | {m['seeds']} | {_shown(m[name]['auc'])} | "
                         f"{_shown(m[name]['logloss'])} | {_shown(m[name]['gauc'])} | {verdict} {vs['baseline']}: "
                         f"{vs['difference']:+.4f} ({vs['ci95'][0]:+.4f} .. {vs['ci95'][1]:+.4f}) | "
                         f"{m['samples_per_second']:,.0f} | {m['scoring_us_per_row']:.1f} |")
        for base, metrics in sorted(board["baselines"][name].items(), key=lambda item: -item[1]["auc"]):
            grouped = "-" if metrics["gauc"] is None else f"{metrics['gauc']:.4f}"
            lines.append(f"| baseline: {base} | - | - | {metrics['auc']:.4f} | {metrics['logloss']:.4f} | {grouped} | "
                         "- | - | - |")
        lines.append("")
    if "winner" in board:
        w = board["winner"]
        lines.append(f"Winner (by {w['chosen_by']}): {w['model']} (seed {w['seed']}), preset in {w['preset']}.")
    return "\n".join(lines) + "\n"


def compare(models, data, spec, out="runs/compare", **options):
    """Runs (or completes) a comparison; returns the leaderboard dict. See `Comparison`. `out` is held while
    it runs (zoo.recipes.train.folder_lock): a second comparison on it is refused in one line."""
    comparison = Comparison(models, data, spec, out, **options)
    with folder_lock(str(out)):
        return comparison.run()
