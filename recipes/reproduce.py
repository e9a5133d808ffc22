"""`reproduce(table, path)`: a paper's table on the data a user has, cell by cell, resumable.

    python -m zoo reproduce rest-table2 --path ml-100k/ --out runs/reproduce
    python -m zoo reproduce suan-table2 --path UserBehavior.csv --out runs/reproduce
    python -m zoo reproduce deres-table2 --path train.txt --data criteo
    python -m zoo reproduce scaling --path UserBehavior.csv
    python -m zoo reproduce deres-scaling --path train.txt

A table is rows (a label, a registered model, its hyperparameters at the paper's fairness sizes, the
recipe) run over the recipe's seeds. Each (row, seed) is a cell: it builds the model after seeding,
trains it by the recipe (`zoo.recipes.fit`: batch size, trainer, schedule, early stopping on the
validation split), scores the test split and writes `cells/<label>/seed<k>.json` (metrics, wall time,
parameters) and the test scores (`.npy`). A finished cell is kept and skipped by the next run, so a
table is completed over several runs. Where the recipe has a grid (ReST: learning rate x weight
decay), seed 0 runs every grid point, the best by the monitor on the VALIDATION split is chosen
(`cells/<label>/grid.json`) and the other seeds run with it; the test split never picks anything.

The summary (`table.md`, `table.json`, `auc.png`) gives per row: test AUC and LogLoss mean ± s.d.
over seeds with a 95 % t-interval, GAUC, RelaImpr against the reference row, the paired bootstrap
(10^4 resamples of the test rows; the statistic is the seed-mean AUC difference) against each
reference, and the wall time. The scaling tables fit a power law to AUC against training compute
(parameters x samples) per model and plot it: `scaling` SUAN's (SUAN Figure 4: data fractions and model
grades of SUAN, HSTU, DIN), `deres-scaling` DeRes' (DeRes Figure 5, eq 12: depths 2-16 of DeRes-P, the
residual-only Transformer and DenseFormer).
"""

import dataclasses
import hashlib
import itertools
import json
import time
from pathlib import Path

import keras
import numpy as np

