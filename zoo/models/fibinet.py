import keras
from keras import ops

from zoo.layers.bilinear_interaction import TYPES, BilinearInteraction
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.senet import SENET
from zoo.models.interaction_parts import check_choice, field_tokens, first_order, flatten_fields
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "fibinet",
    description="FiBiNET: SENET field importance and bilinear field interactions on the original and re-weighted embeddings, then a deep network",
    paper="Huang et al., FiBiNET: Combining Feature Importance and Bilinear feature Interaction for Click-Through Rate Prediction, RecSys 2019",
)
@keras.saving.register_keras_serializable(package="zoo")
class FiBiNET(ZooModel):
    """FiBiNET, a feature-interaction baseline of DeRes Table 2.

    Huang et al. 2019, per candidate over its field embeddings E = [e_1, ..., e_f] (FieldTokens):

        V = SENET(E)                                   (§3.3, eq 3-6, layer SENET, reduction ratio r)
        p = Bilinear(E),  q = Bilinear'(V)             (§3.4, eq 7-9, layer BilinearInteraction)
        c = [p_1, ..., p_n, q_1, ..., q_n]             (§3.5, combination layer, eq 10)
        ŷ = sigmoid(w_0 + sum_i w_i x_i + y_d),  y_d = DNN(c)     (§3.6-3.7, eq 11-13)

    Output `pctr` [B, M]. Sizes: reduction_ratio r = 3, bilinear_type "field-interaction" (FuxiCTR's
    defaults; the paper compares the three types and fixes none), k = the schema's embedding_dim. The
    deep network is the zoo's common prediction head DiceMLP(mlp_units) (default (200, 80), as DIN;
    the paper's is ReLU 400-400-400), so baselines differ in their interaction part only.

    Decisions where the paper is silent:
    - p and q come from two bilinear layers with their own W (as FuxiCTR and DeepCTR build them).
    - The linear part sum_i w_i x_i is FM's first-order term (1-dim embeddings, see `fm`); w_0 is the
      bias of the DNN's last Dense.
    - Fields and the pooled history are FieldTokens' (hist fields are the mean of the behaviours
      visible to each candidate).

    Args:
        schema: the input contract (needs a cand_ feature; every id field of one embedding_dim).
        reduction_ratio: r of the SENET bottleneck (f / r fields).
        bilinear_type: "field-all", "field-each" or "field-interaction".
        mlp_units: hidden widths of the DNN.
        dice_momentum: moving-average decay of the BatchNorm/Dice statistics.
    """

    def __init__(
        self,
        schema,
        reduction_ratio=3,
        bilinear_type="field-interaction",
        mlp_units=(200, 80),
        dice_momentum=0.9,
        **kwargs,
    ):
        bilinear_type = check_choice("fibinet", "bilinear_type", bilinear_type, TYPES)
        inputs = schema.inputs()
        _, tokens = field_tokens("fibinet", schema, inputs)  # E [B, M, f, k]
        senet = SENET(reduction_ratio, name="senet")(tokens)  # V
        p = BilinearInteraction(bilinear_type, name="bilinear")(tokens)  # [B, M, f(f-1)/2, k]
        q = BilinearInteraction(bilinear_type, name="bilinear_senet")(senet)
        combined = flatten_fields(ops.concatenate([p, q], axis=2))  # c
        y_d = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(combined)  # [B, M, 1]
        linear = ops.sum(first_order(schema, inputs), axis=-1)  # sum_i w_i x_i [B, M]
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(y_d, axis=-1) + linear)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
