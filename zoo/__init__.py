"""keras-ctr-zoo: Keras 3 CTR and ranking models (SUAN/LightSUAN, ReST, DeRes, DIN) on any backend.

    import zoo
    zoo.list_models(); zoo.list_presets()
    model = zoo.get("lightsuan")                  # the model's default preset, with its weights
    model = zoo.get("distilsuan")                 # another shipped preset (of lightsuan)
    model = zoo.get("din", schema=my_schema)      # a fresh model from the class defaults
    zoo.save(model, "./my_preset"); zoo.load("./my_preset")
    scores = zoo.load("runs/my_din/preset").predict(pandas.read_csv("later.csv"), history_from="logs.csv")

`import zoo` changes no process setting; `zoo.configure_process()` applies the zoo's (threads, JAX's
compile cache, TensorFlow's start-up lines: zoo/process_settings.py), as the command line and `fit` do.
"""

import sys

from zoo.process_settings import configure_process

__version__ = "0.1.0"


def _starting_command_line():
    """True while `python -m zoo` imports this package to run zoo/__main__.py (Python sets sys.argv[0]
    to "-m" until the module is found). The command line then quiets TensorFlow's logs before anything
    imports it, and `--help` answers without importing it: the API below loads on first use."""
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and any(a == "-m" and b == "zoo" for a, b in zip(argv, argv[1:]))


_importing = False


def _import_api():
    """Binds the package's API; importing zoo.models registers the models."""
    global _importing, datasets, layers, models, recipes, ZooError, Feature, get, list_models, list_presets, load
    global save, register, Schema, export
    _importing = True
    try:
        import zoo.datasets
        import zoo.layers
        import zoo.models
        import zoo.recipes
        from zoo.errors import ZooError
        from zoo.feature import Feature
        from zoo.presets import get, list_models, list_presets, load, save
        from zoo.registry import register
        from zoo.schema import Schema
        from zoo.serving import export
    finally:
        _importing = False
    datasets, layers, models, recipes = zoo.datasets, zoo.layers, zoo.models, zoo.recipes


def __getattr__(name):
    # Reached for a name not bound yet while the command line starts: a submodule (`from zoo import threads`)
    # is imported alone, as the import system would; any other name binds the API. Never while the API is
    # being imported: `from zoo import <submodule>` then imports the submodule.
    if not _importing and not name.startswith("__"):
        import importlib.util

        if importlib.util.find_spec(f"zoo.{name}") is not None:
            return importlib.import_module(f"zoo.{name}")
        _import_api()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module 'zoo' has no attribute '{name}'")


if not _starting_command_line():
    _import_api()
