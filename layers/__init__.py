"""zoo.layers: backend-agnostic Keras layers (keras.ops only), one per file, each citing its equation."""

from zoo.layers.dice import Dice
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_attention import TargetAttention
