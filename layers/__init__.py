"""zoo.layers: backend-agnostic Keras layers (keras.ops only), one per file, each citing its equation."""

from zoo.layers.dice import Dice
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.embedding_uniform import EmbeddingUniform
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_attention import TargetAttention
from zoo.layers.ctr_transformer_tokens import CTRTransformerTokens
from zoo.layers.denseformer_stack import DenseFormerStack
from zoo.layers.deres import DeRes
from zoo.layers.deres_block_attention import DeResBlockAttention
from zoo.layers.deres_gate import DeResGate
from zoo.layers.deres_transformer_layer import DeResTransformerLayer
from zoo.layers.afnet import AFNet
from zoo.layers.calibration import Calibration
from zoo.layers.relative_attention_bias import RelativeAttentionBias
from zoo.layers.suan_encoder import SuanEncoder
from zoo.layers.suan_self_attention import SuanSelfAttention
from zoo.layers.swiglu import SwiGLU
from zoo.layers.uab import UAB
from zoo.layers.dga import DualGatedAttention
from zoo.layers.pfkv import PFKVDecoderLayer
from zoo.layers.prefix_valid_mask import PrefixValidMask
from zoo.layers.rest_decoder import ReSTDecoder
from zoo.layers.rest_encoder import ReSTEncoder
from zoo.layers.rote import RotaryPositionTime
from zoo.layers.srn import SRN
from zoo.layers.masked_softmax import masked_softmax
