"""The processed-data cache and the two kinds of processed data the pipelines read.

A processed data set lives in `<cache_dir>/<name>-<protocol>-<key>/`, where the key hashes the raw
files (path, size, modification time), the protocol, the options and FORMAT_VERSION. It holds
`meta.json` (the Schema, per-split row counts, the reader's info such as sample_rate and the account
of every raw file's rows, `info["accounting"]`), one `.npy` file per array, opened memory-mapped, so a
split is never loaded whole into memory, and, for readers that keep their fit, `preprocessing.json`
(`zoo.datasets.fitted`). The splits are train, validation and test, or the one split "all" of a file
read with a fitted preprocessing (scoring mode).

- `Table`: one row per sample, every key of the contract stored as its own array (Criteo, Avazu,
  the Taobao ads and Eleme rows whose behaviour lists come inside the row).
- `Events`: the behaviours, sorted by (user, time), plus per-sample pointers into them (MovieLens,
  Amazon Books, Taobao UserBehavior); a sample's history is gathered at batch time as the last L
  events before its own time, so the cache is O(events), not O(samples x L).
"""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time

import numpy as np

from zoo.errors import ZooError
from zoo.schema import Schema

FORMAT_VERSION = 4  # 2: info["accounting"] of every raw file, preprocessing.json, split "all"; 3: raw_user/raw_item,
# statistics; 4: a user's rows of one time ordered by their history entries' content (spec_engine.tie_keys)
SPLITS = ("train", "validation", "test")


