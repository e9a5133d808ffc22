import keras

from zoo.errors import ZooError
from zoo.layers.co_action_unit import CoActionUnit
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_attention import TargetAttention
from zoo.models.baseline_parts import dice_head
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "can",
    description="CAN: the candidate's embedding parameterises a micro-MLP applied to every behaviour "
    "(co-action units), beside DIN's target attention; Dice MLP head",
    paper="Bian et al., CAN: Feature Co-Action Network for Click-Through Rate Prediction, WSDM 2022",
)
@keras.saving.register_keras_serializable(package="zoo")
class CAN(ZooModel):
    """CAN (SUAN's first group, §4.1.2) on DIN: for each of the M candidates A,

        v_U(A) = TargetAttention(e_A, history)                   (DIN eq 3, over hist_visible)
        c_f(A) = CoActionUnit(P_induction(A_f), P_feed(history_f))   for every field f of both the
                 candidate and the behaviours (item_id x item_id, category x category; CAN eq 1-3)
        pctr = sigmoid(DiceMLP([v_U(A), e_A, c_f(A)..., user, ctx, num]))

    Output `pctr` [B, M].

    Co-action embeddings (CAN §3.4, multi-level independence): each shared field f has two tables of
    its own, apart from FeatureEmbedding's: an induction table of P = u_0 u_1 + u_1 u_2 + ... entries
    per id (the micro-MLP weights of a candidate id) and a feed table of u_0 = `feed_dim` per id (a
    behaviour's micro-MLP input). Sizes are the authors' public code: feed 16, micro-MLP (8, 4) with
    no biases (P = 160), orders C = 3 sharing the micro-MLP.

    Decisions where the paper is silent: the paper adds the co-action units to DIEN; this zoo has no
    DIEN, so they sit beside DIN's target attention (the zoo's `din`), whose interest vector and the
    candidate embedding join the co-action outputs in the head. A behaviour reaches a candidate's
    co-action sum only when it is visible to it (real and before its exposure time).

    Args:
        schema: the input contract; needs a field in both hist_ and cand_ (e.g. item_id).
        attention_units: hidden widths of DIN's activation unit.
        micro_mlp_units: (u_1, ..., u_K), the co-action micro-MLP's widths.
        feed_dim: u_0, the width of a behaviour's co-action (feed) embedding.
        orders: C, the powers of the feed embedding (multi-order enhancement).
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's target attention over the L behaviours."""
        return M * L

    def __init__(self, schema, attention_units=(80, 40), micro_mlp_units=(8, 4), feed_dim=16, orders=3,
                 mlp_units=(200, 80), dice_momentum=0.9, **kwargs):
        name = "can"
        if not micro_mlp_units:
            raise ZooError(f"{name}: micro_mlp_units is empty; the co-action micro-MLP needs at least one layer")
        schema.require(name, groups=("hist", "cand"))
        fields = [f for f in schema.field_names("cand") if f in schema.field_names("hist")]
        if not fields:
            raise ZooError(f"{name} needs a field in both hist_ and cand_ (e.g. item_id) for its co-action units")
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        candidates, visible = embedded["cand"], embedded["hist_visible"]
        interest = TargetAttention(attention_units, name="target_attention")(candidates, embedded["hist"], visible)
        parts = [interest, candidates]
        induction_size = CoActionUnit.induction_size(feed_dim, micro_mlp_units)
        for field in fields:
            vocabulary_size = schema.feature(f"cand_{field}").vocabulary_size
            induction = keras.layers.Embedding(vocabulary_size, induction_size, name=f"induction_{field}")(
                inputs[f"cand_{field}"]
            )
            feed = keras.layers.Embedding(vocabulary_size, feed_dim, name=f"feed_{field}")(inputs[f"hist_{field}"])
            parts.append(CoActionUnit(micro_mlp_units, orders, name=f"co_action_{field}")(induction, feed, visible))
        pctr = dice_head(parts, embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
