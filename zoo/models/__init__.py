"""The registered models: one class per file, each a functional keras.Model built from a Schema."""

from zoo.models.din import DIN
from zoo.models.zoo_model import ZooModel
