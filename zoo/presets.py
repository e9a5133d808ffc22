"""Presets: a model as three files (keras-hub's layout), loadable under any backend.

    <dir>/config.json        {"model": registered name, "config": hyperparameters incl. the Schema}
    <dir>/metadata.json      zoo, keras and backend versions, date, parameter count, the weights'
                             sha256, training data and metrics when known
    <dir>/model.weights.h5   the weights (absent in a config-only preset)

Loading never deserializes code: config.json is plain JSON that goes through the registry to the
model's own constructor (nothing but registered zoo classes can be named), and the weights are read
by `Model.load_weights`. Every problem is one ZooError line naming the file.
"""

import datetime
import hashlib
import json
from pathlib import Path

import keras

from zoo.errors import ZooError

CONFIG = "config.json"
METADATA = "metadata.json"
WEIGHTS = "model.weights.h5"


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save(model, directory, *, metadata=None, weights=True):
    """Writes `model` as a preset. `metadata` adds entries (e.g. training_data, metrics)."""
    from zoo import __version__

    if not getattr(model, "registered_name", None):
        raise ZooError(f"{type(model).__name__} is not a registered zoo model; only those save as presets")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = model.get_config()
    config.pop("name", None)
    config.pop("trainable", None)
    (directory / CONFIG).write_text(json.dumps({"model": model.registered_name, "config": config}, indent=2))
    info = {
        "zoo_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "parameters": int(model.count_params()),
        "weights_sha256": None,
    }
    if weights:
        model.save_weights(str(directory / WEIGHTS))
        info["weights_sha256"] = _sha256(directory / WEIGHTS)
    elif (directory / WEIGHTS).exists():
        (directory / WEIGHTS).unlink()
    info.update(metadata or {})
    (directory / METADATA).write_text(json.dumps(info, indent=2))


def _first_line(error):
    """The first line of an exception's message (Keras errors run to many lines), or its type."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _read_json(path):
    if not path.is_file():
        raise ZooError(f"{path}: missing")
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ZooError(f"{path}: not valid JSON ({error})") from None
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


def build(entry, config, *, source):
    """Constructs a registered model from plain hyperparameters; bad values become one line."""
    unknown = sorted(set(config) - set(entry.cls.hyperparameter_names()) - {"name", "trainable"})
    if unknown:
        raise ZooError(
            f"{source}: invalid configuration for '{entry.name}': unknown hyperparameter(s) {', '.join(unknown)}"
        )
    try:
        return entry.cls(**config)
    except ZooError as error:
        raise ZooError(f"{source}: {error}") from None
    except (TypeError, ValueError, KeyError) as error:
        raise ZooError(f"{source}: invalid configuration for '{entry.name}': {_first_line(error)}") from None


def load_weights_file(model, path):
    path = Path(path)
    if not path.is_file():
        raise ZooError(f"{path}: missing")
    try:
        model.load_weights(str(path))
    except OSError as error:
        raise ZooError(f"{path}: not a readable HDF5 weights file ({str(error).splitlines()[0]})") from None
    except (ValueError, KeyError, TypeError) as error:
        raise ZooError(f"{path}: weights do not fit the config ({_first_line(error)})") from None


def load(directory):
    """Restores a preset under the current backend (see the module docstring for the checks)."""
    from zoo.registry import entry

    directory = Path(directory)
    config = read_config(directory)
    metadata = read_metadata(directory)
    try:
        item = entry(config["model"])
    except ZooError as error:
        raise ZooError(f"{directory / CONFIG}: {error}") from None
    model = build(item, config["config"], source=str(directory / CONFIG))
    expected = metadata.get("weights_sha256")
    weights = directory / WEIGHTS
    if expected is None:
        if weights.exists():
            raise ZooError(f"{weights}: present but {directory / METADATA} records no weights")
        return model
    if not weights.is_file():
        raise ZooError(f"{weights}: missing ({directory / METADATA} records weights)")
    if _sha256(weights) != expected:
        raise ZooError(
            f"{weights}: sha256 does not match {directory / METADATA} (changed or truncated after saving)"
        )
    load_weights_file(model, weights)
    return model
