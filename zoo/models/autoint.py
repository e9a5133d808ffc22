import keras
from keras import ops

from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.interacting_layer import InteractingLayer
from zoo.models.interaction_parts import field_tokens
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "autoint",
    description="AutoInt: stacked multi-head self-attention over the field embeddings (interacting layers)",
    paper="Song et al., AutoInt: Automatic Feature Interaction Learning via Self-Attentive Neural Networks, CIKM 2019",
)
@keras.saving.register_keras_serializable(package="zoo")
class AutoInt(ZooModel):
    """AutoInt, a feature-interaction baseline of DeRes Table 2.

    Song et al. 2019, per candidate over its F field embeddings e_1..e_F (FieldTokens; eq 1-3):
    num_layers interacting layers (eq 5-8, layer InteractingLayer: H heads of attention size d',
    ReLU(attention ⊕ heads + W_Res e_m)), then the output layer (eq 9)

        ŷ = sigmoid(w^T (e^Res_1 ⊕ e^Res_2 ⊕ ... ⊕ e^Res_F) + b)

    Output `pctr` [B, M]. Sizes (the paper's §5.1.4): num_layers = 3, num_heads H = 2, head_dim d' = 32;
    k = the schema's embedding_dim (the paper's d = 16).

    Decisions where the paper is silent or where the zoo departs from it:
    - Output: `mlp_units` = () (the default) is eq 9 exactly (the zoo's DiceMLP with no hidden layer
      is one Dense(1)); hidden widths put the zoo's common Dice head on the concatenated interacting
      outputs instead. This is not the paper's AutoInt+ (a separate DNN on the embeddings beside the
      interacting layers), which is not built.
    - ψ is the plain inner product (no 1/sqrt(d') scaling), as eq 5 writes it.
    - Fields and the pooled history are FieldTokens' (hist fields are the mean of the behaviours
      visible to each candidate; AutoInt eq 2 averages a multi-valued field the same way).

    Args:
        schema: the input contract (needs a cand_ feature; every id field of one embedding_dim).
        num_layers: the number of interacting layers.
        num_heads: H, attention heads per interacting layer.
        head_dim: d', the attention size of each head.
        mlp_units: hidden widths of the output head (() is eq 9's logistic output).
        dice_momentum: moving-average decay of the BatchNorm/Dice statistics (used when mlp_units is set).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's attention among its F fields, and its read of the history."""
        return M * F ** 2 + M * L

    def __init__(self, schema, num_layers=3, num_heads=2, head_dim=32, mlp_units=(), dice_momentum=0.9, **kwargs):
        inputs = schema.inputs()
        _, tokens = field_tokens("autoint", schema, inputs)  # [B, M, F, k]
        m, num_fields = tokens.shape[1], tokens.shape[2]
        x = ops.reshape(tokens, (-1, num_fields, tokens.shape[3]))  # one row per candidate: [B*M, F, k]
        for i in range(num_layers):
            x = InteractingLayer(num_heads, head_dim, name=f"interacting_{i}")(x)  # [B*M, F, H d']
        x = ops.reshape(x, (-1, m, num_fields * num_heads * head_dim))  # e^Res_1 ⊕ ... ⊕ e^Res_F
        logit = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(x)
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
