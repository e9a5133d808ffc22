"""The data-spec engine's streaming build: files larger than memory, one batch of rows at a time.

The in-memory build (`spec_engine`) holds every kept row's columns, so its memory grows with the files. The
streaming build holds one batch (`BATCH_ROWS` rows; one user partition when rows are sorted by user) and
the fit's statistics, which grow with the distinct values, not the rows: each categorical column's (and
list column's) distinct training values with their counts, each numeric column's count, mean and squared
deviations (Chan et al.'s pairwise update), and for bucketed numerics their distinct training values with
counts. Rows in file order (no history from the log, no per-user split) read the files:

1. (time- and order-fraction splits only) the label and time columns: how many rows are kept and their
   times' distinct values with counts, for the split's cut;
2. every column: the files' accounts (read = kept + repaired + dropped) and the statistics of the
   training rows, added batch by batch to the fit (`zoo.datasets.transforms.fit.Fit`, the one the
   in-memory build gives all its rows at once); then the split's `time_cut` and `order_split`;
3. every column again: each batch encoded under the fit and appended to the processed arrays
   (`storage.TableAppender`). A scoring-mode read (a fitted preprocessing given) reads only here.

Rows sorted by (user, time, file order) (a history from the log, a per-user split) are sorted by
distribution: read 1 finds every user and its row count; read 2 writes each row to the partition of its
user (users in sorted order, about PART_ROWS rows a partition, a user never split: Arrow IPC files in a
scratch folder beside the output); each partition is then read back and sorted in memory, in order, for
the fit, for the last-seen attributes of sampled negatives, and to encode and append (a sample's history
points into the events of every partition appended before).

The processed data equal the in-memory build's: the same rows, splits, ids, vocabularies, bucket edges
(exact order statistics, np.quantile's interpolation) and sampled negatives (each split's stream
continued from partition to partition); the numeric fill, mean and deviation are summed in another order
(equal to about 1e-15 relative).

Under a process group (zoo.datasets.ProcessGroup) each process streams its own shards and the fit's
statistics are exchanged column by column (distinct values with counts; counts, means and squared
deviations). Read 1 also counts each file's rows (rows in file order) or each user's (rows sorted by
user; a user's rows must all be in one process's shards, as in memory), so a row knows its index among
every process's rows: the order split's position, and where the random split's PCG64 stream is advanced
to. Sampled negatives' last-seen attributes are exchanged as each process's latest row per item.
"""

import numpy as np

from zoo.datasets import spec_engine as engine
from zoo.datasets import storage
from zoo.datasets.process_group import ProcessGroup
from zoo.datasets.reading import Repairs
from zoo.datasets.transforms.fit import Fit
from zoo.datasets.transforms.numeric import Distinct
from zoo.datasets.transforms.vocabulary import Counts

BATCH_ROWS = 2**17  # rows encoded at once (pyarrow's vocabulary lookup costs O(vocabulary) per batch)
PART_ROWS = 2**20  # rows of a user partition, sorted in memory (a user's rows are never split)
MAX_PARTITIONS = 256  # partition files open at once while writing (larger partitions past 2**28 rows)
BLOCK_BYTES = 2**20  # CSV/JSON blocks: pyarrow's reader parses ~30 ahead (16 MiB blocks held 530 MiB)


