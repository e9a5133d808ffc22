import keras
from keras import ops

from zoo.layers.factorization_machine import FactorizationMachine
from zoo.models.interaction_parts import field_tokens, first_order
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "fm",
    description="Factorization Machine: first-order weights plus factorized pairwise field interactions, no MLP",
    paper="Rendle, Factorization Machines, ICDM 2010",
)
@keras.saving.register_keras_serializable(package="zoo")
class FM(ZooModel):
    """FM, the shallowest feature-interaction model DeRes' introduction names (FM, DeepFM, DCN-v2).

    Rendle 2010, eq 1, over the F fields of each candidate (FieldTokens):

        y = w_0 + sum_i w_i x_i + sum_{i<j} <v_i, v_j> x_i x_j,     pctr = sigmoid(y)

    with the pairwise sum computed as 1/2 sum_f [(sum_i v_{i,f} x_i)^2 - sum_i v_{i,f}^2 x_i^2]
    (lemma 3.1, layer FactorizationMachine). Output `pctr` [B, M], each candidate scored on its own.

    Sizes: k = the schema's embedding_dim (one for every id field; Rendle's k). No hidden layer.

    Decisions where the paper is silent (it knows no fields, histories or candidates):
    - x: each cand_/user_/ctx_ field is one-hot, its v_i x_i the field's embedding; each hist_ field is
      the normalised multi-hot of the behaviours visible to the candidate (x_i = 1/n over the n visible
      ones, zero when none), so its token is their mean embedding and its w-term their mean weight;
      a numeric field is x = its value, with a learned v_f and w_f.
    - The pairwise sum runs over fields: two behaviours of one hist field do not interact with each
      other (their mean is one field), as in DeepCTR/FuxiCTR.
    - w_i: a second, 1-dimensional embedding table per id field ("first_order_embedding", hist_ and
      cand_ of one name share it like the factor tables); w_0 is the FactorizationMachine's bias.

    Args:
        schema: the input contract (needs a cand_ feature; every id field of one embedding_dim).
    """

    def __init__(self, schema, **kwargs):
        inputs = schema.inputs()
        _, factors = field_tokens("fm", schema, inputs)  # v_i x_i [B, M, F, k]
        linear = first_order(schema, inputs)  # w_i x_i [B, M, F]
        logit = FactorizationMachine(name="fm")(factors, linear)  # [B, M, 1]
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
