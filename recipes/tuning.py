"""KerasTuner search over the papers' structural hyperparameters and loss weights.

    zoo.recipes.tune("deres_p", train, val, schema=schema, search=["B"], max_trials=4, num_layers=2)

Each search key sets one hyperparameter; the values offered are derived from the model being tuned
(its class and the fixed hyperparameters), so every trial builds:

| key | models | sets | values offered | paper |
|---|---|---|---|---|
| B | deres_p, deres_s, attnres | num_blocks | the divisors of the model's num_layers (B must divide L) | DeRes §3 |
| B | suan, lightsuan | num_layers, the number of UABs l (the model size) | 1, 2, 3, 4 | SUAN §3.1, §4.4.1 |
| r | suan, lightsuan | dilation | 1, 2, 4, 8, at most L | SUAN §3.3.1 |
| k | suan, lightsuan | window_size | 4, 8, 16, 32, at most L | SUAN §3.3.1 |
| lambda | lightsuan | λ of eq 17: trials train the model with a SUAN teacher | 0.5, 1, 2, 4 | SUAN §3.3.2 |
| lambda_seq | rest | λ_seq: trials train with ReST's auxiliary losses | 0.01, 0.05, 0.1, 0.3 | ReST §2.3 |
| lambda_align | rest | λ_align (needs user_ features) | 0.01, 0.05, 0.1, 0.3 | ReST §2.3 |

The objective is val_auc (maximised). A search prints a line per trial (its values, val_auc and
time) and a table of all trials at the end (verbose=1; verbose=2 adds KerasTuner's own trial display
and Keras' progress bars; 0 prints nothing). An interrupted search resumes from its directory
(KerasTuner's oracle reloads its trials unless overwrite=True); the project name records the model,
the keys and a digest of everything fixed, so a search with other fixed values starts its own
project. The best trial can be saved as a preset (`save_best`).
"""

import contextlib
import dataclasses
import hashlib
import io
import json
import time
import warnings

import keras_tuner
import numpy as np

import zoo
from zoo.errors import ZooError
from zoo.recipes.fit import compile_for, make_trainer
from zoo.recipes.protocols import RECIPES, get_recipe

UAB_COUNTS = (1, 2, 3, 4)
DILATIONS = (1, 2, 4, 8)
WINDOWS = (4, 8, 16, 32)
DISTILLATION_WEIGHTS = (0.5, 1.0, 2.0, 4.0)
REST_WEIGHTS = (0.01, 0.05, 0.1, 0.3)

# What each key means, for the messages.
KEYS = {
    "B": "num_blocks (a divisor of num_layers) of deres_p, deres_s, attnres; num_layers (the UAB count) of "
    "suan, lightsuan",
    "r": "dilation of suan, lightsuan",
    "k": "window_size of suan, lightsuan",
    "lambda": "the distillation weight of eq 17, for a lightsuan student",
    "lambda_seq": "ReST's auxiliary seq-CVR loss weight, for rest",
    "lambda_align": "ReST's alignment loss weight, for rest",
}
TUNERS = {
    "random": keras_tuner.RandomSearch,
    "bayesian": keras_tuner.BayesianOptimization,
    "hyperband": keras_tuner.Hyperband,
}


def _divisors(n):
    return [b for b in range(1, n + 1) if n % b == 0]


def search_space(key, model_name, config):
    """(what `key` sets, the values offered) for the registered model `model_name` whose
    hyperparameters are `config` (class defaults updated with the fixed ones, and "schema").
    What it sets is a model hyperparameter or, for the loss weights, a trainer option
    ("distillation_weight", "seq_weight", "align_weight")."""
    from zoo.models.lightsuan import LightSUAN
    from zoo.models.suan import SUAN

    if key not in KEYS:
        raise ZooError(f"unknown search key '{key}' (keys: {', '.join(KEYS)})")
    cls = zoo.registry.entry(model_name).cls
    names = cls.hyperparameter_names()
    length = config["schema"].sequence_length
    suan_family = issubclass(cls, SUAN)
    if key == "B" and "num_blocks" in names:
        return "num_blocks", _divisors(int(config["num_layers"]))
    if key == "B" and suan_family:
        return "num_layers", list(UAB_COUNTS)
    if key == "B":
        raise ZooError(f"{model_name} has no hyperparameter num_blocks to search as B (B is {KEYS['B']})")
    if key in ("r", "k") and suan_family:
        name, values = ("dilation", DILATIONS) if key == "r" else ("window_size", WINDOWS)
        return name, [v for v in values if v <= length] or [1]
    if key in ("r", "k"):
        raise ZooError(f"{model_name} has no sparse attention to search as {key} ({key} is {KEYS[key]})")
    if key == "lambda":
        if not issubclass(cls, LightSUAN):
            raise ZooError(f"lambda weights SUAN's distillation: the student must be lightsuan, not {model_name}")
        return "distillation_weight", list(DISTILLATION_WEIGHTS)
    if model_name != "rest":
        raise ZooError(f"{key} is {KEYS[key]}, not for {model_name}")
    if key == "lambda_align" and not config["schema"].group("user"):
        raise ZooError("lambda_align weights ReST's alignment loss, which needs user_ features; the schema has none")
    return ("seq_weight" if key == "lambda_seq" else "align_weight"), list(REST_WEIGHTS)


