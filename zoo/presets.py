"""Presets: a model as three files (keras-hub's layout), loadable under any backend, and the one
resolver from a name to a model (`get`, `load`, `resolve`, `list_presets`, `list_models`).

    <dir>/config.json        {"model": registered name, "config": hyperparameters incl. the Schema}
    <dir>/metadata.json      zoo, keras and backend versions, date, parameter count, the sha256 of
                             config.json and of the weights, training data and metrics when known
    <dir>/model.weights.h5   the weights (absent in a config-only preset)
    <dir>/preprocessing.json the fitted vocabularies and buckets of a real-data preset's reader
                             (zoo.datasets.fitted; absent for simulator presets)

Loading never deserializes code: config.json is plain JSON that goes through the registry to the
model's own constructor (nothing but registered zoo classes can be named), and the weights are read
by `Model.load_weights`. Every file is checked against metadata.json (sha256; a preset written before
the config or the preprocessing was checksummed records no sha256 for it and skips that check), the
model built from the config must have the recorded parameter count, and the weights file must hold exactly the model's
weights, by name and shape (Keras alone would ignore extra entries). Every problem is one ZooError
line naming the file. Before a model is built its hyperparameters are checked against their ranges
(zoo.hyperparameters), and while it is built its weights are counted as they are declared: a config that
would build more than MAX_PARAMETERS (10^9, 4 GB of float32 weights) is refused before the weight that
crosses the bound is allocated, naming that weight (set `zoo.presets.MAX_PARAMETERS` higher for a larger
model).

Shipped presets are listed per model, keras-hub style, in `zoo/models/<model>_presets.py`: a dict
`PRESETS = {preset name: {"description": ..., "path": folder under saved/}}`, the first one being the
model's default. Parameters, training data and metrics are not repeated there: `list_presets()` reads
them from each folder's metadata.json, the one place they are written.

Names resolve one way (`resolve`): a path (it contains a separator, starts with "." or is a Path) is a
preset folder; a registered model name means that model's default preset; any other name is looked up
among all shipped presets.
"""

import datetime
import hashlib
import importlib
import json
import os
from pathlib import Path

import keras

import zoo.budget as budget
import zoo.hyperparameters as rules
from zoo import registry
from zoo.errors import ZooError
from zoo.outputs import replacing_folder

CONFIG = "config.json"
METADATA = "metadata.json"
WEIGHTS = "model.weights.h5"


def file_sha256(path):
    """The sha256 (hex) of the file at `path`, as metadata.json records a preset's files."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_sha256(directory, name, recorded, change):
    """Refuses `directory/name` when its sha256 is not the one metadata.json `recorded` (`change` says how
    it may have changed)."""
    if file_sha256(directory / name) != recorded:
        raise ZooError(f"{directory / name}: sha256 does not match {directory / METADATA} ({change})")


def save(model, directory, *, metadata=None, weights=True, preprocessing=None):
    """Writes `model` as a preset. `metadata` adds entries (e.g. training_data, metrics); `preprocessing`
    (a fitted state, see zoo.datasets.fitted) is written as preprocessing.json, checksummed like the rest.
    The preset is written whole into a temporary folder beside `directory` that then takes its place
    (zoo.outputs.replacing_folder): a reader of a preset being rewritten sees the old preset or the new one,
    never new files beside old ones, and a write that fails or is killed leaves the old preset as it was.
    Other files kept in the folder are kept."""
    from zoo.datasets.fitted import FILE_NAME

    if not getattr(model, "registered_name", None):
        raise ZooError(f"{type(model).__name__} is not a registered zoo model; only those save as presets")
    with replacing_folder(directory, owned=(CONFIG, METADATA, WEIGHTS, FILE_NAME)) as scratch:
        _write_preset(model, scratch, metadata, weights, preprocessing)


def _write_preset(model, directory, metadata, weights, preprocessing):
    """The files of a preset (see `save`) in `directory`, a new folder."""
    from zoo import __version__
    from zoo.datasets.fitted import FILE_NAME, save_preprocessing

    config = model.get_config()
    config.pop("name", None)
    config.pop("trainable", None)
    (directory / CONFIG).write_text(json.dumps({"model": model.registered_name, "config": config}, indent=2))
    info = {
        "config_sha256": file_sha256(directory / CONFIG),
        "zoo_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "parameters": int(model.count_params()),
        "weights_sha256": None,
    }
    if weights:
        write_weights(model, directory / WEIGHTS)
        info["weights_sha256"] = file_sha256(directory / WEIGHTS)
    if preprocessing is not None:
        info["preprocessing_sha256"] = file_sha256(save_preprocessing(preprocessing, directory / FILE_NAME))
    info.update(metadata or {})
    (directory / METADATA).write_text(json.dumps(info, indent=2))


def _first_line(error):
    """The first line of an exception's message (Keras errors run to many lines), or its type."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


