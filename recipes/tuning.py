"""KerasTuner search over the papers' structural hyperparameters: B, r, k and the loss weights λ.

    zoo.recipes.tune("deres_p", train, val, schema=schema, search=["B"], max_trials=4)

Each search key names one hyperparameter of the registered model and its candidate values:

| key | hyperparameter | values | paper |
|---|---|---|---|
| B | num_blocks | the divisors of num_layers (B = L allowed) | DeRes §3 |
| r | dilation | 1, 2, 4, 8 | SUAN §3.3.1 (LightSUAN) |
| k | window_size | 4, 8, 16, 32 (at most L) | SUAN §3.3.1 (LightSUAN) |
| lambda | distillation_weight | 0.5, 1, 2, 4 | SUAN eq 17 (the model is the student; trials train it with a SUAN teacher) |
| lambda_seq | lambda_seq | 0.01, 0.05, 0.1, 0.3 | ReST §2.3 |
| lambda_align | lambda_align | 0.01, 0.05, 0.1, 0.3 | ReST §2.3 |

The objective is val_auc (maximised). An interrupted search resumes from its directory (KerasTuner's
oracle reloads its trials unless overwrite=True), and the best trial can be saved as a preset.
"""

import keras_tuner

import zoo
from zoo.errors import ZooError
from zoo.recipes.fit import compile_for
from zoo.recipes.protocols import get_recipe


def _divisors(n):
    return [b for b in range(1, n + 1) if n % b == 0]


SEARCH_SPACES = {
    "B": ("num_blocks", lambda config: _divisors(int(config["num_layers"]))),
    "r": ("dilation", lambda config: [1, 2, 4, 8]),
    "k": ("window_size", lambda config: [k for k in (4, 8, 16, 32) if k <= config["schema"].sequence_length] or [1]),
    "lambda": ("distillation_weight", lambda config: [0.5, 1.0, 2.0, 4.0]),
    "lambda_seq": ("lambda_seq", lambda config: [0.01, 0.05, 0.1, 0.3]),
    "lambda_align": ("lambda_align", lambda config: [0.01, 0.05, 0.1, 0.3]),
}
TUNERS = {
    "random": keras_tuner.RandomSearch,
    "bayesian": keras_tuner.BayesianOptimization,
    "hyperband": keras_tuner.Hyperband,
}


class ZooHyperModel(keras_tuner.HyperModel):
    """A registered model whose `search` hyperparameters KerasTuner chooses; the rest stay fixed.

    Args:
        model_name: a registered model name.
        schema: the data's Schema.
        search: search keys of SEARCH_SPACES.
        recipe: the training protocol that compiles each trial (name or Recipe).
        fixed: hyperparameters every trial shares.
    """

    def __init__(self, model_name, schema, search, recipe="suan", fixed=None, teacher=None, temperature=2.0):
        super().__init__(name=model_name)
        entry = zoo.registry.entry(model_name)
        self.model_name = model_name
        self.schema = zoo.Schema.from_dict(schema)
        self.recipe = get_recipe(recipe)
        self.fixed = dict(fixed or {})
        names = entry.cls.hyperparameter_names()
        defaults = _defaults(entry.cls)
        self.config = {**defaults, **self.fixed, "schema": self.schema}
        self.search = list(search)
        self.teacher = dict(teacher or {})
        self.temperature = temperature
        for key in self.search:
            if key not in SEARCH_SPACES:
                raise ZooError(f"unknown search key '{key}' (keys: {', '.join(SEARCH_SPACES)})")
            if key == "lambda":
                from zoo.models.lightsuan import LightSUAN

                if not issubclass(entry.cls, LightSUAN):
                    raise ZooError(f"lambda weights SUAN's distillation: the student must be lightsuan, not {model_name}")
            elif SEARCH_SPACES[key][0] not in names:
                raise ZooError(f"{model_name} has no hyperparameter {SEARCH_SPACES[key][0]} to search as {key}")
        if "r" in self.search and "k" not in self.search and self.config.get("window_size") is None:
            raise ZooError(
                f"searching r (dilation) needs sparse attention: {model_name} has window_size=None; "
                "fix a window (window_size=8) or search k too"
            )

    def choices(self, hp):
        """The hyperparameters of one trial: the fixed ones plus KerasTuner's picks."""
        chosen = dict(self.fixed)
        for key in self.search:
            name, values = SEARCH_SPACES[key]
            chosen[name] = hp.Choice(key, values(self.config))
        return chosen

    def build(self, hp):
        chosen = self.choices(hp)
        weight = chosen.pop("distillation_weight", None)
        model = zoo.get(self.model_name, schema=self.schema, **chosen)
        if "lambda" in self.search:
            from zoo.recipes.distillation import OnlineDistillation

            teacher = zoo.get("suan", schema=self.schema, **self.teacher)
            model = OnlineDistillation(model, teacher, temperature=self.temperature, distillation_weight=weight)
        compile_for(model, self.recipe)
        return model


def _defaults(cls):
    import inspect

    return {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


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
    verbose=0,
    callbacks=(),
    teacher=None,
    **fixed,
):
    """Runs (or resumes) a KerasTuner search; returns the tuner (`tuner.get_best_hyperparameters()`)."""
    if tuner not in TUNERS:
        raise ZooError(f"unknown tuner '{tuner}' (tuners: {', '.join(TUNERS)})")
    hypermodel = ZooHyperModel(model_name, schema, search, recipe=recipe, fixed=fixed, teacher=teacher)
    objective = keras_tuner.Objective("val_auc", direction="max")
    options = dict(objective=objective, seed=seed, directory=str(directory), overwrite=overwrite)
    options["project_name"] = project_name or f"{model_name}_{'_'.join(search)}"
    if tuner == "hyperband":
        search_tuner = TUNERS[tuner](hypermodel, max_epochs=max(epochs, 2), **options)
    else:
        search_tuner = TUNERS[tuner](hypermodel, max_trials=max_trials, **options)
    search_tuner.search(train, validation_data=val, epochs=epochs, verbose=verbose, callbacks=list(callbacks))
    return search_tuner


def save_best(search_tuner, directory):
    """Saves the best trial's model as a preset (its hyperparameters recorded in metadata.json); for a
    distillation search, the student."""
    best = search_tuner.get_best_models(num_models=1)[0]
    best = getattr(best, "student", best)
    trial = search_tuner.oracle.get_best_trials(1)[0]
    best.save_to_preset(
        directory,
        metadata={"tuning": {"trial_id": trial.trial_id, "score": trial.score, "values": trial.hyperparameters.values}},
    )
    return best