TRAINER_OPTIONS = ("distillation_weight", "seq_weight", "align_weight")


class ZooHyperModel(keras_tuner.HyperModel):
    """A registered model whose `search` hyperparameters KerasTuner chooses; the rest stay fixed.

    A trial trains as the recipe does (its optimizer and trainer); searching a loss weight trains
    with that weight's trainer: `lambda` with SUAN's online distillation (a SUAN teacher of
    `teacher` hyperparameters at `temperature`), `lambda_seq`/`lambda_align` with ReST's auxiliary
    losses.

    Args:
        model_name: a registered model name.
        schema: the data's Schema.
        search: search keys (`KEYS`); `search_space` gives each one's values for this model.
        recipe: the training protocol that compiles each trial (name or Recipe).
        fixed: hyperparameters every trial shares.
        teacher: the SUAN teacher's hyperparameters when the trials distil (`lambda` searched, or the
            `distill` recipe); None: the recipe's.
        temperature: t of eq 17 when the trials distil; None: the recipe's (2).
        jit_compile: Keras' compile option for every trial (False skips XLA: faster for short trials).
        warm_start: a trained `model_name` model whose weights every trial starts from (a fine-tuning
            search); only keys that keep the weights' shapes (r, k, the loss weights) can be searched.
    """

    def __init__(self, model_name, schema, search, recipe="suan", fixed=None, teacher=None, temperature=None,
                 jit_compile="auto", warm_start=None):
        super().__init__(name=model_name)
        entry = zoo.registry.entry(model_name)
        self.model_name = model_name
        self.schema = zoo.Schema.from_dict(schema)
        self.fixed = dict(fixed or {})
        unknown = sorted(set(self.fixed) - set(entry.cls.hyperparameter_names()))
        if unknown:
            raise ZooError(f"{model_name} has no hyperparameter {', '.join(unknown)}")
        self.config = {**_defaults(entry.cls), **self.fixed, "schema": self.schema}
        self.search = list(search)
        if not self.search:
            raise ZooError("nothing to search: name at least one search key (" + ", ".join(KEYS) + ")")
        self.space = {key: search_space(key, model_name, self.config) for key in self.search}
        if "r" in self.search and "k" not in self.search and self.config.get("window_size") is None:
            raise ZooError(
                f"searching r (dilation) needs sparse attention: {model_name} has window_size=None; "
                "fix a window (window_size=8) or search k too"
            )
        self.teacher = dict(teacher or {})
        self.temperature = temperature
        self.jit_compile = jit_compile
        self.recipe = self._trial_recipe(get_recipe(recipe))
        if warm_start is not None:
            if getattr(warm_start, "registered_name", None) != model_name:
                raise ZooError(f"warm_start must be a {model_name} model, not {type(warm_start).__name__}")
            if "B" in self.search:
                raise ZooError("warm_start fits searches that keep the weights' shapes (r, k, loss weights), not B")
        self.warm_start = warm_start

    def _trial_recipe(self, recipe):
        """The recipe, with the trainer that a searched loss weight needs and the teacher it was given."""
        searched = {name for name, _ in self.space.values()}
        if "distillation_weight" in searched or recipe.trainer == "distillation":
            options = dict(RECIPES["distill"].trainer_options)
            if recipe.trainer == "distillation":
                options.update(recipe.trainer_options)
            if self.temperature is not None:
                options.update(temperature=self.temperature)
            if self.teacher:
                options.update(teacher_hyperparameters=self.teacher)
            return get_recipe(recipe, trainer="distillation", trainer_options=options)
        if self.teacher or self.temperature is not None:
            raise ZooError(
                "teacher and temperature are the distillation's: search lambda, or tune with recipe='distill'"
            )
        if searched & {"seq_weight", "align_weight"}:
            options = dict(RECIPES["rest"].trainer_options)
            if recipe.trainer == "rest_auxiliary":
                options.update(recipe.trainer_options)
            return get_recipe(recipe, trainer="rest_auxiliary", trainer_options=options)
        return recipe

    def choices(self, hp):
        """The hyperparameters of one trial: the fixed ones plus KerasTuner's picks (loss weights
        under their trainer option names)."""
        chosen = dict(self.fixed)
        for key in self.search:
            name, values = self.space[key]
            chosen[name] = hp.Choice(key, values)
        return chosen

    def build(self, hp):
        chosen = self.choices(hp)
        weights = {name: chosen.pop(name) for name in TRAINER_OPTIONS if name in chosen}
        model = zoo.get(self.model_name, schema=self.schema, **chosen)
        if self.warm_start is not None:
            shapes = [tuple(w.shape) for w in model.weights]
            if shapes != [tuple(w.shape) for w in self.warm_start.weights]:
                raise ZooError(f"warm_start: its weights do not fit {self.model_name} with {chosen}")
            model.set_weights(self.warm_start.get_weights())
        recipe = self.recipe
        if weights:
            recipe = get_recipe(recipe, trainer_options={**recipe.trainer_options, **weights})
        trainer = make_trainer(model, recipe)
        if not trainer.built:  # a subclassed trainer (distillation): built by one symbolic call, so weights load
            trainer(self.schema.inputs())
        compile_for(trainer, recipe, jit_compile=self.jit_compile)
        return trainer


