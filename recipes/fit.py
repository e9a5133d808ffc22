"""`fit(model, train, val, recipe=...)`: compile a model for a paper's protocol and run Keras' fit."""

import keras
from keras import ops

import zoo.budget as budget
from zoo import threads
from zoo.datasets.pipeline import without_autotune_thread
from zoo.errors import ZooError
from zoo.recipes.data_check import check_dataset
from zoo.process_settings import configure_process
from zoo.recipes import host_allocator
from zoo.recipes.metrics import default_metrics
from zoo.recipes.protocols import get_recipe
from zoo.recipes.resume import RunLog, completed_epochs
from zoo.recipes.thread_tuner import ThreadTuner
from zoo.recipes.validation_auc import ExactValidationAUC


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


class _BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore writing its weights as zoo.presets.write_weights does (through memory, renamed
    into place): a failed write is one OSError, never an HDF5 file left broken (a crash at exit)."""

    def _save_model(self):
        from zoo.presets import write_weights

        model = self.model
        object.__setattr__(model, "save_weights", lambda filepath, overwrite=True: write_weights(model, filepath))
        try:
            super()._save_model()
        finally:
            object.__delattr__(model, "save_weights")


# From this many rows in a model's largest embedding table, `fit` updates the tables by rows ("lazy_adam")
# unless the recipe names an update: measured with benchmarks/vocab_scaling.py (DeepFM, batch 1024, this
# 2-core machine; table in benchmarks/README.md), where dense Adam's step grows with the table's rows and
# the row-wise step does not. Below it the dense step is kept, so small models train as they always did.
SPARSE_TABLE_ROWS = 100_000


def table_choice(model, recipe, distributed=False):
    """(table_update, why) the run trains `model` with: the recipe's own when it names one, else
    "lazy_adam" when the largest embedding table (zoo.recipes.sparse_table_adam.is_table) has
    SPARSE_TABLE_ROWS rows or more, else "dense"; "dense" under a distribution (its tables may be split)."""
    from zoo.recipes.sparse_table_adam import is_table

    if recipe.table_update is not None:
        return recipe.table_update, "chosen"
    if distributed:
        return "dense", "a distributed run"
    rows = max((int(v.shape[0]) for v in getattr(model, "weights", ()) if is_table(v)), default=0)
    if rows >= SPARSE_TABLE_ROWS:
        return "lazy_adam", f"largest table {rows:,} rows >= {SPARSE_TABLE_ROWS:,}"
    return "dense", f"largest table {rows:,} rows < {SPARSE_TABLE_ROWS:,}"


def with_table_choice(model, recipe, distributed=False):
    """`recipe` with `table_update` settled for `model` (table_choice)."""
    import dataclasses

    return dataclasses.replace(recipe, table_update=table_choice(model, recipe, distributed)[0])


def make_optimizer(recipe, total_steps=None):
    rate = learning_rate_schedule(recipe, total_steps)
    # the papers' clipping is PyTorch's clip_grad_norm_ over all parameters: Keras' global_clipnorm (its
    # `clipnorm` clips each variable's gradient by its own norm)
    common = dict(learning_rate=rate, beta_1=recipe.beta_1, beta_2=recipe.beta_2, global_clipnorm=recipe.clipnorm)
    if recipe.table_update not in (None, "dense"):  # tables updated at the rows a batch touches (no AdamW decay)
        from zoo.recipes.sparse_table_adam import SparseTableAdam

        return SparseTableAdam(table_update=recipe.table_update, weight_decay=recipe.weight_decay or None, **common)
    if recipe.weight_decay:
        return keras.optimizers.AdamW(weight_decay=recipe.weight_decay, **common)
    return keras.optimizers.Adam(**common)


def _in_tf_strategy():
    """Whether a tf.distribute strategy's scope is open (TensorFlow loaded and not its default strategy)."""
    import sys

    return "tensorflow" in sys.modules and sys.modules["tensorflow"].distribute.has_strategy()


def _is_tf_data(dataset):
    return hasattr(dataset, "element_spec") and hasattr(dataset, "unbatch")


