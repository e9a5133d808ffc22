"""`fit(model, train, val, recipe=...)`: compile a model for a paper's protocol and run Keras' fit."""

import keras

from zoo.errors import ZooError
from zoo.recipes.metrics import default_metrics
from zoo.recipes.protocols import get_recipe


def learning_rate_schedule(recipe, total_steps):
    """The recipe's learning rate: constant, or linear warm-up then cosine decay (keras' CosineDecay).

        lr(s) = peak * s / W                                  for s < W = warmup_fraction * total_steps
        lr(s) = peak * (1 + cos(pi * (s - W) / (T - W))) / 2  after, T = total_steps
    """
    if not recipe.cosine and not recipe.warmup_fraction:
        return recipe.learning_rate
    if not total_steps:
        raise ZooError(
            f"recipe '{recipe.name}' schedules the learning rate over the run, but the number of steps "
            "is unknown: pass steps_per_epoch or a dataset with a known cardinality"
        )
    warmup = int(round(recipe.warmup_fraction * total_steps))
    if not recipe.cosine:
        raise ZooError(f"recipe '{recipe.name}': warm-up without cosine decay is not a protocol of the papers")
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else recipe.learning_rate,
        decay_steps=max(total_steps - warmup, 1),
        alpha=0.0,
        warmup_target=recipe.learning_rate if warmup else None,
        warmup_steps=warmup,
    )


def make_optimizer(recipe, total_steps=None):
    rate = learning_rate_schedule(recipe, total_steps)
    common = dict(learning_rate=rate, beta_1=recipe.beta_1, beta_2=recipe.beta_2, clipnorm=recipe.clipnorm)
    if recipe.weight_decay:
        return keras.optimizers.AdamW(weight_decay=recipe.weight_decay, **common)
    return keras.optimizers.Adam(**common)


def _steps(dataset, steps_per_epoch):
    if steps_per_epoch:
        return steps_per_epoch
    cardinality = getattr(dataset, "cardinality", None)
    if cardinality is None:
        return None
    steps = int(cardinality())
    return steps if steps > 0 else None


def model_overrides(recipe, model_class):
    """The hyperparameters the recipe fixes that `model_class` takes (e.g. DeRes' dropout 0.1)."""
    recipe = get_recipe(recipe)
    names = set(model_class.hyperparameter_names())
    return {key: value for key, value in recipe.model_overrides.items() if key in names}


def check_model_overrides(model, recipe):
    """A model built with other values than the ones its recipe fixes is an error, not a silent run.
    A training wrapper (OnlineDistillation, ReSTTrainer) is checked through the zoo model it trains."""
    model = getattr(model, "student", None) or getattr(model, "model", None) or model
    if not hasattr(model, "hyperparameter_names"):
        return
    for key, value in model_overrides(recipe, type(model)).items():
        if getattr(model, key) != value:
            raise ZooError(
                f"recipe '{recipe.name}' trains with {key}={value!r} but this {model.registered_name} has "
                f"{key}={getattr(model, key)!r}: build it with {key}={value!r}, or pass model_overrides={{}} to "
                "fit to train it as it is"
            )


def compile_for(model, recipe="suan", steps_per_epoch=None, **overrides):
    """Compiles `model` with the recipe's optimizer, binary cross-entropy and AUC/LogLoss."""
    recipe = get_recipe(recipe, **overrides)
    total = steps_per_epoch * recipe.epochs if steps_per_epoch else None
    model.compile(
        optimizer=make_optimizer(recipe, total),
        loss=keras.losses.BinaryCrossentropy(),
        metrics=default_metrics(),
    )
    return recipe


def fit(
    model,
    train,
    val=None,
    recipe="suan",
    *,
    steps_per_epoch=None,
    backup_dir=None,
    checkpoint_path=None,
    callbacks=(),
    verbose="auto",
    **overrides,
):
    """Trains `model` on `train` (a tf.data.Dataset of contract batches) by a paper's protocol.

    Uses Keras' own machinery only: `compile` + `fit` with EarlyStopping on the recipe's monitor
    (when `val` is given and the recipe stops early), BackupAndRestore (`backup_dir`: an interrupted
    run resumes), ModelCheckpoint (`checkpoint_path`: the best weights by the monitor), and the
    progress bar. Returns the History.
    """
    recipe = get_recipe(recipe, **overrides)
    check_model_overrides(model, recipe)
    keras.utils.set_random_seed(recipe.seeds[0])
    compile_for(model, recipe, steps_per_epoch=_steps(train, steps_per_epoch))
    extra = list(callbacks)
    if val is not None and recipe.early_stopping_patience is not None:
        extra.append(
            keras.callbacks.EarlyStopping(
                monitor=recipe.monitor, mode="max", patience=recipe.early_stopping_patience, restore_best_weights=True
            )
        )
    if backup_dir is not None:
        extra.append(keras.callbacks.BackupAndRestore(str(backup_dir)))
    if checkpoint_path is not None:
        monitor = recipe.monitor if val is not None else "auc"
        extra.append(
            keras.callbacks.ModelCheckpoint(
                str(checkpoint_path), monitor=monitor, mode="max", save_best_only=True, save_weights_only=True
            )
        )
    return model.fit(
        train, validation_data=val, epochs=recipe.epochs, steps_per_epoch=steps_per_epoch, callbacks=extra, verbose=verbose
    )
