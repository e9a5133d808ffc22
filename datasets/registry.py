"""One entry point over the readers: `load(name, path, ...)` and `names()`."""

import hashlib
import importlib
import json
import os

from zoo.datasets import storage
from zoo.datasets.fitted import read_preprocessing
from zoo.datasets.pipeline import make_dataset
from zoo.errors import ZooError

READERS = ("criteo", "avazu", "movielens", "amazon_books", "taobao", "eleme")


def reader_module(name):
    if name not in READERS:
        raise ZooError(f"unknown data set '{name}' (data sets: {', '.join(READERS)})")
    return importlib.import_module(f"zoo.datasets.{name}")


def names():
    """{data set: {protocol: description}}."""
    return {name: dict(reader_module(name).PROTOCOLS) for name in READERS}


def resolve(name, path, protocol=None, options=None, preprocessing=None):
    """(reader module, protocol, full options, raw files, fitted state or None) after checking the
    arguments. With `preprocessing`, the protocol and options are the fitted ones; options given as
    well must agree with them."""
    reader = reader_module(name)
    fitted = None
    if preprocessing is not None:
        fitted = read_preprocessing(preprocessing)
        if fitted["dataset"] != name:
            raise ZooError(f"the preprocessing was fitted on {fitted['dataset']}, not {name}")
        if protocol not in (None, fitted["protocol"]):
            raise ZooError(f"the preprocessing was fitted under protocol '{fitted['protocol']}', not '{protocol}'")
        protocol = fitted["protocol"]
        if protocol not in getattr(reader, "APPLIES_PREPROCESSING", ()):
            raise ZooError(
                f"{name}/{protocol} cannot apply a fitted preprocessing "
                "(criteo, movielens/rest, amazon_books/rest and taobao/suan can)"
            )
    if protocol is None:
        detect = getattr(reader, "detect_protocol", None)
        protocol = detect(path) if detect else reader.DEFAULT_PROTOCOL
    if protocol not in reader.PROTOCOLS:
        raise ZooError(f"{name} has no protocol '{protocol}' (protocols: {', '.join(reader.PROTOCOLS)})")
    defaults = reader.OPTIONS[protocol]
    options = dict(options or {})
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ZooError(
            f"{name}/{protocol} has no option(s) {', '.join(unknown)} "
            f"(options: {', '.join(sorted(defaults)) or 'none'})"
        )
    if fitted is not None:
        given = json.loads(json.dumps(options))  # tuples -> lists, as in the state
        for key, value in given.items():
            if fitted["options"].get(key) != value:
                raise ZooError(
                    f"option {key}={options[key]!r} differs from the fitted preprocessing's "
                    f"{fitted['options'].get(key)!r}; a fitted preprocessing fixes the options"
                )
        full = {**defaults, **fitted["options"]}
    else:
        full = {**defaults, **options}
    return reader, protocol, full, reader.raw_files(path, protocol), fitted


def is_spec(name):
    """Whether `name` is a data spec (a DataSpec, a dict, or a .json file) rather than a data set's name."""
    from zoo.datasets.spec import DataSpec

    return isinstance(name, (dict, DataSpec)) or (
        isinstance(name, (str, os.PathLike)) and os.fspath(name).lower().endswith(".json"))