def build(spec, files, out_dir, verbose="auto", fitted=None, origin=("spec", "spec", {}), group=None, grow_from=None):
    """`spec_engine.build`'s data set, built streaming (see the module); returns its info. Under a process
    `group`, this process reads its shards and the fit's statistics are exchanged (bounded by the distinct
    values, as the in-memory build's)."""
    group = group or ProcessGroup()
    files, numbers = engine.shards(group, files, fitted)
    accounts = {path: Repairs(path) for path in files}
    maker = engine._Build(spec, None, accounts, out_dir, fitted, verbose, origin, group, numbers, grow_from)
    if maker._by_user():
        return _build_by_user(spec, files, maker, accounts)
    splits = _Splits(spec, files, fitted is not None, group)
    if splits.counting:
        splits.settle(engine.agreed(group, lambda: splits.count(files)), numbers)
    if fitted is None:
        fit = Fit(spec)

        def fit_read():
            rows = np.zeros(4, np.int64)  # train, validation, test rows; training positives
            for data in _batches(spec, files, accounts, scoring=False):
                maker.load(data)
                codes = splits.codes(maker, data, splits.positions(data))
                rows += _tally(codes, data["label"])
                fit.add(data, codes == 0)
            if not rows[:3].sum():
                raise engine.no_row_left(files, accounts)
            return rows

        rows, positives = np.split(group.sum(engine.agreed(group, fit_read)), [3])
        engine.check_training_rows(spec, files, int(rows[0]), int(positives[0]))
        maker.states, maker.drift = fit.states(group, maker.base), fit.drift
        _progress(maker, f"fitted on {rows[0]:,} training rows of {rows.sum():,}")
    reads = int(splits.counting) + (fitted is None) + 1

    def batches(counted):
        """(batch, split codes) of every kept row again (`counted`: the files' accounts, else a throwaway)."""
        splits.restart()
        for data in _batches(spec, files, accounts if counted else _uncounted(files),
                             scoring=fitted is not None):
            maker.load(data)
            index = splits.positions(data)
            yield splits.codes(maker, data, index), index

    if fitted is None and spec.label.get("events") and spec.label.get("negatives"):
        maker.last_seen = _last_seen(maker, batches(False))  # (every batch's training rows, not one batch's)
        reads += 1
    per_file = np.zeros((3, len(files)), np.int64)  # kept rows, repaired rows, rows that made no sample
    with storage.TableAppender(out_dir) as writer:
        for codes, _ in batches(fitted is not None):  # (the fit's read counted the files)
            encoded = maker._encode()
            samples, _, dropped = maker._samples(codes, encoded, codes == 0)
            per_file += np.stack([*maker._per_file(), dropped])
            for name, part in samples.items():
                writer.append(name, part)
        if not per_file[0].sum():
            raise engine.no_row_left(files, accounts)
        _progress(maker, f"encoded {per_file[0].sum():,} rows")
        schema = maker._schema()
        info = maker._finish(per_file[2], per_file[0], per_file[1])
        info["streamed"] = {"batch_rows": BATCH_ROWS, "reads": reads}
        writer.close(schema, info)
    maker.save_fit(schema, info)
    return info


