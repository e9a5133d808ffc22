"""The registered models: one class per file, each a functional keras.Model built from a Schema."""

from zoo.models.din import DIN
from zoo.models.zoo_model import ZooModel
from zoo.models.attnres import AttnRes
from zoo.models.ctr_transformer import CTRTransformer
from zoo.models.denseformer import DenseFormer
from zoo.models.deres_p import DeResP
from zoo.models.deres_s import DeResS
from zoo.models.suan import SUAN
from zoo.models.lightsuan import LightSUAN
from zoo.models.rest import ReST
from zoo.models.fm import FM
from zoo.models.deepfm import DeepFM
from zoo.models.dcnv2 import DCNV2
from zoo.models.autoint import AutoInt
from zoo.models.fibinet import FiBiNET