def _steps(dataset, steps_per_epoch, needed):
    """Steps per epoch: given, the dataset's cardinality, or (when the recipe's schedule needs it and the
    cardinality is unknown, as for a generator or a filtered pipeline) counted by one pass over it."""
    if steps_per_epoch:
        return steps_per_epoch
    cardinality = getattr(dataset, "cardinality", None)
    if cardinality is None:
        return None
    steps = int(cardinality())
    if steps > 0:
        return steps
    if needed and _is_tf_data(dataset):
        return sum(1 for _ in dataset)
    return None


def _num_candidates(dataset):
    """M of a tf.data dataset's batches (None when unknown or not a tf.data dataset)."""
    if not _is_tf_data(dataset):
        return None
    features = dataset.element_spec[0]
    shapes = [spec.shape for key, spec in features.items() if key.startswith("cand_")]
    return int(shapes[0][1]) if shapes and shapes[0][1] is not None else None


def training_twin(model, num_candidates):
    """`model` itself, or (when the batches hold another number of candidates, e.g. ReST's shared-prefix
    rows of m2 samples per user) a twin built for that M with the same weights. After training, copy the
    twin's weights back with `model.set_weights(twin.get_weights())` (the weights never depend on M)."""
    schema = getattr(model, "schema", None)
    if num_candidates is None or schema is None or num_candidates == schema.num_candidates:
        return model
    config = dict(model.get_config(), schema=schema.with_candidates(num_candidates).to_dict())
    twin = type(model).from_config(config)
    twin.set_weights(model.get_weights())
    return twin