def _build_by_user(spec, files, maker, accounts):
    """The build of a spec whose rows are sorted by (user, time, file order) (a history from the log, a
    per-user split): read 1 finds the users; read 2 writes each row to the partition of its user (users
    in rank order, about PART_ROWS rows a partition: Arrow IPC files in a scratch folder); each partition
    is then sorted in memory, in order: once for the fit, once for the last-seen attributes of sampled
    negatives, once to encode and append (histories point into the events appended before them)."""
    import tempfile

    import pyarrow.compute as pc

    fitted, group = maker.fitted, maker.group
    splits = _Splits(spec, files, fitted is not None, group, by_user=True)
    splits.settle(engine.agreed(group, lambda: splits.count(files)), maker.file_numbers)
    local_before = np.cumsum(splits.user_rows) - splits.user_rows
    size = max(PART_ROWS, -(-int(splits.user_rows.sum()) // MAX_PARTITIONS))  # (open files stay few)
    # by user, in rank order (a user's rows all in one partition); numbered densely (a user of more than
    # `size` rows would skip a number)
    partition_of = np.unique(local_before // size, return_inverse=True)[1].reshape(-1)
    count = int(partition_of.max()) + 1 if partition_of.size else 0
    with tempfile.TemporaryDirectory(prefix=".partitions-", dir=maker.out_dir) as scratch:
        partitions = _Partitions(scratch, count)

        def partition_read():  # read 2: the files' accounts
            offset = 0
            with partitions:
                for data in _batches(spec, files, accounts, fitted is not None):
                    mine = np.asarray(pc.index_in(data["text"][spec.user], value_set=splits.users), np.int64)
                    rows = data["label"].size
                    partitions.write(data, offset + np.arange(rows), splits.user_rank[mine], partition_of[mine])
                    offset += rows
            if not offset:
                raise engine.no_row_left(files, accounts)
            return offset

        rows_written = engine.agreed(group, partition_read)
        _progress(maker, f"wrote {rows_written:,} rows of {splits.user_rows.size:,} users into {count} partition(s)")

        def sorted_partitions():
            """Yields (split codes, sorted position) per partition, its rows loaded into `maker`, sorted; a
            row's position is its index among every process's rows in (user, time, file order)."""
            splits.restart()
            for index in range(count):
                data, file_order, rank = partitions.read(index)
                maker.load(data)
                maker.user_code = rank
                maker._take(np.lexsort((file_order, *engine.tie_keys(spec, data), data["time"] if data["time"]
                                        is not None else np.zeros(file_order.size, np.int64), rank)))
                rank = maker.user_code
                first = np.searchsorted(rank, rank)  # each row's user block starts there (sorted by user)
                maker._index = splits.user_before[rank] + np.arange(rank.size) - first
                yield splits.codes(maker, maker.data, maker._index), maker._index

        if fitted is None:
            fit, rows = Fit(spec), np.zeros(4, np.int64)  # train, validation, test; training positives
            for codes, _ in sorted_partitions():
                rows += _tally(codes, maker.data["label"])
                fit.add(maker.data, codes == 0)
            rows, positives = np.split(group.sum(rows), [3])
            engine.check_training_rows(spec, files, int(rows[0]), int(positives[0]))
            maker.states, maker.drift = fit.states(group, maker.base), fit.drift
            _progress(maker, f"fitted on {rows[0]:,} training rows of {rows.sum():,}")
            if spec.label.get("events") and spec.label.get("negatives"):
                maker.last_seen = _last_seen(maker, sorted_partitions())
        history = spec.history_from_log()
        per_file = np.zeros((3, len(files)), np.int64)
        events = 0
        with storage.TableAppender(maker.out_dir) as writer:
            for codes, _ in sorted_partitions():
                encoded = maker._encode()
                samples, store, dropped = maker._samples(codes, encoded, codes == 0)
                per_file += np.stack([*maker._per_file(), dropped])
                if history:
                    for part in samples.values():  # pointers into every partition's events together
                        part["start"], part["end"] = part["start"] + events, part["end"] + events
                    writer.append("events", store, rows=False)
                    events += store["hist_time"].shape[0]
                for name, part in samples.items():
                    writer.append(name, part)
            _progress(maker, f"encoded {per_file[0].sum():,} rows")
            schema = maker._schema()
            info = maker._finish(per_file[2], per_file[0], per_file[1])
            info["streamed"] = {"batch_rows": BATCH_ROWS, "partitions": count, "reads": 2}
            writer.close(schema, info, "events" if history else "table")
    maker.save_fit(schema, info)
    return info


def _tally(codes, labels):
    """int64 [4]: a batch's training, validation and test rows, and its training positives."""
    return np.r_[np.bincount(codes, minlength=3), labels[codes == 0].sum()].astype(np.int64)


def _uncounted(files):
    """Accounts for a read after (or before) the one that counts the files' rows."""
    return {path: Repairs(path) for path in files}


def _progress(maker, text):
    if maker.verbose is not False:
        print(f"streaming build: {text}", flush=True)


def _last_seen(maker, partitions):
    """Per other cand_ column, [items + 2] ids: each item's value in the training row of the highest sorted
    position that holds it (the in-memory build's `_last_seen`, over every partition)."""
    spec = maker.spec
    item = spec.item
    others = [name for name, options in spec.columns.items() if options["role"] == "cand" and name != item]
    known = len(maker.states[item]["tokens"])
    latest = engine.latest_per_item(np.zeros(0, np.int32), np.zeros(0, np.int64), [np.zeros(
        (0, spec.columns[name].get("max_tags", 1)) if spec.columns[name]["type"] == "tags" else 0, np.int32)
        for name in others])  # (a tags column's values: [rows, S])
    for codes, position in partitions:
        encoded = maker._encode()
        rows = np.flatnonzero(codes == 0)
        mine = engine.latest_per_item(encoded[item][rows], position[rows], [encoded[name][rows] for name in others])
        latest = engine.latest_per_item(*engine.concatenate_latest([latest, mine]))
    if maker.sharded:  # each process's latest row per item (bounded by the items)
        latest = engine.latest_per_item(*engine.concatenate_latest(maker.group.allgather(latest)))
    maker.kinds = {}  # the repairs this sweep counted are counted again when encoding
    return engine.item_attributes(latest, known)


class _Partitions:
    """Rows written to the Arrow IPC file of their partition, read back one partition at a time."""

    def __init__(self, folder, count):
        self.folder, self.count, self.writers, self.labeled = folder, count, {}, True

    def write(self, data, file_order, rank, partition):
        import pyarrow as pa

        self.labeled = self.labeled and bool(data["labeled"])
        columns = {"order": pa.array(file_order), "rank": pa.array(rank)}
        for key in engine.KEYS:
            if data[key] is not None:
                columns[key] = pa.array(data[key])
        for name, values in data["text"].items():
            columns[f"text:{name}"] = values
        for name, values in data["numeric"].items():
            columns[f"numeric:{name}"] = pa.array(values)
        for name, (tokens, lengths) in data["list"].items():
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            columns[f"list:{name}"] = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(tokens, pa.string()))
        table = pa.table(columns)
        order = np.argsort(partition, kind="stable")
        table, partition = table.take(pa.array(order)), partition[order]
        bounds = np.flatnonzero(np.diff(partition)) + 1
        for start, end in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [partition.size]])):
            if end > start:
                self._writer(int(partition[start]), table.schema).write_table(table.slice(start, end - start))

    def _writer(self, index, schema):
        import os

        import pyarrow as pa

        if index not in self.writers:
            self.writers[index] = pa.ipc.new_file(os.path.join(self.folder, f"{index}.arrow"), schema)
        return self.writers[index]

    def __enter__(self):
        return self

    def __exit__(self, *error):
        for writer in self.writers.values():
            writer.close()

    def read(self, index):
        """(data dict, file-order index, user rank) of partition `index`'s rows, in written order."""
        import os

        import pyarrow as pa

        with pa.OSFile(os.path.join(self.folder, f"{index}.arrow")) as source:
            table = pa.ipc.open_file(source).read_all().combine_chunks()
        data = {key: table[key].to_numpy() if key in table.column_names else None for key in engine.KEYS}
        data.update(labeled=self.labeled, text={}, numeric={}, list={})
        for name in table.column_names:
            kind, _, column = name.partition(":")
            if kind == "text":
                data["text"][column] = table[name].combine_chunks()
            elif kind == "numeric":
                data["numeric"][column] = table[name].to_numpy()
            elif kind == "list":
                lists = table[name].combine_chunks()
                data["list"][column] = (np.asarray(lists.flatten().to_numpy(zero_copy_only=False), dtype=object),
                                        np.diff(np.asarray(lists.offsets)).astype(np.int64))
        return data, table["order"].to_numpy(), table["rank"].to_numpy()