def default_cache_dir():
    return os.environ.get("ZOO_DATA_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "zoo", "datasets"))


def cache_key(files, name, protocol, options):
    """A short hash of the raw files' identity, the protocol and the options."""
    identity = []
    for path in files:
        stat = os.stat(path)
        identity.append([os.path.abspath(path), stat.st_size, stat.st_mtime_ns])
    text = json.dumps(
        {"files": identity, "name": name, "protocol": protocol, "options": options, "format": FORMAT_VERSION},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]


BUILDING = ".building"  # the lock file a build holds in its temporary folder (flock: freed when its process dies)
ABANDONED_AFTER = 3600  # seconds: a temporary folder without that lock file (an older zoo's) is left alone this long


def remove_abandoned(cache_dir):
    """Removes the temporary build folders (".<name>-XXXX") of `cache_dir` that no live process holds: a build
    killed with SIGKILL (or a machine that went down) leaves its partial arrays and partitions behind, and
    the next build in that cache removes them. A folder is abandoned when its BUILDING lock can be taken (its
    process is gone), or, without one, when it is older than ABANDONED_AFTER. Returns the folders removed."""
    removed = []
    try:
        entries = list(os.scandir(cache_dir))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        lock = os.path.join(entry.path, BUILDING)
        try:
            if not os.path.exists(lock):
                if time.time() - entry.stat(follow_symlinks=False).st_mtime < ABANDONED_AFTER:
                    continue  # just made (its lock comes next), or an older zoo's build still running
            else:
                with open(lock, "a") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live build: BlockingIOError
        except (BlockingIOError, FileNotFoundError):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def cached(cache_dir, name, protocol, key, build):
    """The processed directory, built by `build(tmp_dir)` on a miss (atomically, via a temp dir that the build
    holds locked; `remove_abandoned` clears the temp dirs of builds that died first)."""
    target = os.path.join(cache_dir, f"{name}-{protocol}-{key}")
    if os.path.isfile(os.path.join(target, "meta.json")):
        return target
    os.makedirs(cache_dir, exist_ok=True)
    remove_abandoned(cache_dir)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir)
    lock = open(os.path.join(tmp, BUILDING), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        build(tmp)
        os.remove(os.path.join(tmp, BUILDING))
        if os.path.isdir(target):  # a stale, incomplete build
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        lock.close()
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def write_meta(directory, kind, schema, rows, info):
    meta = {"kind": kind, "schema": schema.to_dict(), "rows": rows, "info": info}
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def save(directory, name, array):
    """`array` as <directory>/<name>.npy; a failed write (a full disk, a file size limit: NumPy's "N requested
    and M written") is an OSError naming the file."""
    path = os.path.join(directory, f"{name}.npy")
    try:
        np.save(path, np.ascontiguousarray(array))
    except OSError as error:
        raise OSError(error.errno or errno.EFBIG, f"writing the data cache failed ({error.strerror or error})",
                      path) from None


def write_table(directory, schema, samples, info):
    """Writes a `Table`: `samples` {split: {key: [n, ...] array, "labels": [n]}}."""
    rows = {}
    for split, part in samples.items():
        rows[split] = int(part["labels"].shape[0])
        for key, values in part.items():
            save(directory, f"{split}.{key}", values)
    write_meta(directory, "table", schema, rows, info)


class TableAppender:
    """A `Table` (or an `Events` store) written batch by batch (the streaming build): `append(split, part)` adds a batch's rows
    ({key: [n, ...] array}) to the end of each array's .npy file; `close(schema, info)` writes every file's
    final row count into its header (space kept at the start) and meta.json. Memory: one batch."""

    HEADER = 256  # bytes kept for a .npy header (format 1.0: magic, version, length, padded dict)

    def __init__(self, directory):
        self.directory, self.files, self.rows = directory, {}, {}

    def append(self, split, part, rows=True):
        for key, values in part.items():
            values = np.ascontiguousarray(values)
            entry = self.files.get((split, key))
            if entry is None:
                stream = open(os.path.join(self.directory, f"{split}.{key}.npy"), "wb")
                stream.write(b"\0" * self.HEADER)
                entry = self.files[split, key] = {"stream": stream, "dtype": values.dtype,
                                                  "shape": values.shape[1:], "rows": 0}
            if (values.dtype, values.shape[1:]) != (entry["dtype"], entry["shape"]):
                raise ValueError(f"{split}.{key}: a batch of {values.dtype} {values.shape[1:]} after "
                                 f"{entry['dtype']} {entry['shape']}")
            entry["stream"].write(values.tobytes())
            entry["rows"] += values.shape[0]
        if rows:  # a split's samples (not an Events store's "events")
            self.rows[split] = self.rows.get(split, 0) + int(part["labels"].shape[0])

    def __enter__(self):
        return self

    def __exit__(self, *error):  # after an error: the files closed (the caller's temporary folder goes)
        for entry in self.files.values():
            entry["stream"].close()

    def close(self, schema, info, kind="table"):
        import struct

        for entry in self.files.values():
            header = repr({"descr": np.lib.format.dtype_to_descr(entry["dtype"]), "fortran_order": False,
                           "shape": (entry["rows"],) + entry["shape"]}).encode("latin1")
            room = self.HEADER - 10  # after the magic (6), the version (2) and the length (2)
            entry["stream"].seek(0)
            entry["stream"].write(b"\x93NUMPY\x01\x00" + struct.pack("<H", room) + header.ljust(room - 1) + b"\n")
            entry["stream"].close()
        write_meta(self.directory, kind, schema, self.rows, info)


def open_processed(directory):
    with open(os.path.join(directory, "meta.json")) as f:
        meta = json.load(f)
    cls = {"table": Table, "events": Events}[meta["kind"]]
    return cls(directory, meta)


class _Processed:
    def __init__(self, directory, meta):
        self.directory = directory
        self.schema = Schema.from_dict(meta["schema"])
        self.rows = meta["rows"]
        self.info = meta["info"]

    _opening = threading.Lock()

    def _load(self, name):
        """The array `name`, memory-mapped once and kept (batches gather from it many times); opened by one
        thread at a time (make_dataset opens a split's arrays before tf.data's threads start)."""
        arrays = self.__dict__.setdefault("_arrays", {})
        if name not in arrays:
            with self._opening:
                if name not in arrays:
                    arrays[name] = np.load(os.path.join(self.directory, f"{name}.npy"), mmap_mode="r")
        return arrays[name]

    def num_rows(self, split):
        if split not in self.rows:
            raise ZooError(f"unknown split '{split}' (splits: {', '.join(self.rows)})")
        return self.rows[split]

    def column(self, split, key):
        """One stored array of a split, 1-D [n]: "labels", or a key of the user_/cand_/ctx_/num_ groups."""
        self.num_rows(split)
        return np.asarray(self._load(f"{split}.{key}")).reshape(-1)

    def has_column(self, split, key):
        """Whether `split` keeps the array `key` (e.g. a data spec's "raw_user")."""
        return os.path.isfile(os.path.join(self.directory, f"{split}.{key}.npy"))

    def source_lines(self, split):
        """The raw file's line number of each sample of `split`, in sample order (a scoring-mode read's
        split "all", and every split of a data spec's read)."""
        self.num_rows(split)
        if not os.path.isfile(os.path.join(self.directory, f"{split}.line.npy")):
            raise ZooError(f"split '{split}' keeps no source lines (only the split 'all' of a scoring-mode read does)")
        return np.asarray(self._load(f"{split}.line"))

    def source_order(self, split):
        """The split's sample indices in the raw file's order (argsort of `source_lines`, stable): the order a
        scoring-mode read's rows had in the file."""
        return np.argsort(self.source_lines(split), kind="stable")

    def preprocessing(self):
        """The fitted preprocessing state (a dict, see zoo.datasets.fitted) of this data set's fit."""
        from zoo.datasets import fitted

        path = os.path.join(self.directory, fitted.FILE_NAME)
        if not os.path.isfile(path):
            raise ZooError(
                "this processed data set keeps no fitted preprocessing: only a fit of a data spec, criteo, "
                "movielens/rest, amazon_books/rest or taobao/suan does (not avazu, taobao/ads, eleme, nor a "
                "scoring-mode read)"
            )
        return fitted.read_preprocessing(path)


class Table(_Processed):
    """Row-per-sample arrays: `take(split, index)` -> (features, labels [n, 1])."""

    kind = "table"

    def take(self, split, index):
        index = np.sort(index)  # sorted reads from the memory map
        features = {}
        for key in self.schema.keys():
            value = np.asarray(self._load(f"{split}.{key}")[index])
            features[key] = value[:, None] if key.startswith("cand_") else value  # [n] -> [n, M=1]
        return features, np.asarray(self._load(f"{split}.labels")[index])[:, None]

    def groups(self, split, size):
        raise ZooError(
            "parallel-candidate and shared-prefix modes need a data set whose behaviours are events "
            "(movielens, amazon_books, taobao/suan); this one stores each row's history inside the row"
        )


class Events(_Processed):
    """Behaviour events sorted by (user, time) and samples that point into them.

    Arrays: `events.<hist key>` (hist ids and hist_time); per split `<split>.start`, `<split>.end`
    (the sample's visible history is events[max(start, end - L):end]), `<split>.user` (grouping key)
    and `<split>.<key>` for the user_/cand_/ctx_/num_ keys (cand_ stored 1-D) and `<split>.labels`.
    """

    kind = "events"

    def _history(self, split, index):
        length = self.schema.sequence_length
        start = np.asarray(self._load(f"{split}.start")[index])
        end = np.asarray(self._load(f"{split}.end")[index])
        position = end[:, None] + np.arange(-length, 0)[None, :]  # [n, L]
        valid = position >= start[:, None]
        safe = np.where(valid, position, 0)
        history = {}
        for key in self.schema.keys():
            if key.startswith("hist_"):
                values = self._load(f"events.{key}")
                history[key] = np.where(valid, values[safe], 0).astype(values.dtype)
        return history

    def _sample(self, split, key, index):
        return np.asarray(self._load(f"{split}.{key}")[index])

    def take(self, split, index):
        index = np.sort(index)
        features = self._history(split, index)
        for key in self.schema.keys():
            if not key.startswith("hist_"):
                value = self._sample(split, key, index)
                features[key] = value[:, None] if key.startswith("cand_") else value
        return features, self._sample(split, "labels", index)[:, None]

    def groups(self, split, size):
        """[G, size] sample indices: each user's samples in time order, chunked by `size`; -1 pads
        the last chunk of a user."""
        users = np.asarray(self._load(f"{split}.user"))
        n = users.shape[0]
        if not n:
            return np.zeros((0, size), dtype=np.int64)
        new_user = np.concatenate([[True], users[1:] != users[:-1]])
        starts = np.flatnonzero(new_user)
        lengths = np.diff(np.append(starts, n))
        chunks = -(-lengths // size)
        group_start = np.repeat(starts, chunks) + size * (
            np.arange(chunks.sum()) - np.repeat(np.cumsum(chunks) - chunks, chunks)
        )
        group_end = np.repeat(starts + lengths, chunks)
        member = group_start[:, None] + np.arange(size)[None, :]
        return np.where(member < group_end[:, None], member, -1)

    def take_groups(self, split, groups, mode):
        """Rows of M = groups.shape[1] candidates: (features, labels [B, M], weights [B, M]); the
        slots of a short group repeat its own samples (weight 0 there, 1 on the real slots).

        mode "parallel": the history is the earliest candidate's (before every candidate's time), so
        any model may read it. mode "prefix" (ReST ULT): the history is the latest candidate's; a model
        must let candidate j see only behaviours with hist_time < cand_time[:, j] (prefix-valid mask).
        """
        present = groups >= 0
        count = present.sum(1)
        rows = np.arange(groups.shape[0])
        first, last = groups[:, 0], groups[rows, count - 1]
        anchor = first if mode == "parallel" else last
        features = self._history(split, anchor)
        # A user's last group may be short: its slots repeat the group's own samples cyclically.
        slot = np.arange(groups.shape[1])[None, :] % count[:, None]
        filled = groups[rows[:, None], slot].reshape(-1)
        for key in self.schema.keys():
            if key.startswith("hist_"):
                continue
            if key.startswith("cand_"):
                value = self._sample(split, key, filled)
                features[key] = value.reshape(groups.shape + value.shape[1:])  # (a tags feature keeps its S)
            else:
                features[key] = self._sample(split, key, anchor)
        labels = self._sample(split, "labels", filled).reshape(groups.shape).astype("float32")
        return features, labels, present.astype("float32")
