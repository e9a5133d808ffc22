"""Raw rows scored, evaluated and calibrated through a preset's data contract (its `preprocessor`),
without refitting anything: what the model's own `predict`, `evaluate` and `fit` do with raw rows
(zoo.models.ZooModel), and what `python -m zoo score | evaluate | calibrate` call.

    model = zoo.load("runs/my_din/preset")
    scores = model.predict(pandas.read_csv("later.csv"), history_from="logs.csv")   # score_rows(...).scores
    report = model.evaluate("later.csv", history_from="logs.csv")                   # evaluate_rows
    calibrated, fit = zoo.recipes.calibrate_file(model, "held_out.csv", method="platt")

Raw rows are a path (a file, glob or folder in the training data's format) or rows held in memory (a
pandas DataFrame, a pyarrow Table, a dict of columns, a list of dicts: zoo.datasets.in_memory). The
reader applies the preset's fitted preprocessing (its `preprocessing.json`: the vocabularies of the
training data) in scoring mode (see the reader module: MovieLens/Amazon Books make every row a sample,
Taobao every behaviour after a user's first; a sample's history is the user's earlier rows; unknown ids
become the OOV id and are counted).
"""

import collections
import contextlib
import os

import numpy as np

import zoo.budget as budget
from zoo.errors import ZooError

ScoredRows = collections.namedtuple("ScoredRows", ["scores", "lines", "labels", "info"])
ScoredRows.__doc__ = """`score_rows`' result: scores [N], the file line (or position) of each [N], labels [N] (None for rows
without a label column) and the reading's info (row counts, the account of every file's rows, unknown ids)."""


def score_raw_rows(model, data, path, preprocessing, *, batch_size=256, cache_dir=None, with_labels=False,
                   verbose=1):
    """Scores of the samples a raw file of `data` makes, and the file line of each: (scores [N], lines [N]),
    and with `with_labels=True` their labels too (scores, lines, labels [N]) for metrics on labelled rows.

    `data` is the data set's name, or None for a preset trained on a data spec (its preprocessing carries
    the spec). `preprocessing` is the preset's folder (or its preprocessing.json, or the fitted state); the
    model's schema must be the one that preprocessing produces. `verbose=1` shows a progress bar over the
    rows (with their total), 0 nothing."""
    from zoo import datasets

    processed = datasets.prepare(data, path, preprocessing=preprocessing, cache_dir=cache_dir, verbose=False)
    return _scored(model, processed, batch_size, with_labels, verbose)


def _scored(model, processed, batch_size, with_labels, verbose):
    """score_raw_rows' result for an already prepared scoring-mode read."""
    from zoo.datasets.pipeline import make_dataset

    if processed.schema.to_dict() != model.schema.with_candidates(1).to_dict():
        raise ZooError(
            f"the preprocessing's schema is not this {model.registered_name}'s: pass the preprocessing of the "
            "preset the model came from"
        )
    budget.check_step(model, batch_size, training=False, where="score")
    dataset, _ = make_dataset(processed, "all", batch_size=batch_size, shuffle=False)
    # one predict over the whole read (Keras' compiled predict step per batch): a predict call per batch
    # cost about 0.1 s whatever its size, so 3,000 rows at --batch-size 1 took minutes
    if processed.num_rows("all"):
        scores = np.asarray(model.predict(dataset.map(lambda features, label: features),
                                          verbose=verbose)).reshape(-1).astype(np.float32)
    else:
        scores = np.zeros(0, np.float32)
    lines = processed.source_lines("all")
    if with_labels:  # (stored in the order the dataset reads them: no second pass over the read)
        return scores, lines, processed.column("all", "labels").reshape(-1)
    return scores, lines


def with_preprocessor(model_or_preset):
    """(model, its preprocessor) of a model that carries one, or of a preset (a folder or a name) loaded
    with zoo.load; refused in one line when there is none to read raw rows with."""
    if isinstance(model_or_preset, (str, os.PathLike)):
        from zoo import presets

        model = presets.load(model_or_preset)
        name = os.fspath(model_or_preset)
    else:
        model, name = model_or_preset, getattr(model_or_preset, "registered_name", None) or "the model"
    if getattr(model, "preprocessor", None) is None:
        raise ZooError(f"{name} carries no data contract (preprocessing.json): only a preset trained on a data spec "
                       "or on movielens, amazon_books or taobao/suan reads raw rows (zoo.load such a preset)")
    return model, model.preprocessor