def _prepare_spec(spec, path, cache_dir, verbose, preprocessing, protocol, options, group=None, history_from=None,
                  grow_from=None):
    """The processed data of a user's log under a data spec (fitted), or under a fitted state that
    carries one (scoring mode)."""
    from zoo.datasets import spec_engine, spec_reading
    from zoo.datasets.spec import DataSpec

    if protocol is not None or options:
        raise ZooError(f"a data spec takes no protocol or options ({', '.join(options) or protocol}): "
                       "write them into the spec")
    fitted = None
    if grow_from is not None:  # a fit that continues a preset's: its spec
        grow_from = read_preprocessing(grow_from)
        if "spec" not in grow_from:
            raise ZooError(f"grow_from: the preprocessing was fitted by the {grow_from['dataset']} reader, not from a "
                           "data spec; only a spec's fit can be continued")
        if preprocessing is not None:
            raise ZooError("grow_from (a fit that continues a preset's) goes without preprocessing (scoring mode)")
        spec = grow_from["spec"]
    if preprocessing is not None:
        fitted = read_preprocessing(preprocessing)
        if "spec" not in fitted:
            raise ZooError(f"the preprocessing was fitted by the {fitted['dataset']} reader, not from a data spec: "
                           f"load it with zoo.datasets.load('{fitted['dataset']}', path, preprocessing=...)")
        spec = DataSpec.read(fitted["spec"])
    else:
        spec = DataSpec.read(spec)
    files = spec_reading.source_files(path, spec.source["format"])
    identity = {"spec": spec.to_dict()}
    context = [f for earlier in (history_from or []) for f in spec_reading.source_files(earlier, spec.source["format"])]
    if context:
        if fitted is None and grow_from is None:
            raise ZooError("history_from (earlier logs for histories) goes with a preset's fitted preprocessing")
        _check_distinct(context, files)
        identity["history_from"] = len(context)
        files = context + files
    if group is not None and group.size > 1:
        identity["process"] = [group.rank, group.size]  # this process's shards of the files
    for what, state in (("preprocessing", fitted), ("grow_from", grow_from)):
        if state is not None:
            identity[what] = hashlib.sha1(json.dumps(state, sort_keys=True).encode()).hexdigest()
    key = storage.cache_key(files, "spec", "spec", identity)
    directory = storage.cached(
        cache_dir or storage.default_cache_dir(), "spec", "spec", key,
        lambda out: spec_engine.build(spec, files, out, verbose, fitted=fitted, group=group, context_files=len(context),
                                      grow_from=grow_from),
    )
    return storage.open_processed(directory)


def _check_distinct(context, files):
    """Refuses an earlier log (history_from) that is one of the files scored, or is given twice (whatever
    the path's spelling): its rows would count twice in the histories and statistics."""
    for index, earlier in enumerate(context):
        for other, what in [(f, "the rows scored") for f in files] + [(c, "an earlier log") for c in context[:index]]:
            if os.path.samefile(earlier, other):
                raise ZooError(f"{earlier}: given as an earlier log for histories and as {what} ({other}); each row "
                               "may count once: leave it out of history_from")


def prepare(name, path, *, protocol=None, cache_dir=None, verbose="auto", preprocessing=None, process_group=None,
            history_from=None, grow_from=None, **options):
    """The processed data set (read from the cache, or built and cached): a storage.Table/Events.

    `name` is a data set's name (`names()`) or a data spec (zoo.datasets.spec: a dict, a DataSpec or a
    .json file) for a user's own log. With `preprocessing` (a fitted state, or its preprocessing.json file
    or folder such as a preset's: see zoo.datasets.fitted), the fit is applied instead of made: scoring
    mode, one split "all" (a state fitted from a data spec carries its spec: `name` may then be None).
    `process_group` (zoo.datasets.ProcessGroup): with a data spec, this process's shards only, under the fit
    made over every process's rows (zoo.datasets.spec_engine.build). `history_from` (scoring mode of a
    spec's fit): earlier logs (files, globs or folders) whose rows build the histories and running
    statistics of the rows of `path` and are not scored themselves. `grow_from` (fitting a data spec): a
    preset's fitted state (or its folder) that the fit continues, under its spec (zoo.datasets.spec_engine.build:
    vocabularies grow by appending new values; bucket edges, scales and the statistics' counts carry on).
    """
    state = None if preprocessing is None else read_preprocessing(preprocessing)
    if grow_from is not None or (name is None and state is not None and "spec" in state) or (
            name is not None and is_spec(name)):
        return _prepare_spec(name, path, cache_dir, verbose, state, protocol, options, process_group, history_from,
                             grow_from)
    if history_from:
        raise ZooError("history_from (earlier logs for histories) is for presets fitted on a data spec")
    if name is None and state is not None:
        name = state["dataset"]  # a reader's fit names its data set
    if name is None:
        raise ZooError("name a data set (zoo.datasets.names()) or give a data spec")
    reader, protocol, options, files, fitted = resolve(name, path, protocol, options, state)
    cache_dir = cache_dir or storage.default_cache_dir()
    identity = dict(options)
    if fitted is not None:
        identity["preprocessing"] = hashlib.sha1(json.dumps(fitted, sort_keys=True).encode()).hexdigest()
    key = storage.cache_key(files, name, protocol, identity)
    extra = {} if fitted is None else {"fitted": fitted}
    directory = storage.cached(
        cache_dir, name, protocol, key, lambda out: reader.build(files, protocol, options, out, verbose, **extra)
    )
    return storage.open_processed(directory)


