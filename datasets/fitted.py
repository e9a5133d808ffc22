"""The fitted preprocessing of a data set as plain JSON (`preprocessing.json`).

A model trained on a real data set only understands the ids that data set's fit gave: to score new raw
rows, the reader must apply the same vocabularies instead of fitting new ones (as a keras-hub preset
carries its tokenizer). A reader that supports it writes its fitted state beside the processed data
(`zoo.datasets.prepare(...).preprocessing()`), and `zoo.datasets.load(..., preprocessing=state)` applies
it. The state is a dict:

    {"format": "zoo.datasets.preprocessing", "version": 1,
     "dataset": "movielens", "protocol": "rest", "options": {...the protocol's options},
     "schema": {...Schema.to_dict()}, "fitted": {"item_id": {"kind": "vocabulary", "tokens": [...]}, ...},
     "info": {...facts of the fit a scorer needs, e.g. Taobao's sample_rate}}

`fitted` holds `preprocess.Vocabulary` / `HashedIds` / `QuantileBuckets` states (`get_state()`); a
vocabulary lists its tokens in id order (token i has id i + 1, OOV = len + 1).
"""

import json
import os

from zoo.datasets import fitted_checks, preprocess
from zoo.datasets.spec import DataSpec, statistics_state
from zoo.errors import ZooError
from zoo.schema import Schema

FILE_NAME = "preprocessing.json"
FORMAT = "zoo.datasets.preprocessing"
VERSION = 1
KEYS = ("dataset", "protocol", "options", "schema", "fitted", "info")


def make_state(dataset, protocol, options, schema, fitted, info=None):
    """The state dict of a fit: `fitted` maps names to fitted Vocabulary/HashedIds/QuantileBuckets."""
    state = {
        "format": FORMAT, "version": VERSION, "dataset": dataset, "protocol": protocol,
        "options": dict(options), "schema": schema.to_dict(),
        "fitted": {name: table.get_state() for name, table in fitted.items()}, "info": dict(info or {}),
    }
    return json.loads(json.dumps(state))  # plain JSON types (tuples -> lists) as read back from a file


def save_preprocessing(state, path):
    """Writes `state` as JSON to `path` (a file, or a folder that gets `preprocessing.json`); returns the
    file's path."""
    state = read_preprocessing(state)
    if os.path.isdir(path):
        path = os.path.join(path, FILE_NAME)
    try:
        with open(path, "w") as f:
            json.dump(state, f)
    except OSError as error:
        raise ZooError(f"{path}: cannot write the preprocessing ({error.strerror})") from None
    return os.fspath(path)


def read_preprocessing(source):
    """A checked state from a dict, a preprocessing.json file or a folder holding one. A preset folder's
    file must match the sha256 its metadata.json records (zoo.presets.check_preprocessing), and every
    state's fields must hold what the readers read from them (zoo.datasets.fitted_checks), checksum or not."""
    where = "preprocessing"
    if not isinstance(source, dict):
        path = os.fspath(source)
        if os.path.isdir(path):
            path = os.path.join(path, FILE_NAME)
        where = path
        if not os.path.isfile(path):
            raise ZooError(f"{path}: no such preprocessing file")
        if os.path.basename(path) == FILE_NAME:  # perhaps a preset's: its checksum first
            from zoo import presets

            presets.check_preprocessing(os.path.dirname(path) or ".")
        try:
            with open(path) as f:
                source = json.load(f)
        except (ValueError, UnicodeDecodeError) as error:
            raise ZooError(f"{path}: not a JSON preprocessing file ({str(error).splitlines()[0]})") from None
        except RecursionError:
            raise ZooError(f"{path}: not a JSON preprocessing file (nested deeper than Python's JSON reader "
                           "goes; a fitted state is a few levels deep)") from None
    if not isinstance(source, dict) or source.get("format") != FORMAT:
        raise ZooError(f"{where}: not a zoo.datasets preprocessing (its 'format' should be '{FORMAT}')")
    if source.get("version") != VERSION:
        raise ZooError(f"{where}: preprocessing format version {source.get('version')!r}; this zoo reads {VERSION}")
    missing = [key for key in KEYS if key not in source]
    if missing:
        raise ZooError(f"{where}: the preprocessing lacks {', '.join(missing)}")
    if not isinstance(source["fitted"], dict) or not isinstance(source["options"], dict):
        raise ZooError(f"{where}: the preprocessing's 'fitted' and 'options' should be objects")
    fitted_checks.check_state(source, where)
    if source["dataset"] == "spec":
        check_spec_vocabularies(source, where)
    return source


def check_spec_vocabularies(state, where="preprocessing"):
    """Refuses a spec's fitted state whose vocabularies, hashing or numeric buckets do not give its schema's
    vocabulary sizes (a table of N values makes N + 2 ids: padding and the OOV id; N hash buckets or numeric
    buckets N + 2; a statistic's E bucket edges E + 2), in one line naming the column and the feature: ids past
    a table would otherwise read another feature's rows or fail, and other hash buckets give other ids."""
    schema = Schema.from_dict(state["schema"])
    columns = (state.get("spec") or {}).get("columns") or {}
    for column, options in columns.items():
        table = state["fitted"].get(column)
        if isinstance(table, dict) and table.get("kind") == "shared":
            table = state["fitted"].get(table.get("column"))
        if not isinstance(table, dict) or not isinstance(options, dict):
            continue
        if table.get("kind") == "vocabulary":
            what, ids = "vocabulary", len(table.get("tokens") or ()) + 2
        elif table.get("kind") == "hashed" or (table.get("kind") == "numeric" and "edges" in table):
            what, ids = ("hashing" if table["kind"] == "hashed" else "bucketing"), table["buckets"] + 2
        else:
            continue
        for feature in schema.features:
            if feature.name == options.get("feature") and feature.vocabulary_size != ids:
                raise ZooError(f"{where}: the fitted {what} of '{column}' makes {ids:,} ids but the schema's "
                               f"{feature.key} has vocabulary_size {feature.vocabulary_size:,}: the {what} and "
                               "the schema come from different fits")
    for key, group, names in DataSpec(state["spec"]).statistics_features() if state.get("spec") else ():
        name = statistics_state(key)
        table = state["fitted"].get(name)
        if not isinstance(table, dict):
            continue
        for edges, feature_name in zip(table.get("edges") or (), names):
            for feature in schema.features:
                if feature.name == feature_name and feature.vocabulary_size != len(edges) + 2:
                    raise ZooError(f"{where}: the fitted statistics '{name}' make {len(edges) + 2} bucket ids for "
                                   f"{feature.key} but the schema has vocabulary_size {feature.vocabulary_size}: "
                                   "the statistics and the schema come from different fits")


def tables(state, names):
    """(the state's Schema, {name: fitted table} for `names`), each table checked against the schema: its
    size is the vocabulary size of every schema feature of that name."""
    schema = Schema.from_dict(state["schema"])
    found = {}
    for name in names:
        if name not in state["fitted"]:
            raise ZooError(f"the {state['dataset']} preprocessing has no fitted '{name}'")
        table = preprocess.from_state(state["fitted"][name])
        for feature in schema.features:
            if feature.name == name and feature.vocabulary_size != table.size:
                raise ZooError(
                    f"the {state['dataset']} preprocessing is inconsistent: '{name}' has {table.size} ids "
                    f"but its schema's {feature.key} has {feature.vocabulary_size}"
                )
        found[name] = table
    return schema, found
