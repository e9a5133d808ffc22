"""`Preprocessor`: a preset's data contract as one object, as keras-hub's tasks carry their preprocessor.

    model = zoo.load("runs/my_din/preset")          # model.preprocessor: the spec and its fit
    scores = model.predict(pandas.read_csv("later.csv"), history_from="logs.csv")   # raw rows, through it
    dataset, info = model.preprocessor.read("later.csv")   # raw rows -> the input contract, in file order

A preset trained on a data spec, or on a paper reader's data (movielens, amazon_books, taobao/suan),
carries the fitted preprocessing that turned its raw rows into the input contract: the spec (or the
reader's protocol and options) and the vocabularies, hash sizes and buckets fitted on its training split
(`preprocessing.json`, zoo.datasets.fitted). `zoo.load` and `zoo.get` attach it to the model they return
(`model.preprocessor`, None for a preset without one); `save_to_preset` writes it back; the model's
`predict`, `evaluate` and `fit`, `calibrate`, `tune --warm-start` and `export --signature raw` read raw
rows through it, from Python and from the command line alike.

Raw rows are a file path (a file, glob or folder in the training data's format) or, for a spec preset,
rows held in memory: a pandas DataFrame, a pyarrow Table, a dict of columns or a list of dicts
(zoo.datasets.in_memory: read as the same rows in a file would be). Reading them never refits anything:
every row is one sample (scoring mode, split "all"), ids unseen in training become the OOV id (counted in
the info), and a behaviour history is built from the user's earlier rows among the rows read (and the
earlier logs of `history_from`). `labelled` adds, for a reader's preset, the case of the reader's own
data: when refitting the file gives the preset's very fit, the file is the preset's training data and its
protocol's held-out split is what is scored.
"""

import contextlib
import os
from pathlib import Path

from zoo.datasets import fitted, in_memory
from zoo.errors import ZooError
from zoo.schema import Schema