def _batches(spec, files, accounts, scoring, only=None):
    """Yields the kept rows of every file, in order, as data dicts of about BATCH_ROWS rows."""
    pending, rows = [], 0
    for index, path in enumerate(files):
        block = BLOCK_BYTES if spec.source["format"] == "csv" else None  # (JSON types come from the 1st block)
        for part in engine._file_parts(spec, index, path, scoring, accounts[path], only, block):
            pending.append(part)
            rows += part["label"].size
            if rows >= BATCH_ROWS:
                yield engine._join(pending)
                pending, rows = [], 0
    if pending:
        yield engine._join(pending)


class _Splits:
    """Each batch's split codes, as the in-memory build gives them to the same rows (rows in file order, or
    in (user, time, file order) when sorted by user), for one process or each process of a group."""

    def __init__(self, spec, files, scoring, group, by_user=False):
        self.spec, self.group, self.by_user, self.scoring = spec, group, by_user, scoring
        self.files = len(files)
        split = spec.split["by"]
        self.n = self.cut = self.offsets = None
        # read 1: how many rows (order split), when (time split), in which files (random or order split in a
        # group: each file's first row among every process's rows), whose (rows sorted by user)
        self.counting = by_user or not scoring and (split in ("time", "order") or group.size > 1 and split == "random")
        self.restart()

    def count(self, files):
        """Read 1 of this process's files: (rows, times' distinct values, users' counts, rows per file)."""
        times, users = Distinct(), Counts()
        rows, per_file = 0, np.zeros(len(files), np.int64)
        for data in _batches(self.spec, files, _uncounted(files), self.scoring,
                             [self.spec.user] if self.by_user else ()):
            rows += data["label"].size
            per_file += np.bincount(data["file"], minlength=len(files))
            if not self.scoring and self.spec.split["by"] == "time":
                times.add(data["time"])
            if self.by_user:
                users.add(data["text"][self.spec.user])
        return rows, times, users, per_file

    def settle(self, counted, numbers):
        """Read 1's counts over every process (`numbers`: this process's files among all files)."""
        rows, times, users, per_file = counted
        group, split = self.group, self.spec.split
        self.n = int(group.sum(rows))
        if not self.scoring and split["by"] == "time" and self.n:
            times = Distinct.of_pairs(group.allgather((times.values, times.counts)))
            self.cut = engine.time_cut(self.n, split["fractions"], times.order_statistics)
        if group.size > 1 and not self.by_user:
            gathered = group.allgather((numbers, per_file))
            totals = np.zeros(sum(theirs.size for theirs, _ in gathered), np.int64)
            for theirs, counts in gathered:
                totals[theirs] = counts
            self.offsets = (np.cumsum(totals) - totals)[numbers]
        if self.by_user:  # this process's users, sorted; their ranks among every process's users; rows before
            import pyarrow.compute as pc

            values, counts = users.totals()
            order = pc.array_sort_indices(values)
            self.users, self.user_rows = values.take(order), np.asarray(counts.take(order), np.int64)
            self.user_rank, everyone = engine.global_user_ranks(group, self.users)
            totals = np.zeros(everyone, np.int64)
            for ranks, rows in group.allgather((self.user_rank, self.user_rows)):
                totals[ranks] = rows
            self.user_before = (np.cumsum(totals) - totals)

    def restart(self):
        """Back to the first row (each read gives the same codes)."""
        self.offset, self.next = 0, 0
        self.seen = np.zeros(self.files, np.int64)
        self.rng = np.random.default_rng(self.spec.split.get("seed"))

    def positions(self, data):
        """Each row's index among every process's rows, for a batch of rows in file order (called once per
        batch, in order, after `restart`)."""
        rows = data["label"].size
        if self.offsets is None:  # one process: a row's index among all rows is its own
            self.offset += rows
            return self.offset - rows + np.arange(rows)
        file = data["file"]  # non-decreasing: the batch's rows in file order
        within = np.arange(rows) - np.searchsorted(file, file) + self.seen[file]
        self.seen += np.bincount(file, minlength=self.files)
        return self.offsets[file] + within

    def codes(self, maker, data, index):
        """Split codes of rows (loaded in `maker`) at `index` among every process's rows: in file order, or
        in (user, time, file order) when sorted by user."""
        split = self.spec.split
        if not data["label"].size:
            return np.zeros(0, np.int8)
        if maker.fitted is not None or split["by"] in ("date", "user", "held_out_users"):  # (user: user_code set)
            return maker._split()
        fractions = split["fractions"]
        if split["by"] == "time":
            from zoo.datasets import preprocess

            return preprocess.split_by_time(data["time"], self.cut)
        if split["by"] == "order":
            return engine.order_split(index, self.n, fractions)
        return self._draws(index, fractions)

    def _draws(self, index, fractions):
        """The random split's codes of the rows at `index`: the single process's one draw over every row (a
        PCG64 double per row, in order), its stream advanced to each run of consecutive indices."""
        codes = np.empty(index.size, np.int8)
        breaks = np.flatnonzero(np.diff(index) != 1) + 1
        for begin, end in zip(np.concatenate([[0], breaks]), np.concatenate([breaks, [index.size]])):
            if begin == end:
                continue
            if index[begin] != self.next:
                self.rng = np.random.default_rng(self.spec.split["seed"])
                self.rng.bit_generator.advance(int(index[begin]))
            codes[begin:end] = self.rng.choice(3, size=end - begin, p=fractions)
            self.next = int(index[end - 1]) + 1
        return codes