from zoo.errors import ZooError
from zoo.outputs import fingerprint, new_file
from zoo.recipes import plots
from zoo.recipes.evaluate import predict_rows
from zoo.recipes.fit import data_options, fit, model_overrides
from zoo.recipes.metrics import auc, bootstrap_aucs, gauc, logloss, paired_bootstrap, rela_impr
from zoo.recipes.protocols import get_recipe
from zoo.recipes.scaling import FORMULAS, fit_scaling_law


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a table: `label` (as the paper names it), the registered `model`, its
    `hyperparameters`, the `recipe` (None: the table's) with `recipe_overrides`, and `fraction` of the
    training rows."""

    label: str
    model: str
    hyperparameters: dict = dataclasses.field(default_factory=dict)
    recipe: str | None = None
    fraction: float = 1.0
    recipe_overrides: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Table:
    """A paper's table: the data set (and its protocol options), the recipe, the rows, the reference
    rows the bootstrap compares against, and the paper's claims a reader checks."""

    name: str
    data: str
    recipe: str
    rows: tuple
    references: tuple
    data_options: dict = dataclasses.field(default_factory=dict)
    claims: str = ""
    scaling_law: str | None = None  # a scaling table: the law (zoo.recipes.scaling.LAWS) fitted per model


BOOTSTRAP = 10_000  # resamples of the test rows for every paired comparison

# Fairness sizes. SUAN §4.1.4: embedding 8 (the reader's), 2 layers, 2 heads, MLP [1024, 512, 256, 1]
# with Dice for every attention model. ReST public: item embedding 32 (the reader's), 2 encoder + 2
# decoder layers, head MLP [256, 128, 64]; the baselines at similar width and depth.
SUAN_HEAD = {"mlp_units": (1024, 512, 256)}
REST_HEAD = {"mlp_units": (256, 128, 64)}

TABLES = {
    "rest-table2": Table(
        name="rest-table2",
        data="movielens",
        recipe="rest",
        rows=(
            Row("ReST", "rest", {"model_dim": 32, "num_heads": 4, "encoder_depth": 2, "decoder_depth": 2, **REST_HEAD}),
            Row("Trans.", "transformer", {"width": 32, "num_heads": 4, "num_layers": 2, **REST_HEAD}),
            Row("LLaMA", "llama", {"width": 32, "num_heads": 4, "num_layers": 2, **REST_HEAD}),
            Row("HSTU", "hstu", {"num_layers": 2, "num_heads": 4, "attention_dim": 8, "linear_dim": 8, **REST_HEAD}),
            Row("DIN", "din", {"attention_units": (64, 32), **REST_HEAD}),
            Row("FM", "fm", {}),
        ),
        references=("FM", "DIN"),
        claims="ReST first; ReST > HSTU, LLaMA, Trans. > DIN > FM (ReST Table 2, ML-1M: AUC 0.8099).",
    ),
    "suan-table2": Table(
        name="suan-table2",
        data="taobao",
        recipe="suan",
        rows=(
            Row("SUAN", "suan", {"num_layers": 2, "num_heads": 2, **SUAN_HEAD}),
            Row("LightSUAN k=8 r=2", "lightsuan",
                {"num_layers": 2, "num_heads": 2, "window_size": 8, "dilation": 2, "parallel_candidates": 1, **SUAN_HEAD}),
            Row("LightSUAN k=8 r=4", "lightsuan",
                {"num_layers": 2, "num_heads": 2, "window_size": 8, "dilation": 4, "parallel_candidates": 1, **SUAN_HEAD}),
            Row("DistilSUAN k=8 r=2", "lightsuan",
                {"num_layers": 2, "num_heads": 2, "window_size": 8, "dilation": 2, "parallel_candidates": 1, **SUAN_HEAD},
                recipe="distill",
                # the teacher: the SUAN row (full attention), trained online with the student (eq 17)
                recipe_overrides={"trainer_options": {"teacher": "suan", "temperature": 2.0, "distillation_weight": None,
                                                      "teacher_hyperparameters": {"num_layers": 2, "num_heads": 2, **SUAN_HEAD}}}),
            Row("BST", "bst", {"num_layers": 2, "num_heads": 2, **SUAN_HEAD}),
            Row("HSTU", "hstu", {"num_layers": 2, "num_heads": 2, **SUAN_HEAD}),
            Row("DIN", "din", SUAN_HEAD),
            Row("CAN", "can", SUAN_HEAD),
            # the long-sequence baselines retrieve k = 50 behaviours (SIM's and ETA's default; TWIN's is 100,
            # more than a history of 50 holds): at sequence_length <= 50 the search keeps the whole history
            Row("SIM (soft)", "sim_soft", {"k": 50, **SUAN_HEAD}),
            Row("ETA", "eta", {"k": 50, **SUAN_HEAD}),
            Row("TWIN", "twin", {"k": 50, **SUAN_HEAD}),
        ),
        references=("DIN",),
        claims="SUAN > LightSUAN > BST, HSTU > DIN; DistilSUAN >= LightSUAN; LightSUAN with r <= 4 close to "
        "SUAN (SUAN Table 2, Taobao/Eleme).",
    ),
    "deres-table2": Table(
        name="deres-table2",
        data="criteo",
        recipe="deres",
        rows=(
            Row("DeRes-P", "deres_p", {"num_layers": 8, "width": 128, "num_heads": 4, "num_blocks": 4}),
            Row("DeRes-S", "deres_s", {"num_layers": 8, "width": 128, "num_heads": 4, "num_blocks": 4}),
            Row("Residual", "ctr_transformer", {"num_layers": 8, "width": 128, "num_heads": 4}),
            Row("AttnRes", "attnres", {"num_layers": 8, "width": 128, "num_heads": 4, "num_blocks": 4}),
            Row("DenseFormer", "denseformer", {"num_layers": 8, "width": 128, "num_heads": 4}),
            Row("mHC", "mhc", {"num_layers": 8, "width": 128, "num_heads": 4}),
            Row("FM", "fm", {}),
            Row("DeepFM", "deepfm", {}),
            Row("DCNv2", "dcnv2", {}),
            Row("AutoInt", "autoint", {}),
            Row("FiBiNET", "fibinet", {}),
        ),
        references=("Residual",),
        claims="DeRes-P/S > AttnRes, DenseFormer, mHC > Residual > the interaction models (DeRes Table 2, "
        "Criteo and Avazu). Only samples of Criteo/Avazu exist here: a smoke run, not a reproduction.",
    ),
    "scaling": Table(
        name="scaling",
        data="taobao",
        recipe="suan",
        rows=tuple(
            Row(f"{label} {int(fraction * 100)}%", model, {**hp, **SUAN_HEAD}, fraction=fraction)
            for (label, model, hp), fraction in itertools.product(
                (("SUAN", "suan", {"num_layers": 2, "num_heads": 2}),
                 ("HSTU", "hstu", {"num_layers": 2, "num_heads": 2}),
                 ("DIN", "din", {})),
                (0.125, 0.25, 0.5, 0.75, 1.0),
            )
        ) + tuple(
            Row(f"SUAN {layers} layers", "suan", {"num_layers": layers, "num_heads": 2, **SUAN_HEAD})
            for layers in (1, 4)
        ),
        references=(),
        claims="AUC grows with training compute C = parameters x training samples as a power law "
        "E - A / (C - B)^alpha, faster for SUAN than for HSTU and DIN (SUAN Figure 4); each model's points "
        "are five data fractions (and, for SUAN, two more sizes).",
        scaling_law="suan",
    ),
    "deres-scaling": Table(
        name="deres-scaling",
        data="criteo",
        recipe="deres",
        rows=tuple(
            Row(f"{label} L={layers}", model, {"num_layers": layers, "width": 64, "num_heads": 4, **blocks})
            for label, model in (("DeRes-P", "deres_p"), ("Residual", "ctr_transformer"),
                                 ("DenseFormer", "denseformer"))
            for layers in (2, 4, 8, 12, 16)
            for blocks in ([{"num_blocks": min(layers, 4)}] if model == "deres_p" else [{}])  # B divides L
        ),
        references=(),
        claims="AUC(C) = alpha - beta C^-gamma with a steeper exponent for DeRes-P than for the residual-only "
        "Transformer (gamma 0.118 vs 0.071, DeRes Figure 5; five depths L in 2..16 at width 64).",
        scaling_law="deres",
    ),
}


def get_table(name):
    if name not in TABLES:
        raise ZooError(f"unknown table '{name}' (tables: {', '.join(TABLES)})")
    return TABLES[name]


def save_array(path, array):
    """np.save written whole (a temporary file beside `path`, renamed into place)."""
    with new_file(path, binary=True) as f:
        np.save(f, array)


def _slug(label):
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").lower()


def _limit(dataset, rows, batch_size):
    """The first `rows` rows of a pipeline (a smoke run), re-batched."""
    if rows is None:
        return dataset
    return dataset.unbatch().take(rows).batch(batch_size)


def _fraction(dataset, fraction, seed):
    """(a fixed `fraction` of the training rows, reshuffled each epoch; its number of samples), from one
    counting pass over the data."""
    shapes = [np.asarray(batch[1]).shape for batch in dataset.as_numpy_iterator()]
    rows, per_row = sum(shape[0] for shape in shapes), (shapes[0][1] if shapes and len(shapes[0]) > 1 else 1)
    if fraction >= 1.0:
        return dataset, rows * per_row
    kept = int(rows * fraction)
    return dataset.unbatch().take(kept).cache().shuffle(16_384, seed=seed).batch(256), kept * per_row


class Reproduction:
    """Runs one table (see the module docstring). `smoke=True` trains tiny models on `max_rows` rows of
    each split for one epoch and one seed (what CI runs); a smoke run writes under `<out>/smoke/`."""

    def __init__(self, table, path, out="runs/reproduce", *, data=None, seeds=None, grid=True, smoke=False,
                 max_rows=None, rows=None, epochs=None, data_options=None, log=print):
        self.table = get_table(table) if isinstance(table, str) else table
        self.path = path
        self.data = data or self.table.data
        root = Path(out) / (f"smoke/{self.table.name}" if smoke else self.table.name)
        self.out = root if data is None or data == self.table.data else root.with_name(f"{root.name}-{data}")
        self.smoke = smoke
        self.max_rows = max_rows or (300 if smoke else None)
        self.grid = grid and not smoke
        self.epochs = 1 if smoke else epochs
        self.seeds = seeds
        unknown = [name for name in rows or () if not any(name in (r.label, r.model) for r in self.table.rows)]
        if unknown:
            raise ZooError(f"{self.table.name} has no row {', '.join(repr(n) for n in unknown)} (rows: "
                           f"{', '.join(repr(r.label) for r in self.table.rows)}; a model name selects its rows too)")
        self.selected = [r for r in self.table.rows if rows is None or r.label in rows or r.model in rows]
        self.log = log
        self.data_options = {**self.table.data_options, **(data_options or {})}

    # -- data ---------------------------------------------------------------------------------------
    def _load(self, split, recipe, model_name, training):
        from zoo import datasets

        options = data_options(recipe, model_name) if training else {"batch_size": recipe.batch_size}
        if self.smoke:
            options = {**options, "batch_size": max(8, min(64, options["batch_size"]))}
        dataset, schema = datasets.load(
            self.data, self.path, split=split, seed=0, verbose=False, **options, **self.data_options
        )
        return _limit(dataset, self.max_rows, options["batch_size"]), schema

    # -- one cell -----------------------------------------------------------------------------------
    def _recipe(self, row, seed, grid_point=None):
        recipe = get_recipe(row.recipe or self.table.recipe, **row.recipe_overrides)
        overrides = {"seeds": (seed,), **(grid_point or {})}
        if self.smoke and recipe.trainer_options.get("teacher_hyperparameters"):
            options = dict(recipe.trainer_options)
            options["teacher_hyperparameters"] = self._hyperparameters(
                dataclasses.replace(row, hyperparameters=options["teacher_hyperparameters"]), None)
            overrides["trainer_options"] = options
        if self.epochs:
            overrides["epochs"] = self.epochs
        if self.smoke:
            overrides["batch_size"] = 64
        return get_recipe(recipe, **overrides)

    def _hyperparameters(self, row, cls):
        hp = dict(row.hyperparameters)
        if self.smoke:  # tiny, whatever the fairness sizes
            for key, value in list(hp.items()):
                if key in ("mlp_units", "attention_units"):
                    hp[key] = (8,)
                elif key in ("width", "model_dim"):
                    hp[key] = 8
                elif key in ("attention_dim", "linear_dim"):
                    hp[key] = 4
                elif key in ("num_layers", "encoder_depth", "decoder_depth"):
                    hp[key] = 1
                elif key == "num_blocks":
                    hp[key] = 1
                elif key == "k":  # the long-sequence rows' top-k: within a smoke run's short histories
                    hp[key] = 4
                elif key == "num_heads":
                    hp[key] = 2
        return hp

    def dependencies(self, row, seed, grid_point=None):
        """What one cell's result depends on: the table's row, the seed and grid point, the data (its files'
        paths, sizes and modification times) and every option that changes training or scoring, and the
        backend. A kept cell whose dependencies differ is trained again, never mixed into the summary."""
        return {"table": self.table.name, "row": dataclasses.asdict(row), "seed": seed, "grid_point": grid_point,
                "data": self.data, "files": fingerprint([self.path]), "epochs": self.epochs, "smoke": self.smoke,
                "max_rows": self.max_rows, "data_options": self.data_options, "backend": keras.backend.backend()}

    def cell_key(self, row, seed, grid_point=None):
        """A digest of the cell's `dependencies`, kept in its result as "key"."""
        text = json.dumps(self.dependencies(row, seed, grid_point), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run_cell(self, row, seed, grid_point=None, tag=None):
        """Trains and tests one (row, seed[, grid point]) cell; returns its result dict (from disk when kept
        with the same `cell_key`; each file written whole, the result last, so a killed cell is trained again)."""
        directory = self.out / "cells" / _slug(row.label)
        name = tag or f"seed{seed}"
        result_path = directory / f"{name}.json"
        key = self.cell_key(row, seed, grid_point)
        if result_path.exists():
            kept = json.loads(result_path.read_text())
            if kept.get("key") == key:
                return kept
            self.log(f"{row.label} seed {seed}: the kept cell was made from other data or options; trained again")
            result_path.unlink()
        model, result, labels, scores = self.train_cell(row, seed, grid_point)
        result["key"] = key
        directory.mkdir(parents=True, exist_ok=True)
        save_array(directory / f"{name}_scores.npy", scores.astype("float32"))
        labels_path = self.out / "test_labels.npy"
        if labels_path.exists():
            if not np.array_equal(np.load(labels_path), labels.astype("float32")):
                raise ZooError(f"{row.label}: the test rows differ from the other cells' (changed data or options?)")
        else:
            save_array(labels_path, labels.astype("float32"))
        with new_file(result_path) as f:
            f.write(json.dumps(result, indent=2))
        return result

    def train_cell(self, row, seed, grid_point=None):
        """Trains and tests one cell, nothing cached: (the trained model, its result dict, the test labels
        and scores). `scripts/build_real_presets.py` keeps the model as a preset."""
        import zoo

        recipe = self._recipe(row, seed, grid_point)
        entry = zoo.registry.entry(row.model)
        started = time.time()
        train, schema = self._load("train", recipe, row.model, training=True)
        samples = None
        if row.fraction < 1.0 or self.table.scaling_law:  # a scaling fit needs the sample count
            train, samples = _fraction(train, row.fraction, seed)
        val, _ = self._load("validation", recipe, row.model, training=True)
        keras.utils.set_random_seed(seed)  # before the model: its initial weights depend on the seed only
        hp = {**model_overrides(recipe, entry.cls), **self._hyperparameters(row, entry.cls)}
        model = zoo.get(row.model, schema=schema.with_candidates(1), **hp)
        fitting = time.time()
        history = fit(model, train, val, recipe=recipe, verbose=0, jit_compile=False if self.smoke else "auto")
        fit_seconds = time.time() - fitting
        plain_val, _ = self._load("validation", recipe, row.model, training=False)
        val_labels, val_scores, _ = predict_rows(model, plain_val)
        test, _ = self._load("test", recipe, row.model, training=False)
        scoring = time.time()
        labels, scores, users = predict_rows(model, test)
        test_seconds = time.time() - scoring
        result = {
            "label": row.label, "model": row.model, "seed": seed, "recipe": recipe.name, "grid_point": grid_point,
            "hyperparameters": {k: (list(v) if isinstance(v, tuple) else v) for k, v in hp.items()},
            "fraction": row.fraction, "parameters": int(model.count_params()),
            "train_samples": samples,
            "epochs_run": len(history.history.get("loss", [])),
            "val_auc": auc(val_labels, val_scores), "test_auc": auc(labels, scores),
            "test_logloss": logloss(labels, scores),
            "test_gauc": _gauc_or_none(users, labels, scores),
            "test_rows": int(len(labels)), "wall_seconds": round(time.time() - started, 1),
            "fit_seconds": round(fit_seconds, 3), "test_seconds": round(test_seconds, 4),
            "backend": keras.backend.backend(),
        }
        return model, result, labels, scores

    def _best_grid_point(self, row):
        """Seed 0 over the recipe's grid; the point with the best validation AUC (kept in grid.json)."""
        recipe = get_recipe(row.recipe or self.table.recipe)
        if not self.grid or not recipe.grid:
            return None
        directory = self.out / "cells" / _slug(row.label)
        chosen = directory / "grid.json"
        if chosen.exists():
            return json.loads(chosen.read_text())["best"]
        keys = sorted(recipe.grid)
        points = [dict(zip(keys, values)) for values in itertools.product(*(recipe.grid[k] for k in keys))]
        results = []
        for i, point in enumerate(points):
            tag = "grid_" + "_".join(f"{k}{point[k]:g}" for k in keys)
            result = self.run_cell(row, 0, point, tag=tag)
            results.append(result)
            self.log(f"  {row.label} grid {i + 1}/{len(points)} {point}: validation AUC {result['val_auc']:.4f}")
        best = points[int(np.argmax([r["val_auc"] for r in results]))]
        directory.mkdir(parents=True, exist_ok=True)
        with new_file(chosen) as f:
            f.write(json.dumps({"best": best, "points": points, "val_auc": [r["val_auc"] for r in results]}, indent=2))
        return best

    # -- the table ----------------------------------------------------------------------------------
    def run(self):
        """Runs every missing cell (a progress line each; seed-major: each seed over every row, then the
        next seed), then writes the summary; returns it."""
        from zoo import registry

        self.out.mkdir(parents=True, exist_ok=True)
        cells = []
        for row in self.selected:
            if row.model not in registry.names():
                self.log(f"{row.label}: model '{row.model}' is not registered in this zoo; row skipped")
                continue
            recipe = get_recipe(row.recipe or self.table.recipe)
            seeds = self.seeds or ((0,) if self.smoke else recipe.seeds)
            try:
                best = self._best_grid_point(row)
            except ZooError as error:
                self.log(f"{row.label}: {error}; row skipped")
                continue
            for seed in seeds:
                cells.append((row, seed, best))
        # seed-major: every row's first seed before any row's second, so an interrupted run leaves a whole
        # table at fewer seeds rather than some rows finished and others missing
        order = {seed: i for i, seed in enumerate(dict.fromkeys(seed for _, seed, _ in cells))}
        cells.sort(key=lambda cell: order[cell[1]])  # stable: the table's row order within a seed
        for i, (row, seed, best) in enumerate(cells):
            tag = f"seed{seed}"
            done = (self.out / "cells" / _slug(row.label) / f"{tag}.json").exists()
            try:
                result = self.run_cell(row, seed, best)
            except ZooError as error:
                self.log(f"[{i + 1}/{len(cells)}] {row.label} seed {seed}: {error}; cell skipped")
                continue
            state = "kept" if done else f"{result['wall_seconds']:.0f} s"
            self.log(f"[{i + 1}/{len(cells)}] {row.label} seed {seed}: test AUC {result['test_auc']:.4f} "
                     f"(validation {result['val_auc']:.4f}, {result['epochs_run']} epochs) {state}")
        return self.summarise()

    def _results(self, row):
        """(results, test scores) of `row`'s kept seed cells that belong to this run: its seeds (all kept
        ones when the run names none) and the same `cell_key` (a cell left by a run on other data or
        options is not summarised)."""
        directory = self.out / "cells" / _slug(row.label)
        found = sorted(directory.glob("seed*.json")) if directory.exists() else []
        kept = []
        for path in found:
            result = json.loads(path.read_text())
            if self.seeds is not None and result["seed"] not in self.seeds:
                continue
            if result.get("key") == self.cell_key(row, result["seed"], result.get("grid_point")):
                kept.append((result, np.load(path.with_name(path.stem + "_scores.npy"))))
        return [result for result, _ in kept], [scores for _, scores in kept]

    def summarise(self):
        """table.json, table.md and auc.png from every row's finished cells (a run limited to some rows
        still writes the whole table)."""
        labels_path = self.out / "test_labels.npy"
        labels = np.load(labels_path) if labels_path.exists() else None
        rows = []
        scores_by_label = {}
        for row in self.table.rows:  # every finished row, not only this run's --row selection
            results, scores = self._results(row)
            if not results:
                continue
            aucs = np.array([r["test_auc"] for r in results])
            loglosses = np.array([r["test_logloss"] for r in results])
            n = len(aucs)
            half = _t95(n) * aucs.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
            gaucs = [r["test_gauc"] for r in results if r["test_gauc"] is not None]
            scores_by_label[row.label] = ([r["seed"] for r in results], scores)  # in the order of `scores`
            rows.append({
                "label": row.label, "model": row.model, "seeds": n, "parameters": results[0]["parameters"],
                "fraction": row.fraction, "train_samples": results[0]["train_samples"],
                "auc_mean": float(aucs.mean()), "auc_sd": float(aucs.std(ddof=1)) if n > 1 else float("nan"),
                "auc_ci95": [float(aucs.mean() - half), float(aucs.mean() + half)],
                "logloss_mean": float(loglosses.mean()), "logloss_sd": float(loglosses.std(ddof=1)) if n > 1 else float("nan"),
                "gauc_mean": float(np.mean(gaucs)) if gaucs else None,
                "val_auc_mean": float(np.mean([r["val_auc"] for r in results])),
                "wall_seconds": float(sum(r["wall_seconds"] for r in results)),
                "grid_point": results[0]["grid_point"],
            })
        by_label = {r["label"]: r for r in rows}
        resampled = self._resampled_aucs(labels, scores_by_label, by_label)
        for entry in rows:
            entry["vs"] = {}
            for reference in self.table.references:
                if reference not in by_label or reference == entry["label"] or labels is None:
                    continue
                common = sorted(set(scores_by_label[entry["label"]][0]) & set(scores_by_label[reference][0]))

                def pick(label):  # (scores, resampled AUCs) of `label`'s common seeds, in `common`'s order
                    seeds, scores = scores_by_label[label]
                    return (np.stack([scores[seeds.index(k)] for k in common]),
                            np.stack([resampled[label, k] for k in common]))

                (a, aucs_a), (b, aucs_b) = pick(entry["label"]), pick(reference)
                test = paired_bootstrap(labels, a, b, resamples=BOOTSTRAP, aucs=(aucs_a, aucs_b))
                entry["vs"][reference] = {
                    "rela_impr": rela_impr(entry["auc_mean"], by_label[reference]["auc_mean"])
                    if by_label[reference]["auc_mean"] > 0.5 else None,
                    "auc_difference": test["difference"], "ci95": test["ci95"], "p_value": test["p_value"],
                }
        summary = {"table": self.table.name, "data": self.data, "data_options": self.data_options,
                   "claims": self.table.claims, "rows": rows, "smoke": self.smoke}
        if self.table.scaling_law:
            summary["fits"] = self._scaling_fits(rows)
        for name, text in (("table.json", json.dumps(summary, indent=2)), ("table.md", markdown(summary))):
            with new_file(self.out / name) as f:
                f.write(text)
        if rows:
            plots.table_auc(rows, self.out / "auc.png")
        return summary

    def _resampled_aucs(self, labels, scores_by_label, by_label):
        """{(label, seed): AUC on each of the BOOTSTRAP resamples} for every cell a reference comparison
        needs, all on the same resamples (one pass over each cell's scores, however many comparisons)."""
        if labels is None or not any(reference in by_label for reference in self.table.references):
            return {}
        keys, vectors = [], []
        for label, (seeds, scores) in scores_by_label.items():
            for seed, vector in zip(seeds, scores):
                keys.append((label, seed))
                vectors.append(vector)
        return dict(zip(keys, bootstrap_aucs(labels, np.stack(vectors), resamples=BOOTSTRAP)))

    def _scaling_fits(self, rows):
        fits = {}
        for model in sorted({r["model"] for r in rows}):
            points = [r for r in rows if r["model"] == model]
            compute = [r["parameters"] * r["train_samples"] for r in points]
            try:
                fit_ = fit_scaling_law(compute, [r["auc_mean"] for r in points], law=self.table.scaling_law)
            except ZooError as error:
                fits[model] = {"error": str(error)}
                continue
            fits[model] = fit_
            plots.scaling_law(fit_, self.out / f"scaling_{model}.png")
        return fits


def _gauc_or_none(users, labels, scores):
    if users is None:
        return None
    try:
        return gauc(users, labels, scores)
    except ZooError:  # no user with both classes (a smoke split)
        return None


def _t95(n):
    """Student's t quantile at 0.975 with n - 1 degrees of freedom (scipy.special's, lighter than scipy.stats')."""
    from scipy.special import stdtrit

    return float(stdtrit(n - 1, 0.975)) if n > 1 else float("nan")


def markdown(summary):
    """The summary as a Markdown table."""
    references = sorted({ref for r in summary["rows"] for ref in r.get("vs", {})})
    head = ["model", "params", "seeds", "test AUC (mean ± s.d.)", "95% CI", "LogLoss", "GAUC"]
    for ref in references:
        head += [f"RelaImpr vs {ref}", f"p (> {ref})"]
    head += ["wall s"]
    options = ", ".join(f"{k}={v}" for k, v in summary.get("data_options", {}).items())
    lines = [f"### {summary['table']} on {summary['data']}{f' ({options})' if options else ''}"
             f"{' (smoke)' if summary['smoke'] else ''}", "",
             f"Paper's claim: {summary['claims']}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(summary["rows"], key=lambda r: -r["auc_mean"]):
        cells = [r["label"], f"{r['parameters']:,}", str(r["seeds"]), f"{r['auc_mean']:.4f} ± {r['auc_sd']:.4f}",
                 f"[{r['auc_ci95'][0]:.4f}, {r['auc_ci95'][1]:.4f}]", f"{r['logloss_mean']:.4f}",
                 f"{r['gauc_mean']:.4f}" if r["gauc_mean"] is not None else "-"]
        for ref in references:
            vs = r.get("vs", {}).get(ref)
            cells += ([f"{vs['rela_impr']:+.2f}%" if vs["rela_impr"] is not None else "-", f"{vs['p_value']:.4f}"]
                      if vs else ["-", "-"])
        cells.append(f"{r['wall_seconds']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    for model, fit_ in (summary.get("fits") or {}).items():
        if "error" in fit_:
            lines.append(f"\n{model}: no fit ({fit_['error']})")
        else:
            coefficients = ", ".join(f"{k} = {v:.4g}" for k, v in fit_["coefficients"].items())
            bounds = fit_.get("at_bounds")
            caveat = (f"; {', '.join(bounds)} at the bound of {'its' if len(bounds) == 1 else 'their'} range: the "
                      "points do not determine this law" if bounds else "")
            lines.append(f"\n{model} ({len(fit_['points']['auc'])} points): AUC(C) = {FORMULAS[fit_['law']]} with "
                         f"{coefficients}; R² = {fit_['r2']:.3f}{caveat}")
    return "\n".join(lines) + "\n"


def reproduce(table, path, out="runs/reproduce", **options):
    """Runs (or completes) `table` on the data at `path`; returns the summary dict. See `Reproduction`."""
    return Reproduction(table, path, out, **options).run()
