"""The model registry: `register`, `get`, `list_models`."""

import dataclasses
import difflib
import json
import os
from pathlib import Path

from zoo.errors import ZooError

_MODELS = {}


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    cls: type
    description: str
    paper: str
    signatures: tuple = ("serving_default",)


def register(name, *, description, paper, signatures=()):
    """Class decorator: registers a `ZooModel` subclass under `name` (the name presets and the CLI use).

    `signatures` names the export signatures the model serves besides "serving_default" (which every
    model serves), e.g. ("parallel_candidates",); `zoo.export` reads them from here.
    """

    def decorator(cls):
        if name in _MODELS and _MODELS[name].cls is not cls:
            raise ZooError(f"model name '{name}' is already registered by {_MODELS[name].cls.__name__}")
        cls.registered_name = name
        _MODELS[name] = Entry(name, cls, description, paper, ("serving_default",) + tuple(signatures))
        return cls

    return decorator


def entry(name):
    """The registry entry of `name`; an unknown name lists the known ones and the closest match."""
    if name in _MODELS:
        return _MODELS[name]
    known = sorted(_MODELS)
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ZooError(f"unknown model '{name}' (known: {', '.join(known)}){hint}")


def names():
    return sorted(_MODELS)


def shipped_preset(name):
    """The directory of the preset shipped in saved/ for `name`, or None."""
    import zoo.saved

    path = Path(zoo.saved.__file__).parent / name
    return path if (path / "config.json").is_file() else None


def preset_directory(name_or_dir):
    """A preset directory given as a path, or the shipped preset of a registered name."""
    path = Path(name_or_dir)
    if path.is_dir():
        return path
    if os.sep in str(name_or_dir) or str(name_or_dir).startswith("."):
        raise ZooError(f"{name_or_dir}: no such preset directory")
    entry(str(name_or_dir))  # an unknown name lists the known ones
    preset = shipped_preset(str(name_or_dir))
    if preset is None:
        raise ZooError(f"model '{name_or_dir}' ships no preset")
    return preset


def list_models():
    """One dict per registered model: name, description, paper, parameters of the default config."""
    rows = []
    for name in names():
        item = _MODELS[name]
        preset = shipped_preset(name)
        parameters = None
        if preset is not None and (preset / "metadata.json").is_file():
            parameters = json.loads((preset / "metadata.json").read_text()).get("parameters")
        rows.append(
            {"name": name, "description": item.description, "paper": item.paper, "parameters": parameters}
        )
    return rows


def get(name, schema=None, weights="default", **hyperparameters):
    """A model by registered name.

    `get(name)` returns the preset shipped in saved/<name>, with its weights when it ships them.
    With a `schema` or hyperparameters it returns a fresh model: the preset's configuration updated
    with them (the shipped weights no longer fit, so `weights="default"` means none then).
    `weights=None` never loads weights; a path loads that `.weights.h5` file into the model.
    """
    from zoo import presets

    item = entry(name)
    preset = shipped_preset(name)
    config = presets.read_config(preset)["config"] if preset is not None else {}
    if schema is not None:
        config["schema"] = schema
    unknown = sorted(set(hyperparameters) - set(item.cls.hyperparameter_names()))
    if unknown:
        raise ZooError(
            f"{name} has no hyperparameter {', '.join(unknown)} "
            f"(hyperparameters: {', '.join(item.cls.hyperparameter_names())})"
        )
    config.update(hyperparameters)
    if "schema" not in config:
        raise ZooError(f"{name} ships no preset: pass schema=... to build it")
    fresh = schema is not None or bool(hyperparameters)
    if weights == "default" and not fresh and preset is not None:
        return presets.load(preset)
    model = presets.build(item, config, source=f"{name} config")
    if weights not in (None, "default"):
        presets.load_weights_file(model, Path(weights))
    return model
