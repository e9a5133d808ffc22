"""The model registry: `register` (a class decorator), `entry` (lookup) and `names`.

A registry and nothing else: it imports no preset, model or serving code. Preset resolution lives in
`zoo.presets`, which imports this module (registry -> presets -> models, one way).
"""

import dataclasses
import difflib

from zoo.errors import ZooError

_MODELS = {}


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered model: its name, class, one-line description, paper and export signatures."""

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
    """The registered model names, sorted."""
    return sorted(_MODELS)