def data_options(recipe, model_name):
    """Keyword arguments of `zoo.datasets.load` for the recipe's own pipelines (CLI, reproduce) of a
    training or validation split: the batch size in rows and, for ReST under "prefix" batching, the
    shared-prefix rows of `group_size` samples per user (with weights 0 on a short group's repeats)."""
    recipe = get_recipe(recipe)
    if recipe.batching == "prefix" and model_name == "rest":
        return {"batch_size": max(recipe.batch_size // recipe.group_size, 1), "mode": "prefix",
                "num_candidates": recipe.group_size, "with_weights": True}
    return {"batch_size": recipe.batch_size}


def make_trainer(model, recipe):
    """The model the recipe trains: `model`, or the protocol's training wrapper around it."""
    options = dict(recipe.trainer_options)
    if recipe.trainer is None:
        return model
    if recipe.trainer == "rest_auxiliary":
        if getattr(model, "registered_name", None) != "rest":
            return model  # the auxiliary heads are ReST's; other models of a ReST table train on L_ce
        from zoo.recipes.rest_training import ReSTTrainer

        align = options.get("align_weight", 0.1) if model.schema.group("user") else 0.0
        return ReSTTrainer(model, seq_weight=options.get("seq_weight", 0.1), align_weight=align)
    if recipe.trainer == "distillation":
        from zoo import presets
        from zoo.recipes.distillation import OnlineDistillation

        teacher = presets.get(
            options.get("teacher", "suan"), schema=model.schema, **options.get("teacher_hyperparameters", {})
        )
        return OnlineDistillation(
            model, teacher, temperature=options.get("temperature", 2.0),
            distillation_weight=options.get("distillation_weight"),
        )
    raise ZooError(f"recipe '{recipe.name}' names an unknown trainer '{recipe.trainer}' (rest_auxiliary, distillation)")


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


def per_candidate_crossentropy(y_true, y_pred):
    """Binary cross-entropy of every candidate, [B, M] (not averaged over M inside a row), so sample
    weights [B, M] (0 on a short group's repeated slots) weigh each candidate; with no weights the
    batch loss is the mean over all B x M candidates."""
    return ops.binary_crossentropy(ops.cast(y_true, y_pred.dtype), y_pred)


def compile_for(model, recipe="suan", steps_per_epoch=None, jit_compile="auto", **overrides):
    """Compiles `model` with the recipe's optimizer, binary cross-entropy and AUC/LogLoss."""
    recipe = get_recipe(recipe, **overrides)
    total = steps_per_epoch * recipe.epochs if steps_per_epoch else None
    model.compile(
        optimizer=make_optimizer(recipe, total),
        loss=per_candidate_crossentropy,
        metrics=default_metrics(),
        jit_compile=jit_compile,
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
    jit_compile="auto",
    distribution=None,
    **overrides,
):
    """Trains `model` on `train` (a tf.data.Dataset of contract batches) by a paper's whole protocol.

    - the recipe's batch size: a tf.data training set is re-batched to `recipe.batch_size` samples
      (rows of M candidates count M samples each);
    - its trainer: ReST's auxiliary losses (ReSTTrainer) for ReST models, or SUAN's online distillation
      (a teacher built from `trainer_options`, trained together with `model`, the student);
    - shared-prefix batches: when the batches hold more candidates than `model` was built for (ReST's
      "prefix" rows), a twin built for that M trains and its weights are copied into `model`;
    - its optimiser (Adam/AdamW, clipping, warm-up + cosine over the counted steps when the dataset's
      cardinality is unknown), the embedding tables updated by rows from SPARSE_TABLE_ROWS rows unless the
      recipe's `table_update` says otherwise (`table_choice`), early stopping on the monitor restoring the
      best weights (a `val_auc` monitor reads the exact AUC of the validation rows, ExactValidationAUC, as
      the reports do);
    - a tf.data training set runs a fixed number of steps per epoch over its repetition:
      `steps_per_epoch`, else its cardinality, else its batches counted by one pass over it (pass
      `steps_per_epoch` for data too large to count); so no epoch ends on an exhausted iterator.
    Keras' own machinery does the rest: BackupAndRestore (`backup_dir`: an interrupted run resumes),
    ModelCheckpoint (`checkpoint_path`: the best weights by the monitor), the progress bar.
    `backup_dir` makes the resume exact: the resumed run skips the batches its finished epochs used (the
    same order an uninterrupted run sees: the pipeline's shuffle is seeded), early stopping and the
    checkpoint keep their best so far (RunLog), and the History holds every epoch of the run.
    `jit_compile` goes to Keras' compile (False skips XLA: faster for a few steps on a CPU).
    Seeds with `recipe.seeds[0]` before building anything (the trainer's heads, the teacher); seed
    before building `model` too (`keras.utils.set_random_seed`) for runs that repeat exactly.
    Under torch, picks its thread count from the measured steps (`ThreadTuner`, recipes/thread_tuner.py;
    `history.thread_tuner` holds its probes; `ZOO_THREADS=fixed` or your own OMP_NUM_THREADS opts out).
    Sets the host allocator for training (`zoo.recipes.host_allocator`; `ZOO_HOST_ALLOCATOR=default` opts out).
    `distribution` ("data", "model", "multi-worker" or zoo.recipes.distributed.make_distribution(...)) trains
    on several devices or hosts: the model, its trainer, optimizer and metrics in the engine's scope.
    Returns the History.
    """
    if distribution is not None:
        arguments = dict(locals())  # fit's own arguments, passed on unchanged
        from zoo.recipes.distributed import fit_distributed

        passed_on = set(arguments) - {"model", "train", "val", "recipe", "distribution", "overrides"}
        options = {k: arguments[k] for k in passed_on}
        return fit_distributed(fit, distribution, model, train, val,
                               with_table_choice(model, get_recipe(recipe, **overrides), distributed=True), **options)
    recipe = with_table_choice(model, get_recipe(recipe, **overrides))
    if getattr(model, "calibration", None) is not None:
        raise ZooError(
            f"{model.registered_name} is calibrated (post-hoc, {model.calibration['method']}): training would fit "
            "the weights under a fixed calibration; train model.with_calibration(None) and calibrate it again "
            "(zoo.recipes.calibration.calibrate)"
        )
    check_model_overrides(model, recipe)
    check_dataset(model, train, *([] if val is None else [val]))
    configure_process()  # threads, JAX's compile cache (zoo/process_settings.py): import zoo sets none of them
    host_allocator.tune()  # the steps' freed buffers are reused, not faulted in again (see its docstring)
    keras.utils.set_random_seed(recipe.seeds[0])
    samples_per_row = _num_candidates(train) or 1
    rows = max(recipe.batch_size // samples_per_row, 1) if recipe.batch_size else None
    budget.check_step(model, rows, training=True, where="fit")
    if _is_tf_data(train) and rows and getattr(train, "zoo_rows_per_batch", None) != rows:
        train = train.unbatch().batch(rows)  # a zoo pipeline already batched to the recipe's size is used as is
    # no tf.data autotuning thread: its join when an iterator ends stalled fit's return by seconds (see there)
    train, val = without_autotune_thread(train), without_autotune_thread(val)
    twin = training_twin(model, _num_candidates(train))
    trainer = make_trainer(twin, recipe)
    steps = _steps(train, steps_per_epoch, needed=_is_tf_data(train) or bool(recipe.cosine or recipe.warmup_fraction))
    if steps and _is_tf_data(train):
        # A fixed number of steps over the repeated data: no epoch ends on an exhausted iterator (which
        # stalls Keras' torch loader) and `steps_per_epoch` means that many steps every epoch.
        train, steps_per_epoch = train.repeat(), steps
        done = completed_epochs(backup_dir)
        if done:
            train = train.skip(done * steps)  # an interrupted run: continue the stream where its epochs ended
    compile_for(trainer, recipe, steps_per_epoch=steps, jit_compile=jit_compile)
    if _is_tf_data(train):
        # Build the loss, metrics and optimizer from the batch spec. Otherwise JAX and torch fit pull a
        # batch through an extra iterator first, which under a reshuffling pipeline shifts the shuffle
        # orders (and, on a resumed run, walks the whole skip): the resume would not be exact.
        trainer._symbolic_build(data_batch=train.element_spec)
    stateful = []
    if val is not None and recipe.early_stopping_patience is not None:
        stateful.append(
            keras.callbacks.EarlyStopping(
                monitor=recipe.monitor, mode="max", patience=recipe.early_stopping_patience, restore_best_weights=True
            )
        )
    if checkpoint_path is not None:
        monitor = recipe.monitor if val is not None else "auc"
        stateful.append(
            keras.callbacks.ModelCheckpoint(
                str(checkpoint_path), monitor=monitor, mode="max", save_best_only=True, save_weights_only=True
            )
        )
    # (not in a distribution: each process would rank its own validation shard, and stop on its own; and
    # only where the trained network scores the validation rows as they are: the same M)
    single = keras.distribution.distribution() is None and not _in_tf_strategy()
    scored_m = getattr(getattr(twin, "schema", None), "num_candidates", None)
    same_m = _is_tf_data(val) and len(val.element_spec) == 2 and _num_candidates(val) == scored_m  # (no weights)
    exact = ([ExactValidationAUC(val, model=twin)] if single and same_m and recipe.monitor == "val_auc"
             else [])
    extra = exact + list(callbacks) + stateful  # (the exact val_auc first: every later callback reads it)
    tuner = None
    counts = threads.tuned_counts() if keras.backend.backend() == "torch" else None
    if counts is not None:
        tuner = ThreadTuner(counts)  # torch's thread count from the measured steps (see its docstring)
        extra.append(tuner)
    run_log = None
    if backup_dir is not None:
        run_log = RunLog(backup_dir, stateful)
        extra += [run_log, _BackupAndRestore(str(backup_dir))]
    history = trainer.fit(
        train, validation_data=val, epochs=recipe.epochs, steps_per_epoch=steps_per_epoch, callbacks=extra,
        verbose=verbose, shuffle=False,  # the pipeline shuffles (Keras would only warn that it cannot)
    )
    if twin is not model:
        model.set_weights(twin.get_weights())
    if run_log is not None:
        history.history = run_log.history()
        history.epoch = [record["epoch"] for record in run_log.records]
    history.trainer = trainer
    history.thread_tuner = tuner
    return history