def load(name, path, *, protocol=None, split=None, batch_size=256, shuffle=None, seed=0, mode=None,
         num_candidates=None, with_weights=False, drop_remainder=False, repeat=False, cache_dir=None, verbose="auto",
         with_info=False, preprocessing=None, process_group=None, grow_from=None, history_from=None, **options):
    """A data set's split as a tf.data pipeline in the input contract: (dataset, schema[, info]).

    Args:
        name: one of `names()`, or a data spec for your own log (a dict, a zoo.datasets.DataSpec or a
            spec .json file; see zoo.datasets.spec); None with a `preprocessing` fitted from a spec.
        path: the user's raw file or folder (what the data set's provider distributes).
        protocol: the paper's preprocessing (`names()[name]`); None = the data set's default.
        split: "train" (the default), "validation" or "test" (splits are by time unless the protocol says
            otherwise); with `preprocessing`, "all" (the default there, and the only split).
        batch_size, shuffle (default: train only), seed, drop_remainder, repeat: the pipeline.
        mode: None, "parallel" (m2 candidates per row) or "prefix" (ReST's user-level shared prefix);
            both need `num_candidates` (m2); `with_weights=True` adds weights [B, m2] (0 on the slots
            that repeat a short group's samples). See zoo.datasets.pipeline.
        cache_dir: where processed data is cached (default $ZOO_DATA_CACHE or ~/.cache/zoo/datasets).
        verbose: False keeps the per-file account (rows read = kept + repaired + dropped) quiet; "auto" and True print it.
        with_info: also return the reader's info dict (row counts, sample_rate, fitted sizes, the account
            of every raw file's rows in info["accounting"], unknown ids in scoring mode).
        preprocessing: a fitted preprocessing (the dict of `prepare(...).preprocessing()`, or its
            preprocessing.json file or folder) to apply instead of fitting: scoring mode, in which every
            row of the file is a sample of split "all" (movielens, amazon_books, taobao/suan; each reader
            module says what its scoring mode keeps and skips).
        process_group: a zoo.datasets.ProcessGroup of several processes (a multi-worker run:
            `ProcessGroup.jax()`): each process gets its own share. A data spec's shard files are split
            between the processes (each reads only its own; the fit is made over all of them, exchanged
            between the processes); a named data set's single file is read whole by each, which then
            batches every size-th row from its rank.
        grow_from: with a data spec, a preset's fitted preprocessing (or its folder) that the fit continues
            (`prepare`); `history_from` then names earlier logs read for histories and statistics only.
        **options: the protocol's options (see the reader module's OPTIONS).
    """
    if split is None:
        split = "train" if preprocessing is None else "all"
    elif preprocessing is not None and split != "all":
        raise ZooError(
            f"with a fitted preprocessing every row of the file is a sample of split 'all' (no filter or "
            f"split of the protocol is made); got split={split!r}"
        )
    processed = prepare(
        name, path, protocol=protocol, cache_dir=cache_dir, verbose=verbose, preprocessing=preprocessing,
        process_group=process_group, grow_from=grow_from, **({"history_from": history_from} if history_from else {}),
        **options
    )
    sharded = process_group is not None and process_group.size > 1
    rows_of = (process_group.rank, process_group.size) if sharded and not processed.info.get("process") else None
    dataset, schema = make_dataset(
        processed, split, batch_size=batch_size, shuffle=shuffle, seed=seed, mode=mode,
        num_candidates=num_candidates, with_weights=with_weights, drop_remainder=drop_remainder, repeat=repeat,
        rows_of=rows_of,
    )
    if with_info:
        rows = dict(processed.rows)
        if rows_of is not None:  # this process's share of each split
            rows = {split: len(range(rows_of[0], count, rows_of[1])) for split, count in rows.items()}
        return dataset, schema, dict(processed.info, rows=rows)
    return dataset, schema
