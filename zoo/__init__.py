"""keras-ctr-zoo: Keras 3 CTR and ranking models (SUAN/LightSUAN, ReST, DeRes, DIN) on any backend.

    import zoo
    zoo.list_models(); zoo.list_presets()
    model = zoo.get("lightsuan")                  # the model's default preset, with its weights
    model = zoo.get("distilsuan")                 # another shipped preset (of lightsuan)
    model = zoo.get("din", schema=my_schema)      # a fresh model from the class defaults
    zoo.save(model, "./my_preset"); zoo.load("./my_preset")
"""

__version__ = "0.1.0"

from zoo import datasets, layers, models, recipes  # noqa: E402,F401  (models registers the models)
from zoo.errors import ZooError  # noqa: E402
from zoo.feature import Feature  # noqa: E402
from zoo.presets import get, list_models, list_presets, load, save  # noqa: E402
from zoo.registry import register  # noqa: E402
from zoo.schema import Schema  # noqa: E402
from zoo.serving import export  # noqa: E402
