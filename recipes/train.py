"""`train(model, source, out)`: what `python -m zoo fit` does, as one call.

    python -m zoo fit din --data my_logs/impressions.csv --spec my_spec.json --out runs/my_din
    summary = zoo.recipes.train("din", zoo.recipes.DataSource("my_logs/impressions.csv", spec="my_spec.json"),
                                "runs/my_din")

A fresh registered model (class defaults, the recipe's and your overrides) on the source's schema is
trained by a recipe (its batch size, batching, trainer and schedule, with the batch size, epochs, learning
rate and seed given here) on the training split, checked on the validation split after every epoch;
`out` gets the preset (config, weights, metadata with the data's account and the metrics, and the fitted
data contract, preprocessing.json), report.json and test_report.json and the figures; `out/backup` keeps
an interrupted run (`resume=True` continues it) and `out/.lock` keeps a second run out of the folder while
this one runs. On a data spec (a team's own log) the defaults are compare's (zoo.recipes.compare: at most
10 epochs, batch 1024, early stopping on the validation AUC with the best epoch kept) and the model is
scored beside the trivial baselines on the same rows (zoo.recipes.baselines); a validation AUC of
SUSPICIOUS_AUC or more is no click model but a leak: the run stops there, before the test split, the
baselines and the preset, in one line naming the column most likely to carry the label (`suspicious`).
"""

import contextlib
import dataclasses
import fcntl
import inspect
import os
import sys

from zoo.errors import ZooError
from zoo.recipes.data_source import DataSource

SUSPICIOUS_AUC = 0.999  # a validation AUC this high on a spec's log means the label leaks into the features