def score_rows(model, rows, *, history_from=None, batch_size=1024, verbose=1):
    """Scores every row of `rows` (a path, or rows held in memory) through the preprocessor of `model` (a
    model that carries one, or a preset folder or name): a ScoredRows of scores, lines, labels (None
    without a label column) and the reading's info. A path's rows come in file order, `lines` their file
    lines (the scored ones: a row the reading drops has none). Rows held in memory give one score per row
    in their order, `lines` their positions (0-based), NaN for a row the reading dropped (a warning
    names how many, and why: info["repairs"]). `history_from`: earlier logs whose rows build the
    histories and running statistics of these rows, not scored (Preprocessor.processed). `verbose`: 1 a
    progress bar over the rows, 2 one line at the end, 0 nothing."""
    from zoo.datasets import in_memory

    model, preprocessor = with_preprocessor(model)
    with preprocessor.reading(rows) as (path, cache_dir, count):
        processed = preprocessor.processed(path, history_from=history_from, cache_dir=cache_dir)
        scores, lines, labels = _scored(model, processed, batch_size, with_labels=True, verbose=verbose)
        order = processed.source_order("all")  # file order (read here: `lines` maps a file of the read)
        scores, lines, labels = scores[order], np.array(lines[order]), labels[order]
        info = processed.info if count is None else in_memory.renamed_info(processed.info, path, preprocessor.spec)
    labeled = info.get("labeled", True)
    if count is not None:  # rows in memory: by position
        positions = in_memory.positions(lines, preprocessor.spec)
        aligned, aligned_labels = np.full(count, np.nan, np.float32), np.full(count, np.nan, np.float32)
        aligned[positions], aligned_labels[positions] = scores, labels
        if len(positions) < count:
            import warnings

            warnings.warn(f"{count - len(positions)} of {count} rows given were not scored (NaN): "
                          f"{info.get('repairs')}", stacklevel=3)
        return ScoredRows(aligned, np.arange(count), aligned_labels if labeled else None, info)
    return ScoredRows(scores, lines, labels if labeled else None, info)


def evaluate_rows(model, rows, *, held_out="test", history_from=None, report_path=None, plots_dir=None,
                  batch_size=1024, verbose=1):
    """The metrics report (AUC, LogLoss, GAUC by the preprocessor's user key, calibration;
    zoo.recipes.evaluate) of `model` (a model with a preprocessor, or a preset folder or name) on the
    labelled rows of `rows` (a path, or rows held in memory; Preprocessor.labelled: every row of a spec
    preset's rows; a reader's own data gives its protocol's `held_out` split; `history_from`: earlier logs
    for the rows' histories, not scored). report["data"] says which rows. With `history_from` (a spec
    preset), report["baselines"] stands the model beside the trivial baselines on the same rows, their
    rates read from those earlier logs (zoo.recipes.baselines.compare)."""
    from zoo.datasets.preprocessor import earlier_logs
    from zoo.recipes.data_check import check_schema
    from zoo.recipes.evaluate import evaluate, predict_rows
    from zoo.recipes.metrics import check_two_classes

    model, preprocessor = with_preprocessor(model)
    history_from = earlier_logs(history_from)
    with preprocessor.reading(rows) as (path, cache_dir, count):
        dataset, info, what = preprocessor.labelled(path, held_out=held_out, history_from=history_from,
                                                    batch_size=batch_size, cache_dir=cache_dir)
        check_schema(model, preprocessor.schema, hint="the preset's preprocessor reads rows for another schema")
        predicted = predict_rows(model, dataset, preprocessor.user_key, verbose)  # (the baselines read these scores)
        shown = path if count is None else f"{count} rows given in memory"
        check_two_classes(predicted[0], f"the labelled rows scored of {shown}")
        processed = None
        if preprocessor.spec is not None:  # every row of the file, in file order as `dataset` gives them
            processed = preprocessor.processed(path, history_from=history_from, cache_dir=cache_dir)
            if processed.has_column("all", "raw_user"):  # GAUC by the raw user: every unseen user its own
                labels, scores, _ = predicted
                order = processed.source_order("all")
                if not np.array_equal(labels.reshape(-1), processed.column("all", "labels")[order]):
                    raise ValueError("the rows scored are not the file's rows in order")
                predicted = labels, scores, processed.column("all", "raw_user")[order]
        report = evaluate(model, dataset, report_path=None, plots_dir=plots_dir, user_key=preprocessor.user_key,
                          predicted=predicted)
        report["data"] = {"path": shown, "split": info["split"], "rows": what.replace(path, shown),
                          **({"history_from": history_from} if history_from else {})}
        if processed is not None and processed.info.get("repairs"):  # the reading's account, as `score` prints it
            report["data"]["account"] = processed.info["repairs"].replace(path, shown)
        trained = preprocessor.training_files_in(path) if count is None and info["split"] == "all" else []
        if trained:
            import warnings

            report["data"]["trained_on"] = trained
            warnings.warn(trained_on_warning(trained), stacklevel=2)
        if history_from and preprocessor.spec is not None and not preprocessor.spec["label"].get("events"):
            report["baselines"] = _against_baselines(preprocessor, processed, history_from, predicted)
    if report_path is not None:
        from zoo.recipes.evaluate import write_report

        write_report(report, report_path)
    return report


