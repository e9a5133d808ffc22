import keras
from keras import ops

from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.factorization_machine import FactorizationMachine
from zoo.models.interaction_parts import field_tokens, first_order, flatten_fields
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "deepfm",
    description="DeepFM: an FM and a deep network side by side on shared field embeddings, logits added",
    paper="Guo et al., DeepFM: A Factorization-Machine based Neural Network for CTR Prediction, IJCAI 2017",
)
@keras.saving.register_keras_serializable(package="zoo")
class DeepFM(ZooModel):
    """DeepFM, a feature-interaction baseline of DeRes Table 2.

    Guo et al. 2017, eq 1-4, per candidate over the F fields e_1..e_F (FieldTokens, shared by both parts):

        y_FM  = <w, x> + sum_{i<j} <V_i, V_j> x_i x_j        (eq 2, layer FactorizationMachine, + w_0)
        y_DNN = MLP(a^(0) = [e_1, e_2, ..., e_F])             (eq 3-4)
        pctr  = sigmoid(y_FM + y_DNN)                          (eq 1)

    Output `pctr` [B, M]. Sizes: k = the schema's embedding_dim; the deep part is the zoo's common
    prediction head DiceMLP(mlp_units) (default (200, 80), as DIN), its last Dense(1) giving y_DNN.

    Decisions where the paper is silent or where the zoo departs from it:
    - The deep part: the paper uses ReLU layers 400-400-400 with dropout 0.5; the zoo gives every
      baseline the same Dense -> BatchNorm -> Dice head (SUAN §4.1.4 / DIN), so the models differ in
      their interaction part only. mlp_units=(400, 400, 400) gives the paper's widths.
    - Fields, the first-order weights and the pooled history: as in `fm` (FieldTokens; hist fields are
      the mean of the behaviours visible to each candidate).
    - Embedding tables (the factors V and the first-order weights w) start from N(0, 1e-4)
      (zoo.layers.EmbeddingNormal, DeepCTR's and FuxiCTR's default), not Keras' U(-0.05, 0.05): measured
      against FuxiCTR's DeepFM at equal sizes on ML-100K over 3 seeds (benchmarks/vs_fuxictr_epochs.py,
      table in benchmarks/reproduced/vs_fuxictr_epochs/), it raises the first epoch's validation AUC
      and the test AUC (issue #40).

    Args:
        schema: the input contract (needs a cand_ feature; every id field of one embedding_dim).
        mlp_units: hidden widths of the deep part.
        dice_momentum: moving-average decay of the BatchNorm/Dice statistics.
    """

    def __init__(self, schema, mlp_units=(200, 80), dice_momentum=0.9, **kwargs):
        inputs = schema.inputs()
        _, tokens = field_tokens("deepfm", schema, inputs, embeddings_initializer="normal")  # [B, M, F, k]
        y_fm = FactorizationMachine(name="fm")(tokens, first_order(schema, inputs, embeddings_initializer="normal"))
        y_dnn = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(flatten_fields(tokens))  # [B, M, 1]
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(y_fm + y_dnn, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