class Preprocessor:
    """The fitted data contract of a preset (see the module docstring).

    Args:
        state: the fitted state (a dict from `zoo.datasets.prepare(...).preprocessing()`), or a
            preprocessing.json file, or a folder holding one (a preset's: its checksum is checked).
    """

    trained_on = ()  # the real paths of the files the preset was trained on (its metadata's), when known

    def __init__(self, state):
        self.state = fitted.read_preprocessing(state)

    @classmethod
    def from_preset(cls, directory):
        """The preprocessor a preset folder carries, or None when it has no preprocessing.json."""
        if not (Path(directory) / fitted.FILE_NAME).is_file():
            return None
        preprocessor = cls(directory)
        preprocessor.trained_on = _training_files(directory)
        return preprocessor

    def training_files_in(self, path):
        """The files of `path` (a file, glob or folder) that the preset was trained on, by real path."""
        if not self.trained_on or self.spec is None:
            return []
        from zoo.datasets import spec_reading

        try:
            files = spec_reading.source_files(os.fspath(path), self.spec["source"]["format"])
        except ZooError:
            return []
        return [f for f in files if os.path.realpath(f) in self.trained_on]

    @property
    def dataset(self):
        """"spec" for a data spec's fit, else the reader's data set name (e.g. "movielens")."""
        return self.state["dataset"]

    @property
    def spec(self):
        """The data spec (a dict) a spec preset was fitted with, or None for a reader's preset."""
        return self.state.get("spec") if self.dataset == "spec" else None

    @property
    def schema(self):
        """The Schema of the rows it produces (M = 1)."""
        return Schema.from_dict(self.state["schema"])

    @property
    def user_key(self):
        """The feature key GAUC groups by: the spec's user column, or the readers' user_user_id."""
        from zoo.datasets.spec import DataSpec

        spec = None if self.spec is None else DataSpec.read(self.spec)
        return (spec and spec.feature_key(spec.user)) or "user_user_id"

    def __repr__(self):
        source = "a data spec" if self.spec is not None else f"{self.dataset} ({self.state['protocol']})"
        return f"<zoo Preprocessor of {source}: {len(self.state['fitted'])} fitted table(s)>"

    def save(self, directory):
        """Writes preprocessing.json into `directory` (or to that file path); returns the file's path."""
        return fitted.save_preprocessing(self.state, directory)

    def read(self, path, *, history_from=None, batch_size=1024, cache_dir=None, verbose=False, shuffle=False, seed=0):
        """(tf.data pipeline, info) of every row of `path` (a file, glob or folder in the training data's
        format) in the input contract, one sample per row (scoring mode), in file order (a glob's or a
        folder's files: by line number). `info` holds the row count, whether the rows carry labels
        ("labeled"), the per-file account of rows and the unknown ids mapped to OOV. `history_from` (a spec
        preset): earlier logs whose rows build the histories and the user's running statistics, not
        scored (see `processed`). Rows held in memory: `reading` first. `shuffle`: rows in an order drawn
        from `seed` instead (training)."""
        from zoo.datasets.pipeline import make_dataset

        processed = self.processed(path, history_from=history_from, cache_dir=cache_dir, verbose=verbose)
        order = None if shuffle else processed.source_order("all")  # (the engine's own order: user, time)
        dataset, _ = make_dataset(processed, "all", batch_size=batch_size, shuffle=shuffle, seed=seed, order=order)
        return dataset, dict(processed.info, rows=processed.rows)

    @contextlib.contextmanager
    def reading(self, rows):
        """(path, cache folder, count) to read `rows` from: a path as it is (cache None: the default, count
        None); rows held in memory (a DataFrame, pyarrow Table, dict of columns or list of dicts) written
        to a temporary file in the spec's format (zoo.datasets.in_memory), removed on leaving, with their
        count. Anything else is refused in one line."""
        if in_memory.is_rows(rows):
            if self.spec is None:
                raise ZooError(f"rows held in memory are read through a preset trained on a data spec; this one's "
                               f"{self.dataset} reader reads its own files: pass the path")
            with in_memory.rows_file(rows, self.spec) as opened:
                yield opened
            return
        if not isinstance(rows, (str, os.PathLike)):
            raise ZooError(f"raw rows are a file path, a pandas DataFrame, a pyarrow Table, a dict of columns or a "
                           f"list of dicts, got {type(rows).__name__}")
        yield os.fspath(rows), None, None

    def processed(self, path, *, history_from=None, cache_dir=None, verbose=False):
        """The processed data (zoo.datasets.prepare, split "all") of every row of `path`. A row's history is
        its user's rows strictly earlier in time among the files read: `path`, and the earlier logs of
        `history_from` (files, globs or folders; a spec preset), whose rows are read for that and for the
        running statistics only: each scored row gets the features it has in their concatenation."""
        from zoo.datasets.registry import prepare

        history_from = earlier_logs(history_from)
        self.check_path(path)
        for earlier in history_from:
            self.check_path(earlier)
        return prepare(None, path, preprocessing=self.state, cache_dir=cache_dir, verbose=verbose,
                       **({"history_from": list(history_from)} if history_from else {}))

    def labelled(self, path, *, held_out="test", history_from=None, batch_size=1024, cache_dir=None, verbose=False,
                 shuffle=False, seed=0):
        """(pipeline, info, what) of the labelled rows of `path` to evaluate or calibrate a model on.

        A spec preset: every row of the file (refused in one line when the spec makes every row an
        event, or the file has no label column). A reader's preset: the protocol's `held_out` split when
        the file refits to the preset's own fit (its training data), else every row in scoring mode.
        `what` says in words which rows these are."""
        from zoo.datasets.pipeline import make_dataset
        from zoo.datasets.registry import prepare

        spec = self.spec
        if spec is not None and spec["label"].get("events"):
            raise ZooError(f"{path}: the preset's spec makes every row an event (label 1) and samples negatives only "
                           "when fitting, so a file read through it has no negatives and AUC is undefined: score its "
                           "rows (model.predict, `python -m zoo score`); the fit's report.json holds the "
                           "held-out metrics")
        if spec is None:
            if history_from:
                raise ZooError("history_from (earlier logs for histories) is for presets trained on a data spec")
            self.check_path(path)
            refit = prepare(self.dataset, path, protocol=self.state["protocol"], cache_dir=cache_dir, verbose=False,
                            **self.state["options"])
            if refit.preprocessing()["fitted"] == self.state["fitted"]:
                dataset, _ = make_dataset(refit, held_out, batch_size=batch_size, shuffle=shuffle, seed=seed)
                info = {"rows": {held_out: refit.num_rows(held_out)}, "labeled": True, "split": held_out}
                return dataset, info, (f"{path} under the preset's protocol {self.state['protocol']}: its fit equals "
                                       f"the preset's, so the protocol's {held_out} split is the held-out data")
        dataset, info = self.read(path, history_from=history_from, batch_size=batch_size, cache_dir=cache_dir,
                                  verbose=verbose, shuffle=shuffle, seed=seed)
        if not info.get("labeled", True):
            raise ZooError(f"{path} has no label column ('{spec['label'].get('column')}'): scoring needs no labels "
                           "(model.predict, `python -m zoo score`), metrics do")
        info = dict(info, split="all")
        what = (f"every row of {path}" if spec is not None else
                f"every row of {path} through the preset's fitted vocabularies (not its training data: its fit differs)")
        return dataset, info, what

    @staticmethod
    def check_path(path):
        """Refuses, in one line, a path that is neither a file, a folder nor a glob."""
        text = os.fspath(path)
        if not os.path.exists(text) and not any(c in text for c in "*?["):
            raise ZooError(f"{text}: no such file or folder")


def earlier_logs(history_from):
    """`history_from` as a list of paths: None or one path (text or os.PathLike) or a list of them; anything
    else refused in one line."""
    if history_from is None:
        return []
    if isinstance(history_from, (str, os.PathLike)):
        return [os.fspath(history_from)]
    if isinstance(history_from, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in history_from):
        return [os.fspath(p) for p in history_from]
    raise ZooError(f"history_from is a path or a list of paths of earlier logs, got {type(history_from).__name__}")


def _training_files(directory):
    """The real paths of the data files a preset folder's metadata.json names as its training data (a spec
    preset's `training_data.files`), or () where it names none."""
    import json

    try:
        with open(Path(directory) / "metadata.json", encoding="utf-8") as f:
            files = json.load(f).get("training_data", {}).get("files")
    except (OSError, ValueError, AttributeError):
        return ()
    if not isinstance(files, list):
        return ()
    return tuple(os.path.realpath(f) for f in files if isinstance(f, str))