def trained_on_warning(files):
    """The warning of an evaluation on rows that trained the model (`files`: those of its training data)."""
    return (f"{files[0]} is {'a file' if len(files) > 1 else 'the file'} this preset was trained on, so these metrics "
            "include the rows that trained it (not held out): evaluate on rows after its training log; the fit's "
            "report.json holds its held-out test metrics")


@contextlib.contextmanager
def training_data(model, rows, validation=None, *, history_from=None, batch_size=1024, shuffle=True, seed=0):
    """(training pipeline, validation pipeline or None) of labelled raw rows (a path or rows held in memory;
    `validation` likewise, or None) through the model's preprocessor (Preprocessor.labelled), its fitted
    vocabularies kept: what `model.fit(rows)` trains on. The training rows come shuffled (`seed`), the
    validation rows in their order; rows held in memory stay written until the block ends."""
    from zoo.datasets.preprocessor import earlier_logs

    model, preprocessor = with_preprocessor(model)
    history_from = earlier_logs(history_from)
    with contextlib.ExitStack() as stack:
        pipelines = []
        for part, mixed in ((rows, shuffle), (validation, False)):
            if part is None:
                pipelines.append(None)
                continue
            path, cache_dir, _ = stack.enter_context(preprocessor.reading(part))
            dataset, _, _ = preprocessor.labelled(path, held_out="train" if mixed else "validation",
                                                  history_from=history_from, batch_size=batch_size,
                                                  cache_dir=cache_dir, shuffle=mixed, seed=seed)
            pipelines.append(dataset)
        yield tuple(pipelines)


def _against_baselines(preprocessor, processed, history_from, predicted):
    """zoo.recipes.baselines.compare of the model's scores of the rows of `processed` (a scoring read;
    `predicted`: predict_rows' labels, scores, users) against the baselines on the same rows, fitted on the earlier logs
    (`history_from`: as the preset's training log, the rates' rows) and the scored rows strictly earlier;
    None when the rows cannot be resampled."""
    from zoo.datasets import spec_reading
    from zoo.datasets.spec_engine import read_keys
    from zoo.recipes.baselines import baseline_scores, compare, split_arrays

    spec = preprocessor.spec
    files = [f for earlier in history_from for f in spec_reading.source_files(earlier, spec["source"]["format"])]
    order = processed.source_order("all")  # the scored rows' order: the file's
    rows = {name: np.asarray(values)[order] for name, values in split_arrays(processed, "all").items()}
    labels, scores, _ = predicted
    if not np.array_equal(np.asarray(labels).reshape(-1), rows["labels"].reshape(-1)):
        raise ValueError("the rows scored are not the baselines' rows in order")
    try:
        return compare(labels, scores, baseline_scores(read_keys(spec, files), rows))
    except ZooError:  # too few rows of both classes
        return None


