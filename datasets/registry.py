"""One entry point over the readers: `load(name, path, ...)` and `names()`."""

import importlib

from zoo.datasets import storage
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


def resolve(name, path, protocol=None, options=None):
    """(reader module, protocol, full options, raw files) after checking the arguments."""
    reader = reader_module(name)
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
    full = {**defaults, **options}
    return reader, protocol, full, reader.raw_files(path, protocol)


def prepare(name, path, *, protocol=None, cache_dir=None, verbose="auto", **options):
    """The processed data set (read from the cache, or built and cached): a storage.Table/Events."""
    reader, protocol, options, files = resolve(name, path, protocol, options)
    cache_dir = cache_dir or storage.default_cache_dir()
    key = storage.cache_key(files, name, protocol, options)
    directory = storage.cached(
        cache_dir, name, protocol, key, lambda out: reader.build(files, protocol, options, out, verbose)
    )
    return storage.open_processed(directory)


def load(name, path, *, protocol=None, split="train", batch_size=256, shuffle=None, seed=0, mode=None,
         num_candidates=None, with_weights=False, drop_remainder=False, repeat=False, cache_dir=None, verbose="auto",
         with_info=False, **options):
    """A data set's split as a tf.data pipeline in the input contract: (dataset, schema[, info]).

    Args:
        name: one of `names()`.
        path: the user's raw file or folder (what the data set's provider distributes).
        protocol: the paper's preprocessing (`names()[name]`); None = the data set's default.
        split: "train", "validation" or "test" (splits are by time unless the protocol says otherwise).
        batch_size, shuffle (default: train only), seed, drop_remainder, repeat: the pipeline.
        mode: None, "parallel" (m2 candidates per row) or "prefix" (ReST's user-level shared prefix);
            both need `num_candidates` (m2); `with_weights=True` adds weights [B, m2] (0 on the slots
            that repeat a short group's samples). See zoo.datasets.pipeline.
        cache_dir: where processed data is cached (default $ZOO_DATA_CACHE or ~/.cache/zoo/datasets).
        verbose: "auto" shows progress on large files; True/False force it.
        with_info: also return the reader's info dict (row counts, sample_rate, fitted sizes).
        **options: the protocol's options (see the reader module's OPTIONS).
    """
    processed = prepare(name, path, protocol=protocol, cache_dir=cache_dir, verbose=verbose, **options)
    dataset, schema = make_dataset(
        processed, split, batch_size=batch_size, shuffle=shuffle, seed=seed, mode=mode,
        num_candidates=num_candidates, with_weights=with_weights, drop_remainder=drop_remainder, repeat=repeat,
    )
    if with_info:
        return dataset, schema, dict(processed.info, rows=processed.rows)
    return dataset, schema