MAX_JSON_BYTES = 16 << 20  # a preset's config.json or metadata.json larger than this is refused


def _read_json(path):
    if not path.is_file():
        raise ZooError(f"{path}: missing")
    if path.stat().st_size > MAX_JSON_BYTES:
        size = path.stat().st_size
        raise ZooError(f"{path}: {size:,} bytes, more than a preset's JSON may hold ({MAX_JSON_BYTES:,})")
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ZooError(f"{path}: not valid JSON ({error})") from None
    except RecursionError:
        raise ZooError(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise ZooError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def read_config(directory):
    """The parsed config.json of a preset directory, checked for shape."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ZooError(f"{directory}: no such preset directory")
    config = _read_json(directory / CONFIG)
    for key, kind in (("model", str), ("config", dict)):
        if not isinstance(config.get(key), kind):
            raise ZooError(f"{directory / CONFIG}: needs '{key}' ({kind.__name__})")
    return config


def read_metadata(directory):
    return _read_json(Path(directory) / METADATA)


MAX_PARAMETERS = budget.BUDGET["parameters"]  # a config building more weights (4 GB in float32) is refused


def build(entry, config, *, source):
    """Constructs a registered model from plain hyperparameters; bad values become one line. Every value is
    checked against its rule (zoo.hyperparameters, by ZooModel before the model's code runs), and the
    weights are counted as they are declared:
    the one that would take the model beyond MAX_PARAMETERS is refused before it is allocated (raise
    `zoo.presets.MAX_PARAMETERS` for a larger model). Running out of memory while building is one line."""
    import zoo.guards as guards

    known = entry.cls.hyperparameter_names()
    unknown = sorted(set(config) - set(known) - {"name", "trainable", "calibration"})
    if unknown:
        raise ZooError(
            f"{source}: invalid configuration for '{entry.name}': unknown hyperparameter(s) {', '.join(unknown)}"
            f"{rules.did_you_mean(unknown, known)}"
        )
    with guards.parameter_budget(MAX_PARAMETERS) as budget:
        try:
            return entry.cls(**config)
        except Exception as error:
            if budget.refusal is not None:  # Keras may have wrapped the refusal in a longer message
                raise ZooError(f"{source}: '{entry.name}' would have {budget.refusal}") from None
            if isinstance(error, ZooError):  # the model's own check: "<name>: ..." (the name is in `source`)
                raise ZooError(f"{source}: {str(error).removeprefix(entry.name + ': ')}") from None
            if guards.out_of_memory(error):
                raise ZooError(
                    f"{source}: building '{entry.name}' ran out of memory{guards.allocation(error)}; shrink "
                    "the widths, layers, vocabularies or the history length (sequence_length)"
                ) from None
            if isinstance(error, (TypeError, ValueError, KeyError)):
                raise ZooError(
                    f"{source}: invalid configuration for '{entry.name}': {_first_line(error)}"
                ) from None
            raise


def _weight_entries(path):
    """{entry name: shape} of every model weight a .weights.h5 file stores (its HDF5 datasets), leaving
    out the optimizer state a trained model's file also holds (under optimizer/; a model loads without it)."""
    import h5py

    entries = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith("optimizer/"):
            entries[name] = item.shape

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return entries


def _weights_in_memory(model):
    """The .weights.h5 file Keras' `save_weights` would write for `model`, as an in-memory buffer (Keras'
    own writer, H5IOStore over a BytesIO: keras.saving.save_weights itself takes only a file path)."""
    import io

    from keras.src.saving import saving_lib

    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
    store.close()
    buffer.seek(0)
    return buffer


def write_weights(model, path):
    """Writes the .weights.h5 file `model.save_weights` would, through an in-memory buffer and a temporary
    file renamed into place: a write that fails (a full disk, a file size limit, no permission) is one
    OSError naming the path and leaves no partial file. (HDF5 writing to the file itself left it open in a
    broken state when a write failed, and the process crashed with a segmentation fault at exit.)"""
    path = Path(path)
    buffer = _weights_in_memory(model)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as stream:
            stream.write(buffer.getbuffer())
        os.replace(temporary, path)
    except OSError as error:
        if temporary.exists():
            temporary.unlink()
        if error.filename in (None, str(temporary)):  # (a failed write names no file)
            error.filename = str(path)
        raise


def check_weights_fit(model, path):
    """Raises a ZooError unless the weights file at `path` holds exactly the model's weights: each
    stored entry is one the model reads (none ignored, as Keras would: a 2-layer model's file loads into
    a 1-layer model), each model weight is stored, with the model's shape. The model's own entries come
    from Keras' weights writer into memory (no file: loading a preset writes nothing), so both sides are
    named by Keras' writer."""
    try:
        stored = _weight_entries(path)
    except OSError as error:
        raise ZooError(f"{path}: not a readable HDF5 weights file ({_first_line(error)})") from None
    expected = _weight_entries(_weights_in_memory(model))
    unused = sorted(set(stored) - set(expected))
    missing = sorted(set(expected) - set(stored))
    reshaped = sorted(k for k in set(stored) & set(expected) if stored[k] != expected[k])
    if not (unused or missing or reshaped):
        return

    def some(names):
        return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")

    problems = [f"{len(unused)} stored weight(s) the model has no place for ({some(unused)})" if unused else "",
                f"{len(missing)} model weight(s) not stored ({some(missing)})" if missing else "",
                f"{len(reshaped)} of another shape ({reshaped[0]}: stored {list(stored[reshaped[0]])}, model "
                f"{list(expected[reshaped[0]])})" if reshaped else ""]
    raise ZooError(f"{path}: weights do not fit the config: {'; '.join(p for p in problems if p)}")


def load_weights_file(model, path):
    """Loads a .weights.h5 file into `model` after `check_weights_fit`; problems are one ZooError line."""
    path = Path(path)
    if not path.is_file():
        raise ZooError(f"{path}: missing")
    check_weights_fit(model, path)
    try:
        model.load_weights(str(path))
    except OSError as error:
        raise ZooError(f"{path}: not a readable HDF5 weights file ({str(error).splitlines()[0]})") from None
    except (ValueError, KeyError, TypeError) as error:
        raise ZooError(f"{path}: weights do not fit the config ({_first_line(error)})") from None


def load(name_or_directory):
    """Restores a preset (a folder, or a shipped preset's name) under the current backend (see the
    module docstring for the checks)."""
    directory = resolve(name_or_directory)
    model, metadata = _build_from_folder(directory)
    recorded = metadata.get("parameters")
    if recorded is not None and model.count_params() != recorded:
        raise ZooError(
            f"{directory / CONFIG}: builds a model of {model.count_params():,} parameters but {directory / METADATA} "
            f"records {recorded:,} (the config or the model's code changed after saving)"
        )
    expected = metadata.get("weights_sha256")
    weights = directory / WEIGHTS
    if expected is None:
        if weights.exists():
            raise ZooError(f"{weights}: present but {directory / METADATA} records no weights")
        return model
    if not weights.is_file():
        raise ZooError(f"{weights}: missing ({directory / METADATA} records weights)")
    _check_sha256(directory, WEIGHTS, expected, "changed or truncated after saving")
    load_weights_file(model, weights)
    return model


def check_preprocessing(directory, metadata=None):
    """Refuses a preset folder's preprocessing.json that differs from the sha256 its metadata.json records
    (a folder without metadata.json, or whose metadata records none, is not checked). `metadata`: the
    folder's metadata when the caller has read it already."""
    from zoo.datasets.fitted import FILE_NAME

    directory = Path(directory)
    if metadata is None:
        if not (directory / METADATA).is_file():
            return
        metadata = read_metadata(directory)
    recorded = metadata.get("preprocessing_sha256")
    if recorded is None:
        return
    if not (directory / FILE_NAME).is_file():
        raise ZooError(f"{directory / FILE_NAME}: missing ({directory / METADATA} records a preprocessing)")
    _check_sha256(directory, FILE_NAME, recorded, "edited after saving")


def _build_from_folder(directory):
    """The model a preset folder's config.json describes (no weights) and its metadata; config.json
    (and preprocessing.json) must match the sha256 metadata.json records for it (when it records one)."""
    metadata = read_metadata(directory)
    recorded = metadata.get("config_sha256")
    if recorded is not None and (directory / CONFIG).is_file():
        _check_sha256(directory, CONFIG, recorded, "edited after saving")
    check_preprocessing(directory, metadata)
    config = read_config(directory)
    try:
        item = registry.entry(config["model"])
    except ZooError as error:
        raise ZooError(f"{directory / CONFIG}: {error}") from None
    from zoo.datasets.preprocessor import Preprocessor

    # (a hyperparameter added after the preset was written takes the value its graph was trained with)
    model = build(item, {**item.cls.written_before, **config["config"]}, source=str(directory / CONFIG))
    model.preprocessor = Preprocessor.from_preset(directory)  # the preset's data contract, or None
    return model, metadata


# ---------------------------------------------------------------------- the shipped presets
def _saved_root():
    import zoo.saved

    return Path(zoo.saved.__file__).parent


def preset_table(model_name):
    """The `PRESETS` table of a registered model (`<its module>_presets.py`), or {} when it ships none."""
    module = registry.entry(model_name).cls.__module__ + "_presets"
    try:
        return dict(importlib.import_module(module).PRESETS)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        return {}


def _shipped():
    """{preset name: (model name, table row)} over every registered model; names are unique."""
    presets = {}
    for model_name in registry.names():
        for preset, row in preset_table(model_name).items():
            if preset in presets and presets[preset][0] != model_name:
                raise ZooError(f"preset name '{preset}' is listed by both {presets[preset][0]} and {model_name}")
            if preset in registry.names() and preset != model_name:
                raise ZooError(f"preset name '{preset}' of {model_name} is the name of another model")
            presets[preset] = (model_name, row)
    return presets


def resolve(name_or_directory, preset=None):
    """The folder of a preset: a path, a model name (its default preset, or `preset` of it) or a preset name."""
    text = str(name_or_directory)
    if isinstance(name_or_directory, Path) or os.sep in text or text.startswith("."):
        if preset is not None:
            raise ZooError(f"{text} is a preset folder already; preset={preset!r} names another")
        if not Path(text).is_dir():
            raise ZooError(f"{text}: no such preset directory")
        return Path(text)
    shipped = _shipped()
    if (text in registry.names() or text in shipped) and Path(text).is_dir():
        raise ZooError(f"'{text}' names a shipped preset and a folder here: write ./{text} for the folder")
    if text in registry.names():
        table = preset_table(text)
        if preset is None:
            if not table:
                raise ZooError(f"model '{text}' ships no preset: pass schema=... to build a fresh one")
            preset = next(iter(table))
        if preset not in table:
            owner = f"a {shipped[preset][0]} preset" if preset in shipped else "not a shipped preset"
            raise ZooError(f"preset '{preset}' is {owner} ({text} presets: {', '.join(table) or 'none'})")
        return _saved_root() / table[preset]["path"]
    if text in shipped:
        if preset is not None:
            raise ZooError(f"'{text}' is a preset already; preset={preset!r} names another")
        return _saved_root() / shipped[text][1]["path"]
    if Path(text).is_dir():
        return Path(text)
    import difflib

    close = difflib.get_close_matches(text, registry.names() + sorted(shipped), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ZooError(
        f"unknown model '{text}' (known: {', '.join(registry.names())}; presets: {', '.join(sorted(shipped))}){hint}"
    )


def list_presets(model_name=None):
    """One dict per shipped preset: preset, model, default, description, path, and from its
    metadata.json the parameters, training data and metrics."""
    rows = []
    for preset, (model, row) in _shipped().items():
        if model_name is not None and model != model_name:
            continue
        path = _saved_root() / row["path"]
        metadata = read_metadata(path) if (path / METADATA).is_file() else {}
        rows.append({
            "preset": preset,
            "model": model,
            "default": preset == next(iter(preset_table(model))),
            "description": row["description"],
            "path": str(path),
            "parameters": metadata.get("parameters"),
            "training_data": metadata.get("training_data"),
            "metrics": metadata.get("metrics"),
        })
    return rows


def list_models():
    """One dict per registered model: name, description, paper, signatures, its presets and the
    parameters of its default preset (None when it ships none)."""
    presets = list_presets()
    rows = []
    for name in registry.names():
        item = registry.entry(name)
        own = [row for row in presets if row["model"] == name]
        rows.append({
            "name": name,
            "description": item.description,
            "paper": item.paper,
            "signatures": list(item.signatures),
            "presets": [row["preset"] for row in own],
            "parameters": next((row["parameters"] for row in own if row["default"]), None),
        })
    return rows


def get(name, schema=None, preset=None, weights="default", **hyperparameters):
    """A model by registered model name or preset name.

    Without a schema or hyperparameters it loads a trained preset: `get("lightsuan")` the model's
    default preset, `get("distilsuan")` or `get("lightsuan", preset="distilsuan")` another one.
    With a `schema` and/or hyperparameters it builds a fresh, untrained model from the class defaults
    (never from a preset's config) updated with the hyperparameters; a schema is required then.
    `weights=None` never loads weights; a path loads that `.weights.h5` file into the model.
    """
    fresh = schema is not None or bool(hyperparameters)
    if not fresh:
        directory = resolve(name, preset)
        if weights == "default":
            return load(directory)
        model, _ = _build_from_folder(directory)
    else:
        if preset is not None:
            raise ZooError(
                f"preset={preset!r} loads a trained preset; schema/hyperparameters build a fresh model: "
                "pass one or the other"
            )
        shipped = _shipped()
        model_name = shipped[name][0] if name in shipped and name not in registry.names() else name
        item = registry.entry(model_name)
        rules.check_names(model_name, hyperparameters, item.cls.hyperparameter_names())
        if schema is None:
            raise ZooError(
                f"hyperparameters build a fresh {model_name} from its class defaults: pass schema=... too "
                f"(e.g. schema=zoo.get('{name}').schema for the preset's features)"
            )
        model = build(item, {**hyperparameters, "schema": schema}, source=f"{model_name} hyperparameters")
    if weights not in (None, "default"):
        load_weights_file(model, Path(weights))
    return model