def _defaults(cls):
    import inspect

    return {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _digest(hypermodel):
    """A short digest of everything a search holds fixed (model, schema, fixed values, recipe and teacher,
    the warm start's weights)."""
    fixed = {
        "model": hypermodel.model_name,
        "schema": hypermodel.schema.to_dict(),
        "fixed": hypermodel.fixed,
        "recipe": dataclasses.asdict(hypermodel.recipe),
    }
    if hypermodel.warm_start is not None:
        weights = hashlib.sha256()
        for array in hypermodel.warm_start.get_weights():
            weights.update(np.ascontiguousarray(array).tobytes())
        fixed["warm_start"] = weights.hexdigest()
    text = json.dumps(fixed, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _format(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Report:
    """KerasTuner's trial hooks: one line when a trial ends (its values, val_auc, seconds) and a table
    of every trial when the search ends. A trial's seconds are kept in its metrics (saved with the
    trial), so a resumed search still shows them."""

    zoo_verbose = 1

    def on_trial_begin(self, trial):
        super().on_trial_begin(trial)
        self._zoo_started = time.monotonic()

    def on_trial_end(self, trial):
        seconds = time.monotonic() - getattr(self, "_zoo_started", time.monotonic())
        self.oracle.trials[trial.trial_id].metrics.update("seconds", seconds)
        super().on_trial_end(trial)
        if self.zoo_verbose == 1:
            print(trial_line(self.oracle.trials[trial.trial_id], self.oracle), flush=True)

    def run_trial(self, trial, *args, **kwargs):
        """KerasTuner's trial (its `executions_per_trial` runs, averaged into the score), and the spread of
        the runs' best val_auc kept in the trial's metrics: what initialisation alone moves the score by."""
        histories = super().run_trial(trial, *args, **kwargs)
        name = self.oracle.objective.name
        scores = [max(h.history[name]) for h in histories
                  if hasattr(h, "history") and h.history.get(name)]
        if len(scores) > 1:
            self.oracle.trials[trial.trial_id].metrics.update("spread", float(np.std(scores, ddof=1)))
            self.oracle.trials[trial.trial_id].metrics.update("runs", float(len(scores)))
        return histories

    def on_search_end(self):
        super().on_search_end()
        if self.zoo_verbose == 1:
            print(summary_table(self.oracle), flush=True)


def _failure(trial):
    lines = [line for line in (trial.message or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else trial.status


def _values(trial):
    return "  ".join(f"{k}={_format(v)}" for k, v in trial.hyperparameters.values.items())


def _seconds(trial):
    if trial.metrics.exists("seconds"):
        return trial.metrics.get_last_value("seconds")
    return None


def _spread(trial):
    """(s.d. of the best val_auc over the trial's runs, runs), or None for a trial of one run."""
    if trial.metrics.exists("spread"):
        return trial.metrics.get_last_value("spread"), int(trial.metrics.get_last_value("runs"))
    return None


def trial_line(trial, oracle):
    """'trial 2/4  B=2  val_auc 0.7312  12.3 s' ('val_auc 0.7312 ± 0.0051 over 3 runs' with several runs per
    trial; or the failure's last line)."""
    total = oracle.max_trials or "?"
    head = f"trial {int(trial.trial_id) + 1}/{total}  {_values(trial)}"
    seconds = _seconds(trial)
    time_taken = f"  {seconds:.1f} s" if seconds is not None else ""
    if trial.status == "COMPLETED" and trial.score is not None:
        spread = _spread(trial)
        runs = f" ± {spread[0]:.4f} over {spread[1]} runs" if spread else ""
        return f"{head}  {oracle.objective.name} {trial.score:.4f}{runs}{time_taken}"
    return f"{head}  failed: {_failure(trial)}{time_taken}"


def summary_table(oracle):
    """Every trial of the search, best first: its values, score and seconds."""
    trials = sorted(oracle.trials.values(), key=lambda t: int(t.trial_id))
    keys = [hp.name for hp in oracle.hyperparameters.space]
    rows = []
    for t in trials:
        values = [_format(t.hyperparameters.values.get(k, "-")) for k in keys]
        score = f"{t.score:.4f}" if t.status == "COMPLETED" and t.score is not None else t.status.lower()
        seconds = _seconds(t)
        rows.append((t, [str(int(t.trial_id) + 1), *values, score, "-" if seconds is None else f"{seconds:.1f}"]))
    best = oracle.get_best_trials(1)
    best_id = best[0].trial_id if best else None
    rows.sort(key=lambda row: -(row[0].score if row[0].status == "COMPLETED" and row[0].score is not None
                                 else float("-inf")))
    header = ["trial", *keys, oracle.objective.name, "seconds"]
    table = [header] + [cells for _, cells in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in table]
    lines = [lines[0]] + [line + ("  best" if t.trial_id == best_id else "") for (t, _), line in zip(rows, lines[1:])]
    return "\n".join(lines)


def tune(
    model_name,
    train,
    val,
    *,
    schema,
    search=("B",),
    tuner="random",
    max_trials=10,
    epochs=1,
    directory="tuning",
    project_name=None,
    overwrite=False,
    recipe="suan",
    seed=0,
    verbose=1,
    callbacks=(),
    teacher=None,
    temperature=None,
    jit_compile="auto",
    warm_start=None,
    executions_per_trial=1,
    **fixed,
):
    """Runs (or resumes) a KerasTuner search; returns the tuner (`tuner.get_best_hyperparameters()`).

    `fixed` are the model hyperparameters every trial shares; see the module docstring for the keys.
    `warm_start`: a trained model every trial starts from (fine-tuning; see ZooHyperModel).
    `executions_per_trial`: KerasTuner's runs per trial (the score is their mean; each trial's line shows
    the runs' spread, and `lead_line` says whether the best trial's lead exceeds it)."""
    if tuner not in TUNERS:
        raise ZooError(f"unknown tuner '{tuner}' (tuners: {', '.join(TUNERS)})")
    if verbose not in (0, 1, 2):
        raise ZooError(f"verbose is {verbose!r}; it must be 0, 1 or 2")
    hypermodel = ZooHyperModel(model_name, schema, search, recipe=recipe, fixed=fixed, teacher=teacher,
                               temperature=temperature, jit_compile=jit_compile, warm_start=warm_start)
    objective = keras_tuner.Objective("val_auc", direction="max")
    project_name = project_name or f"{model_name}_{'_'.join(search)}_{_digest(hypermodel)}"
    if not isinstance(executions_per_trial, int) or isinstance(executions_per_trial, bool) or executions_per_trial < 1:
        raise ZooError(f"executions_per_trial is {executions_per_trial!r}; it must be an integer >= 1")
    options = dict(objective=objective, seed=seed, directory=str(directory), overwrite=overwrite,
                   project_name=project_name, executions_per_trial=executions_per_trial)
    cls = type(f"Zoo{TUNERS[tuner].__name__}", (_Report, TUNERS[tuner]), {})
    limit = {"max_epochs": max(epochs, 2)} if tuner == "hyperband" else {"max_trials": max_trials}
    with contextlib.redirect_stdout(io.StringIO()) if verbose == 0 else contextlib.nullcontext():
        search_tuner = cls(hypermodel, **limit, **options)  # prints "Reloading Tuner from ..." on a resume
    _check_resumed_space(search_tuner, hypermodel, f"{directory}/{project_name}")
    search_tuner.zoo_verbose = verbose
    search_tuner.search(train, validation_data=val, epochs=epochs, verbose=1 if verbose == 2 else 0,
                        callbacks=list(callbacks))
    return search_tuner


def best_line(search_tuner):
    """'best lightsuan: r=2 (dilation), lambda=1 (distillation_weight); val_auc 0.7012 (trial 3)'."""
    hypermodel = search_tuner.hypermodel
    trial = search_tuner.oracle.get_best_trials(1)[0]
    chosen = ", ".join(f"{key}={_format(value)} ({hypermodel.space[key][0]})"
                       for key, value in trial.hyperparameters.values.items())
    return f"best {hypermodel.model_name}: {chosen}; val_auc {trial.score:.4f} (trial {int(trial.trial_id) + 1})"


def lead_line(search_tuner):
    """Whether the best trial's lead over the next exceeds the spread between runs of one trial (the
    initialisation noise KerasTuner's executions_per_trial measures): one line."""
    oracle = search_tuner.oracle
    done = sorted((t for t in oracle.trials.values() if t.status == "COMPLETED" and t.score is not None),
                  key=lambda t: -t.score)
    if len(done) < 2:
        return "one completed trial: nothing to compare it with"
    best, second = done[:2]
    lead = best.score - second.score
    spreads = [s[0] for s in (_spread(best), _spread(second)) if s]
    if not spreads:
        return (f"the best trial leads the next by {lead:.4f} {oracle.objective.name}; the spread between runs of "
                "one trial is unknown (one run each): --executions-per-trial 3 measures it")
    noise = max(spreads)
    if lead > noise:
        return (f"the best trial leads the next by {lead:.4f}, more than the spread between runs of one trial "
                f"({noise:.4f} s.d.): the lead is beyond initialisation noise")
    return (f"the best trial leads the next by {lead:.4f}, within the spread between runs of one trial "
            f"({noise:.4f} s.d.): the search cannot tell these values apart")


def _check_resumed_space(search_tuner, hypermodel, where):
    """A search resumed from `where` must offer the values this model allows."""
    stored = {hp.name: list(hp.values) for hp in search_tuner.oracle.hyperparameters.space if hasattr(hp, "values")}
    for key, (_, values) in hypermodel.space.items():
        if key in stored and stored[key] != list(values):
            raise ZooError(
                f"{where} holds a search that offered {key} in {stored[key]}, but this {hypermodel.model_name} "
                f"allows {list(values)}: pass overwrite=True or another project_name"
            )


def _trained_model(trainer):
    """The zoo model a trial's trainer trains (the trainer itself when it is one)."""
    from zoo.recipes.distillation import OnlineDistillation
    from zoo.recipes.rest_training import ReSTTrainer

    if isinstance(trainer, OnlineDistillation):
        return trainer.student
    if isinstance(trainer, ReSTTrainer):
        return trainer.model
    return trainer


def save_best(search_tuner, directory, metadata=None, preprocessing=None):
    """Saves the best trial's model as a preset (its hyperparameters recorded in metadata.json); for a
    search that trains through a trainer (distillation, ReST's auxiliary losses), the model it trains.
    `metadata` adds entries (the training data); `preprocessing` (the data's fitted state) makes the
    preset carry its data contract, as a preset of `fit` does."""
    with warnings.catch_warnings():  # the trial checkpoint's optimizer state is not needed here
        warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
        best = search_tuner.get_best_models(num_models=1)[0]
    best = _trained_model(best)
    trial = search_tuner.oracle.get_best_trials(1)[0]
    values = dict(trial.hyperparameters.values)
    best.save_to_preset(
        directory,
        metadata={**(metadata or {}), "tuning": {"trial_id": trial.trial_id, "score": trial.score, "values": values}},
        preprocessing=preprocessing,
    )
    return best

