import keras
from keras import ops
from keras_rs.layers import FeatureCross

from zoo.layers.dice_mlp import DiceMLP
from zoo.models.interaction_parts import check_choice, field_tokens, flatten_fields
from zoo.models.zoo_model import ZooModel
from zoo.registry import register

STRUCTURES = ("stacked", "parallel")


@register(
    "dcnv2",
    description="DCN-V2: a cross network of explicit bounded-degree feature crosses with a deep network, stacked or parallel",
    paper="Wang et al., DCN V2: Improved Deep & Cross Network and Practical Lessons for Web-scale Learning to Rank Systems, WWW 2021",
)
@keras.saving.register_keras_serializable(package="zoo")
class DCNV2(ZooModel):
    """DCN-V2, a feature-interaction baseline of DeRes Table 2.

    Wang et al. 2021, per candidate: x_0 = [e_1; ...; e_F] in R^{F k} (the field tokens concatenated,
    FieldTokens), then the cross layers (eq 1)

        x_{l+1} = x_0 ⊙ (W_l x_l + b_l) + x_l,        W_l = U_l V_l^T when projection_dim r is set (eq 2)

    and the deep network combined as in Fig. 1:
        "stacked":  logit = Deep(x_{L_c})
        "parallel": logit = w^T [x_{L_c}; h_deep(x_0)] (+ b), written as Dense(1)(x_{L_c}) + Deep(x_0),
                    which is the same linear map of the concatenation (Deep's last Dense(1) holds the
                    h_deep half of w and the bias b).
    pctr = sigmoid(logit), output `pctr` [B, M].

    The cross layer is keras-rs' `keras_rs.layers.FeatureCross` (x0 ⊙ (W x + b) + x, full-rank or with
    a low-rank projection_dim), not a zoo layer; dcnv2_test checks it against eq 1 on every backend.

    Sizes: num_cross_layers = 3, full-rank W (projection_dim None), "parallel" (FuxiCTR's and the
    BARS benchmark's defaults; the paper evaluates both structures and does not fix one), k = the
    schema's embedding_dim. The deep network is the zoo's common prediction head DiceMLP(mlp_units)
    (default (200, 80), as DIN; the paper's is ReLU), so baselines differ in their interaction part only.

    Decisions where the paper is silent: the fields and the pooled history are FieldTokens' (hist fields
    are the mean of the behaviours visible to each candidate); the mixture-of-low-rank-experts variant
    (DCN-Mix, eq 3-4) is not built.

    Args:
        schema: the input contract (needs a cand_ feature; every id field of one embedding_dim).
        num_cross_layers: L_c, the number of cross layers.
        projection_dim: r of the low-rank cross W = U V^T, or None for the full-rank W.
        structure: "stacked" or "parallel" (how the cross and deep networks combine).
        mlp_units: hidden widths of the deep network.
        dice_momentum: moving-average decay of the BatchNorm/Dice statistics.
    """

    def __init__(
        self,
        schema,
        num_cross_layers=3,
        projection_dim=None,
        structure="parallel",
        mlp_units=(200, 80),
        dice_momentum=0.9,
        **kwargs,
    ):
        structure = check_choice("dcnv2", "structure", structure, STRUCTURES)
        inputs = schema.inputs()
        _, tokens = field_tokens("dcnv2", schema, inputs)
        x0 = flatten_fields(tokens)  # [B, M, F k]
        x = x0
        for i in range(num_cross_layers):
            x = FeatureCross(projection_dim=projection_dim, name=f"cross_{i}")(x0, x)
        deep = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")
        if structure == "stacked":
            logit = deep(x)
        else:
            logit = keras.layers.Dense(1, use_bias=False, name="cross_logit")(x) + deep(x0)
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
