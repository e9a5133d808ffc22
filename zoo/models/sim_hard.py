import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.models.baseline_parts import check_top_k, dice_head, search_then_attend
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "sim_hard",
    description="SIM (hard search): the candidate's category's most recent k behaviours, then multi-head "
    "target attention with time-gap embeddings; Dice MLP head",
    paper="Pi et al., Search-based User Interest Modeling with Lifelong Sequential Behavior Data for "
    "Click-Through Rate Prediction, CIKM 2020",
)
@keras.saving.register_keras_serializable(package="zoo")
class SIMHard(ZooModel):
    """SIM with hard search (SUAN's HardSIM, second group §4.1.2): two stages per candidate A.

        GSU:  r_j = Sign(C_j = C_A) over the behaviours visible to A: the behaviours of A's category;
              keep the k most recent of them                                                     (SIM §4.1)
        ESU:  U(A) = concat_i Σ_j softmax_j((W_bi z_j)·(W_ai e_A)/sqrt(d_att)) z_j,
              z_j = [e_j, e_t(Δ_j)] over the kept                                                (SIM §4.2)
        pctr = sigmoid(DiceMLP([U(A), e_A, user, ctx, num]))

    Output `pctr` [B, M]. The category is the `category` field (hist_category, cand_category);
    e_A, e_j are FeatureEmbedding's candidate and behaviour tokens.

    Decisions where the paper is silent: when A's category holds more than k visible behaviours the
    k most recent are kept (SIM's index is keyed by user and category and holds them in time order);
    with fewer, the ESU attends over those only (no behaviour of another category is added), and a
    candidate with none gets U = 0. Sizes: k = 50, 2 heads of d_att = 32, time-gap embedding 8, as
    `sim_soft`.

    Args:
        schema: the input contract; needs hist_category, cand_category and time=True.
        k: behaviours the GSU keeps per candidate (1 <= k <= L).
        num_heads: H, the ESU's heads.
        attention_dim: d_att per head.
        time_embedding_dim: d_t, the width of the time-gap embedding.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's search and attention over the L behaviours."""
        return M * L

    def __init__(self, schema, k=50, num_heads=2, attention_dim=32, time_embedding_dim=8, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "sim_hard"
        schema.require(name, time=True, groups=("hist", "cand"))
        missing = [key for key in ("hist_category", "cand_category") if key not in schema.keys()]
        if missing:
            raise ZooError(f"{name} searches the candidate's category but the schema has no {' or '.join(missing)}")
        check_top_k(name, k, schema)
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        same_category = ops.equal(inputs["hist_category"][:, None, :], inputs["cand_category"][:, :, None])
        allowed = ops.logical_and(embedded["hist_visible"], same_category)  # [B, M, L]
        recency = ops.zeros_like(allowed, dtype="float32") + ops.arange(schema.sequence_length, dtype="float32")
        interest = search_then_attend(
            inputs, embedded, recency, allowed, k, num_heads, attention_dim, time_embedding_dim
        )
        pctr = dice_head([interest, embedded["cand"]], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