@contextlib.contextmanager
def folder_lock(folder, what="--out"):
    """Holds `folder`/.lock for this process while the block runs (flock, exclusive; the kernel frees it
    when the process dies). A folder another live run holds is refused in one line naming its pid. A
    folder this call made, holding nothing but the lock when the block ends (a run refused before it wrote
    anything), is removed: a refused command leaves nothing behind."""
    made = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    lock = os.path.join(folder, ".lock")
    handle = open(lock, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ZooError(f"{what} {folder}: another run is using it ({holder}); wait for it or pick another "
                           "folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()
        if made and os.listdir(folder) == [".lock"]:
            with contextlib.suppress(OSError):
                os.remove(lock)
                os.rmdir(folder)


def progress():
    """Keras' verbose level for progress: a live bar on a terminal, one line per epoch (no carriage returns
    or colour codes) when the output goes to a file or a pipe."""
    return 1 if sys.stdout.isatty() else 2


def kept_epoch(history, recipe):
    """{"epoch", "line"}: which epoch's weights the fit kept (1-based), and a line saying so; None without
    validation. With early stopping (restore_best_weights) it is the best validation epoch, else the last."""
    scores = history.get(recipe.monitor)
    if not scores:
        return None
    ran = len(scores)
    if recipe.early_stopping_patience is None:
        return {"epoch": ran, "line": f"kept the last epoch, {ran} of {ran} ({recipe.monitor} {scores[-1]:.4f}; "
                                      "the recipe has no early stopping)"}
    best = max(range(ran), key=lambda epoch: (scores[epoch], -epoch))  # the first of equal bests, as Keras keeps
    stopped = f"stopped early after {ran} of {recipe.epochs}" if ran < recipe.epochs else f"ran {ran} of {ran}"
    return {"epoch": best + 1, "line": f"kept epoch {best + 1}: the best {recipe.monitor} {scores[best]:.4f} "
                                       f"({stopped} epochs; patience {recipe.early_stopping_patience})"}


def training_recipe(recipe="suan", *, spec=False, epochs=None, batch_size=None, learning_rate=None, seed=0,
                    table_update=None, clipnorm=None):
    """The recipe a run trains by: `recipe` (a name or a Recipe) with every option given here (None: the
    recipe's), so the banner, the batches and the optimiser agree; on a data spec, compare's defaults
    where no option chose (at most EPOCHS epochs, BATCH_SIZE rows a step, early stopping with PATIENCE)."""
    from zoo.recipes.compare import BATCH_SIZE, EPOCHS, PATIENCE
    from zoo.recipes.protocols import get_recipe

    chosen = {"seeds": (seed,)}
    for field, value in (("epochs", epochs), ("batch_size", batch_size), ("learning_rate", learning_rate),
                         ("table_update", table_update), ("clipnorm", clipnorm)):
        if value is not None:
            chosen[field] = value
    recipe = get_recipe(recipe, **chosen)
    if spec:
        own = {"epochs": EPOCHS, "batch_size": BATCH_SIZE}
        recipe = get_recipe(recipe, **{k: v for k, v in own.items() if chosen.get(k) is None})
        if recipe.early_stopping_patience is None:
            recipe = get_recipe(recipe, early_stopping_patience=PATIENCE)
    return recipe


def _banner(model_name, model, recipe, recipe_name, source, tables=None):
    """What `train` will train, before it starts: the model and where its hyperparameters come from, the
    recipe, the parameters, the data's rows per split and batches per epoch, the backend."""
    import keras

    from zoo.recipes.fit import data_options

    defaults = {name: p.default for name, p in inspect.signature(type(model).__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    config = model.get_config()

    def same(a, b):
        return (list(a) if isinstance(a, (list, tuple)) else a) == (list(b) if isinstance(b, (list, tuple)) else b)

    changed = [f"{k}={config[k]!r}" for k in model.hyperparameter_names()
               if k in defaults and k in config and not same(config[k], defaults[k])]
    start = (f"the weights and hyperparameters of {source.grow_from}" if source.grow_from is not None else
             f"a fresh model: class defaults{', except ' + ', '.join(changed) if changed else ''}")
    lines = [f"fit: {model_name} ({start}); "
             f"{model.count_params():,} parameters; backend {keras.backend.backend()}",
             f"     recipe {recipe_name}: {recipe.epochs} epoch(s), batch {recipe.batch_size}, "
             f"learning rate {recipe.learning_rate:g}, seed {recipe.seeds[0]}"
             + (f", gradients' global norm clipped at {recipe.clipnorm:g}" if recipe.clipnorm else "")
             + (f", tables {tables}" if tables else
                f", tables updated by rows ({recipe.table_update})" if recipe.table_update not in (None, "dense") else "")]
    batch = data_options(recipe, model_name)["batch_size"]  # rows (ReST's prefix rows hold m2 samples)
    if source.info is not None:
        rows = source.info["rows"]
        used = min(rows["train"], source.rows) if source.limit else rows["train"]
        lines.append(f"     data: {source.describe()}: " + ", ".join(f"{k} {v:,}" for k, v in rows.items())
                     + f" rows; {used:,} training rows, {-(-used // batch):,} batches per epoch")
    else:
        lines.append(f"     data: simulated (seed {source.seed}), {source.rows:,} training rows, "
                     f"{-(-source.rows // batch):,} batches per epoch")
    return lines


def _against_baselines(model_name, model, source, datasets_by_split, log):
    """A spec run's model against the trivial baselines on its validation and test rows
    (`datasets_by_split`: {split: (dataset, its predict_rows) or None}): a line each, flagged when the
    model does not beat the best; {split: result} for the preset's metadata. Not for a run on part of the
    rows (`limit`) or under several processes (each holds a share)."""
    from zoo import datasets
    from zoo.datasets.spec import DataSpec
    from zoo.recipes.baselines import against_baselines, summary_line

    if source.spec is None or source.limit or source.process_group is not None:
        return {}
    spec = DataSpec.read(source.spec)
    keys = {"user_key": spec.feature_key(spec.user), "item_key": spec.feature_key(spec.item)}
    processed = datasets.prepare(source.spec, source.data, verbose=False)
    results = {}
    for split, scored in datasets_by_split.items():
        if scored is not None and processed.num_rows(split):
            dataset, predicted = scored
            try:
                results[split] = against_baselines(model, processed, split, dataset, predicted=predicted, **keys)
            except ZooError as error:  # e.g. a split of a few rows
                log(f"{split}: baselines skipped ({error})")
                continue
            log(f"{split}: {summary_line(model_name, results[split])}")
    return results


def suspicious(auc, source):
    """The one-line error of a spec run whose validation AUC (`auc`) is SUSPICIOUS_AUC or more: the feature
    column that alone ranks the labels best on the log's first rows (zoo.datasets.spec_engine.likely_leak)
    is named as the likely leak."""
    from zoo.datasets import spec_engine, spec_reading
    from zoo.datasets.spec import DataSpec

    spec = DataSpec.read(source.spec)
    files = spec_reading.source_files(source.data, spec.source["format"])
    found = spec_engine.likely_leak(spec, files)
    head = f"validation AUC {auc:.4f} is too good to be true (>= {SUSPICIOUS_AUC}): the label leaks into the features"
    if found is None:
        return (f"{head}, through a key or the history (the spec has no other feature column to judge); fit stops "
                "without a preset")
    return (f"{head}, most likely through column '{found[0]}' (alone it ranks the labels of the first {found[2]:,} "
            f"rows of {files[0]} at AUC {found[1]:.3f}); fit stops without a preset: remove that column from the "
            "spec's 'columns' (a feature must be known before the label)")


def _backup(out, resume):
    """The folder that keeps an interrupted training run (Keras' BackupAndRestore), checked against `resume`."""
    from zoo.recipes.resume import completed_epochs

    backup = os.path.join(out, "backup")
    done = completed_epochs(backup)
    if done and not resume:
        raise ZooError(f"{backup} holds an interrupted run ({done} epoch(s) done): pass --resume to continue it "
                       "or remove it")
    if resume and not done:
        raise ZooError(f"--resume: {backup} holds no interrupted run with a finished epoch; run without --resume")
    return backup


def distribution(strategy=None, devices=None, model_axis=None, shard_dense=False, batch_scaling=None):
    """The run's zoo.recipes.distributed.Distributed (strategy "data", "model" or "multi-worker"), None on
    one device."""
    if strategy is None and devices is None:
        if model_axis is not None or shard_dense or batch_scaling is not None:
            raise ZooError("--model-axis, --shard-dense and --batch-scaling go with --strategy (or --devices)")
        return None
    from zoo.recipes.distributed import make_distribution

    return make_distribution(strategy or "data", devices=devices, model_axis=model_axis, shard_dense=shard_dense,
                             batch_scaling=batch_scaling or "global")


def _calibrated(model, data, method, log):
    """(model, calibration report or None) after post-hoc calibration on `data`; a failure keeps the model."""
    from zoo.recipes.calibration import calibrate

    log(f"calibrating ({method}) on the validation split")
    try:
        model, calibration = calibrate(model, data, method, verbose=progress())
    except ZooError as error:  # e.g. a validation split of one class: the trained model is kept as it is
        log(f"calibration skipped: {error}")
        return model, None
    if calibration is not None:
        log(f"{method}: slope {calibration['slope']:.4f}, intercept {calibration['intercept']:.4f}: "
            f"validation LogLoss {calibration['logloss_before']:.5f} -> {calibration['logloss_after']:.5f}; "
            + ("kept" if calibration["kept"]
               else f"not kept ({calibration.get('reason') or 'it does not lower the LogLoss'})"))
    return model, calibration


def train(model, source=None, out="runs/fit", *, recipe="suan", epochs=None, batch_size=None, learning_rate=None,
          table_update=None, clipnorm=None, hyperparameters=None, calibrate=None, resume=False,
          distribution_options=None, warm_start=None, log=print):
    """Trains a fresh registered `model` (a name) on `source` (a DataSource; default: the simulator) and
    writes its preset, reports and figures to `out` (see the module docstring). Returns {"preset": path,
    "model", "metrics": {...}, "kept_epoch", "baselines", "calibration", "history"} (None in a multi-worker
    run's other processes).

    `table_update` ("dense", "lazy_adam", "rowwise_adagrad", "sgd"; None: by the largest table's size,
    zoo.recipes.fit.table_choice, stated in the banner and the preset's metadata) says how the embedding
    tables are updated (zoo.recipes.SparseTableAdam: at the rows a batch touches only); `clipnorm` clips the gradients' global norm (FuxiCTR's
    max_gradient_norm is 10). `hyperparameters` override the class defaults (after the
    recipe's); `calibrate` ("platt" or
    "temperature") fits post-hoc calibration on the validation split after training, kept where it lowers
    its LogLoss; `distribution_options` are `distribution`'s (strategy, devices, model_axis, shard_dense,
    batch_scaling) for several devices or processes. `log` receives each line of the account (the banner,
    the kept epoch, the baselines, the metrics); `log=None` is silent. A spec run whose validation AUC is
    SUSPICIOUS_AUC or more stops with a ZooError naming the likely leak (`suspicious`), writing no preset.

    `warm_start` (a preset folder of `model` fitted on a data spec; `fit --from`): the source's log is read
    under the preset's spec, its fit continues the preset's and the model starts from the preset's weights
    and hyperparameters (`hyperparameters` may still override them), its lineage recorded
    (zoo.recipes.warm_start)."""
    import keras

    import zoo
    from zoo.recipes.evaluate import StepLog, predict_rows, scoring_batch
    from zoo.recipes.fit import data_options, model_overrides

    fit, evaluate = zoo.recipes.fit, zoo.recipes.evaluate  # (looked up when called: a test may wrap them)
    log = log or (lambda line: None)
    model_name, source = model, source if source is not None else DataSource()
    run = distribution(**(distribution_options or {}))  # first: a multi-worker process joins its cluster
    source.process_group = run.process_group() if run is not None and run.num_processes > 1 else None
    if run is not None and run.num_processes > 1 and resume:
        raise ZooError("--resume: a multi-worker run keeps no backup (every process would write the same folder)")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ZooError(f"--out {out}: a file, not a folder")
    backup = _backup(out, resume) if run is None or run.num_processes == 1 else None
    parent = None
    if warm_start is not None:
        from zoo.recipes import warm_start as carry

        if run is not None:
            raise ZooError("--from trains on one device: leave out --strategy and --devices")
        if source.spec is not None:
            raise ZooError(f"--from {warm_start}: the new log is read under the preset's own spec; leave --spec out")
        parent, parent_state = carry.parent_preset(warm_start, model_name)
        source = dataclasses.replace(source, spec=parent_state["spec"], grow_from=os.fspath(warm_start))
    keras.utils.set_random_seed(source.seed)  # before anything random: the data and the model's weights
    recipe_name = recipe if isinstance(recipe, str) else "custom"
    recipe = training_recipe(recipe, spec=source.spec is not None, epochs=epochs, batch_size=batch_size,
                             learning_rate=learning_rate, seed=source.seed, table_update=table_update,
                             clipnorm=clipnorm)
    training = data_options(recipe, model_name)
    held_out = max(source.rows // 5, 1)
    train_data, schema = source.load("train", source.rows, **training)
    val, _ = source.load("validation", held_out, **training)
    scoring = scoring_batch(recipe.batch_size, schema.sequence_length)
    plain_val, _ = source.load("validation", held_out, batch_size=scoring)
    overrides = {**model_overrides(recipe, zoo.registry.entry(model_name).cls), **dict(hyperparameters or {})}
    if parent is not None:
        overrides = {**carry.hyperparameters(parent), **dict(hyperparameters or {})}
    with run.scope() if run is not None else contextlib.nullcontext():  # variables placed as they are made
        model = zoo.get(model_name, schema=schema.with_candidates(1), **overrides)
    lineage = None
    if parent is not None:
        state = source.record()[1]
        carry.carry_weights(parent, model, parent_state, state)
        lineage = carry.lineage(warm_start, parent_state, state, source.info["rows"], source.info.get("drift"))
        grown = ", ".join(f"{name} {v['before']:,} -> {v['after']:,}" + (
            f" ({v['evicted']:,} least recently seen evicted)" if v["evicted"] else "")
            for name, v in lineage["vocabularies"].items() if v["after"] != v["before"] or v["evicted"]) or "none grew"
        log(f"vocabularies grown by the new log's values: {grown}")
        moved = carry.drift_note(lineage["drift"])
        if moved:
            log(moved)
    from zoo.recipes.fit import table_choice

    update, why = table_choice(model, recipe, distributed=run is not None)  # (stated in the banner and the preset)
    tables = "dense" if update == "dense" else f"updated by rows ({update})"
    if why != "chosen":  # the zoo's pick, and why
        tables = f"dense ({why})" if update == "dense" else f"updated by rows ({update}; {why})"
    recipe = dataclasses.replace(recipe, table_update=update)
    with contextlib.ExitStack() as held:
        if run is None or run.is_chief:  # (the folder is made here, once the arguments, data and model are good)
            held.enter_context(folder_lock(out))  # a second run on it would share backup/ and the preset
        os.makedirs(out, exist_ok=True)
        for line in _banner(model_name, model, recipe, recipe_name, source, tables):
            log(line)
        steps = StepLog()
        history = fit(model, train_data, val, recipe=recipe, backup_dir=backup, callbacks=[steps],
                      verbose=progress(), distribution=run)
        if run is not None:
            model = run.to_single_device(model)  # every process takes part (split tables are gathered)
            if not run.is_chief:
                return None
        kept = kept_epoch(history.history, recipe)
        if kept is not None:
            log(kept["line"])
        calibration = None
        if calibrate:
            model, calibration = _calibrated(model, plain_val, calibrate, log)
        group = source.process_group
        log(f"scoring the validation split of process 0's share of the data ({group.size} processes)"
            if group is not None else "scoring the validation split")
        scored = {"validation": (plain_val, predict_rows(model, plain_val, verbose=progress())), "test": None}
        report = evaluate(model, plain_val, report_path=os.path.join(out, "report.json"), plots_dir=out,
                          history=history.history, step_history=steps.history, predicted=scored["validation"][1])
        metrics = {"val_auc": report["auc"], "val_logloss": report["logloss"],
                   "val_ece": report["calibration"]["ece"]}
        if source.spec is not None and report["auc"] >= SUSPICIOUS_AUC:
            raise ZooError(suspicious(report["auc"], source))
        if not source.simulated:
            log("scoring the test split")
            test, _ = source.load("test", held_out, batch_size=scoring)
            scored["test"] = (test, predict_rows(model, test, verbose=progress()))  # (the baselines read them too)
            test_report = evaluate(model, test, report_path=os.path.join(out, "test_report.json"),
                                   predicted=scored["test"][1])
            metrics.update(test_auc=test_report["auc"], test_logloss=test_report["logloss"],
                           test_ece=test_report["calibration"]["ece"])
        baselines = _against_baselines(model_name, model, source, scored, log)
        record, preprocessing = source.record()
        preset = os.path.join(out, "preset")
        training_record = {"epochs": recipe.epochs, "epochs_run": len(history.epoch), "batch_size": recipe.batch_size,
                           "learning_rate": recipe.learning_rate,
                           "table_update": recipe.table_update,
                           **({"clipnorm": recipe.clipnorm} if recipe.clipnorm else {}),
                           **({"kept_epoch": kept["epoch"]} if kept is not None else {})}
        model.save_to_preset(
            preset,
            metadata={"training_data": record, "recipe": recipe_name, "seed": source.seed, "metrics": metrics,
                      "training": training_record, **({"baselines": baselines} if baselines else {}),
                      **({"lineage": lineage} if lineage else {}),
                      **({"calibration": {**calibration, "split": "validation"}} if calibration else {})},
            preprocessing=preprocessing,
        )
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        log(f"{model_name}: {shown} (ECE over 10 equal-frequency bins of pCTR); preset, report and figures in {out}")
    return {"preset": preset, "model": model, "metrics": metrics, "kept_epoch": kept and kept["epoch"],
            "baselines": baselines, "calibration": calibration, "history": history.history}
