"""Where a training or evaluation run's rows come from: the simulator, a named data set's raw file read
under a protocol, or a team's own log read under a data spec (`DataSource`). The command line builds one
from its data flags (--data, --path, --protocol, --data-option, --spec, --rows, --seed); from Python:

    source = zoo.recipes.DataSource("my_logs/impressions.csv", spec="my_spec.json")
    train, schema = source.load("train", batch_size=1024)
"""

import dataclasses
import os

from zoo.errors import ZooError


@dataclasses.dataclass
class DataSource:
    """The rows of a run.

    Args:
        data: "simulator", a data set name (zoo.datasets.names(), read from `path`), or with `spec` the log
            itself (a file, a glob or a folder of shards).
        path: a data set's raw file or folder.
        protocol: a data set's preprocessing (default: the data set's own).
        options: a data set protocol's options (e.g. {"sequence_length": 50}).
        spec: a data spec (JSON path or dict; see `zoo.datasets.draft_spec`): `data` is then the log.
        rows: rows to simulate; with `limit`, the first rows of a data set's training split (held-out
            splits: rows / 5).
        limit: whether `rows` limits a data set's rows (the simulator always simulates `rows`).
        seed: the simulator's seed and the data's shuffle seed.
        process_group: a multi-worker run's process group (each process reads its own share), or None.
        grow_from: with `spec`, a preset folder whose fit the log's continues (zoo.recipes.warm_start).
        history_from: with `grow_from`, earlier logs (files, globs or folders) read for the histories and
            the running statistics of the log's rows only (the preset's own log, typically).

    `info` holds the account of the last split loaded (rows per split, repairs).
    """

    data: str = "simulator"
    path: str = None
    protocol: str = None
    options: dict = None
    spec: object = None
    rows: int = 20_000
    limit: bool = False
    seed: int = 0
    process_group: object = None
    grow_from: str = None
    history_from: tuple = None
    info: dict = dataclasses.field(default=None, repr=False)

    @property
    def simulated(self):
        return self.data == "simulator" and self.spec is None

    def describe(self):
        """A few words for a banner: what is read from where."""
        if self.grow_from is not None:
            return f"{self.data} under the spec of {self.grow_from}, its fit continued"
        if self.spec is not None:
            return f"spec {self.spec} on {self.data}"
        return "simulated" if self.simulated else f"{self.data} {self.path}"

    def load(self, split, rows=None, batch_size=None, **load_options):
        """(dataset, schema) of `split` ("train", "validation", "test"): `rows` simulated rows (default
        `self.rows`), or the split read from the data set or log, limited to its first `rows` rows when
        `limit` (the training rows then a fixed set, shuffled each epoch). `load_options` (mode,
        num_candidates, with_weights) come from a recipe (zoo.recipes.data_options); batch size 256 unless
        given."""
        rows = self.rows if rows is None else rows
        batch_size = batch_size or 256
        if self.spec is not None:
            return self._spec_split(split, rows, batch_size, **load_options)
        if self.simulated:
            if self.protocol:
                raise ZooError("--protocol is a data set's preprocessing: use it with --data <data set> --path <file>")
            from zoo.datasets import BehaviourSimulator

            simulator = BehaviourSimulator(seed=self.seed)
            seed = {"train": 1, "validation": 2, "test": 3}[split] + self.seed
            return simulator.dataset(rows, batch_size=batch_size, seed=seed, shuffle=split == "train"), simulator.schema
        from zoo import datasets

        if not self.path:
            raise ZooError(f"--data {self.data} needs --path (the raw file or folder)")
        if not os.path.exists(self.path):
            raise ZooError(f"{self.path}: no such file or folder")
        limit = rows if self.limit else None
        dataset, schema, info = datasets.load(
            self.data, self.path, protocol=self.protocol, split=split, batch_size=batch_size, seed=self.seed,
            shuffle=False if limit is not None else None, verbose=True, with_info=True,
            process_group=self.process_group, **load_options, **dict(self.options or {}),
        )
        return self._limited(dataset, schema, info, split, limit, batch_size, load_options.get("mode"))

    def split_for(self, model, split, batch_size=None):
        """`split` loaded (its `rows`, as `load`) and checked against `model`'s schema (one line saying what
        differs and how to train a model for these rows): the rows a preset is evaluated or calibrated on
        when they are not read through its own preprocessor."""
        from zoo.recipes.data_check import check_schema

        data, schema = self.load(split, batch_size=batch_size)
        name = model.registered_name
        where = f"--data {self.data} --path {self.path}" if not self.simulated else "(on the simulator)"
        check_schema(model, schema, hint=f"python -m zoo fit {name} {where}, or zoo.get('{name}', schema=schema)")
        return data

    def _spec_split(self, split, rows, batch_size, **load_options):
        """(dataset, schema) of a user's log fitted under the spec."""
        from zoo import datasets

        if self.protocol or self.options:
            raise ZooError("--protocol and --data-option are a named data set's: write such choices into the spec")
        path = self.data
        if not os.path.exists(path) and not any(c in path for c in "*?["):
            raise ZooError(f"{path}: no such file or folder")
        limit = rows if self.limit else None
        dataset, schema, info = datasets.load(
            self.spec, path, split=split, batch_size=batch_size, seed=self.seed,
            shuffle=False if limit is not None else None, verbose=True, with_info=True,
            process_group=self.process_group, grow_from=self.grow_from, history_from=self._earlier(), **load_options,
        )
        return self._limited(dataset, schema, info, split, limit, batch_size, load_options.get("mode"))

    def _earlier(self):
        """The earlier logs (a list), None without; refused without `grow_from`."""
        if not self.history_from:
            return None
        if self.grow_from is None:
            raise ZooError("--history-from in fit goes with --from (a fit that continues a preset's)")
        from zoo.datasets.preprocessor import earlier_logs

        return list(earlier_logs(self.history_from))

    def _limited(self, dataset, schema, info, split, limit, batch_size, mode):
        """(dataset, schema) of a loaded split, limited to its first `limit` rows when given (the training
        rows then a fixed set, shuffled each epoch); the number of batches is known (progress bars)."""
        import tensorflow as tf

        self.info = info
        if limit is not None:
            dataset = dataset.unbatch().take(limit)
            if split == "train":
                dataset = dataset.cache().shuffle(min(limit, 16_384), seed=self.seed, reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
        if mode is None:  # a row per sample
            total = min(info["rows"][split], limit or info["rows"][split])
            if not total:
                raise ZooError(f"the {split} split has no rows ({info.get('repairs', '')})")
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(-(-total // batch_size)))
        dataset.zoo_rows_per_batch = batch_size  # (fit re-batches only to another size)
        return dataset, schema

    def record(self):
        """(what a preset records of its training data, the fitted data contract it carries or None)."""
        from zoo import datasets

        if self.simulated:
            return {"data": "simulator", "rows": self.rows, "seed": self.seed}, None
        group = self.process_group  # several processes: the chief's share (cached, no exchange)
        if self.spec is not None:
            processed = datasets.prepare(self.spec, self.data, verbose=False, process_group=group,
                                         grow_from=self.grow_from, history_from=self._earlier())
            record = {"data": "spec", "files": processed.info["files"], "rows": processed.rows,
                      "accounting": processed.info["accounting"], "spec": processed.info["spec"]}
            if "process" in processed.info:
                record["process"] = processed.info["process"]
        else:
            options = dict(self.options or {})
            processed = datasets.prepare(self.data, self.path, protocol=self.protocol, verbose=False,
                                         process_group=group, **options)
            record = {"data": self.data, "path": os.path.abspath(self.path),
                      "protocol": processed.info.get("protocol") or self.protocol, "options": options,
                      "rows": processed.rows, "accounting": processed.info.get("accounting")}
        if self.limit:
            record["rows_used"] = {"train": self.rows, "validation": max(self.rows // 5, 1)}
        try:
            return record, processed.preprocessing()
        except ZooError:  # criteo, avazu, taobao/ads, eleme keep no fit: their presets score the contract's ids
            return record, None