def calibrate_file(model, path, method="platt", *, keep="if_better", held_out="validation", history_from=None,
                   batch_size=1024, verbose=1):
    """(model, report) of post-hoc calibration (zoo.recipes.calibrate: Platt or temperature scaling) of
    `model` (a model with a preprocessor, or a preset folder or name) fitted on the labelled rows of the
    raw file `path` (held-out rows, not the training file; a reader's own data gives its protocol's
    `held_out` split). The returned model carries the same preprocessor; report["split"] and
    report["data"] say which rows."""
    from zoo.recipes.calibration import calibrate

    model, preprocessor = with_preprocessor(model)
    dataset, info, what = preprocessor.labelled(path, held_out=held_out, history_from=history_from,
                                                batch_size=batch_size)
    calibrated, report = calibrate(model, dataset, method, user_key=preprocessor.user_key, verbose=verbose, keep=keep)
    calibrated.preprocessor = preprocessor
    return calibrated, dict(report, split=info["split"], data=os.fspath(path), rows_used=what)


def calibrate_preset(preset, out, path=None, method="platt", *, source=None, keep="if_better", history_from=None,
                     batch_size=None, model=None, verbose=1):
    """`python -m zoo calibrate` as one call: post-hoc calibration of `preset` (a folder or a shipped name)
    saved as a new preset in `out`, with its metadata kept and brought up to date. Returns {"model", "report"
    (calibrate's: slope, intercept, LogLoss and ECE before and after, kept), "split", "test_report" (or
    None)}.

    A preset that carries a data contract calibrates on the labelled rows of the raw file `path`
    (calibrate_file: a spec preset's held-out file; a reader's own data its protocol's validation split);
    without `path` (or without a contract) on the validation split of `source` (a zoo.recipes.DataSource,
    default the simulator). Where the rows are a validation split and the calibration is kept, the test
    split is scored again so that the recorded test metrics are the calibrated model's (the uncalibrated
    ones are kept as `metrics_uncalibrated`). What `save` computes afresh (date, versions, checksums) is
    dropped from the old metadata; `calibration` records the fit and the rows it saw. `model`: the preset
    already loaded (zoo.load(preset)), to skip loading it again."""
    import zoo
    from zoo import presets
    from zoo.recipes.calibration import calibrate
    from zoo.recipes.data_source import DataSource
    from zoo.recipes.evaluate import evaluate

    model = model if model is not None else zoo.load(preset)
    folder = presets.resolve(preset)
    out = os.path.abspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ZooError(f"--out {out}: a file, not a folder")
    source = source if source is not None else DataSource()

    raw = path is not None and model.preprocessor is not None
    if raw:
        calibrated, report = calibrate_file(model, path, method, keep=keep, history_from=history_from,
                                            batch_size=batch_size or 1024, verbose=verbose)
        split, user_key = report["split"], model.preprocessor.user_key
    else:
        split, user_key = "validation", "user_user_id"
        calibrated, report = calibrate(model, source.split_for(model, split, batch_size), method, user_key=user_key, verbose=verbose,
                                       keep=keep)
    metadata = presets.read_metadata(folder)
    computed = {"date", "zoo_version", "keras_version", "backend", "parameters"}  # save() writes these afresh
    metadata = {k: v for k, v in metadata.items() if k not in computed and not k.endswith("_sha256")}
    metadata["calibration"] = {**{k: v for k, v in report.items() if k not in ("data", "rows_used")},
                               "split": split, "data": os.fspath(path) if raw else source.data}
    test_report = None
    if split == "validation" and report["kept"]:  # the recorded test metrics become the calibrated model's
        if raw:
            test_report = evaluate_rows(calibrated, path, held_out="test", history_from=history_from, verbose=verbose)
        else:
            test_report = evaluate(calibrated, source.split_for(calibrated, "test", batch_size), user_key=user_key,
                                   verbose=verbose)
        metrics = dict(metadata.get("metrics") or {})
        if metrics:
            metadata["metrics_uncalibrated"] = metrics
        metadata["metrics"] = {**metrics, "test_auc": test_report["auc"], "test_logloss": test_report["logloss"],
                               "test_ece": test_report["calibration"]["ece"], "test_rows": test_report["rows"]}
        if "test_gauc" in metrics or test_report.get("gauc") is not None:
            metadata["metrics"]["test_gauc"] = test_report.get("gauc")
    calibrated.save_to_preset(out, metadata=metadata)
    return {"model": calibrated, "report": report, "split": split, "test_report": test_report,
            "uncalibrated_metrics": metadata.get("metrics_uncalibrated", {})}
