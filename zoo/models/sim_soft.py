import keras
from keras import ops

from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.models.baseline_parts import check_top_k, dice_head, search_then_attend
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "sim_soft",
    description="SIM (soft search): top-k behaviours by embedding inner product with the candidate, then "
    "multi-head target attention with time-gap embeddings; Dice MLP head",
    paper="Pi et al., Search-based User Interest Modeling with Lifelong Sequential Behavior Data for "
    "Click-Through Rate Prediction, CIKM 2020",
)
@keras.saving.register_keras_serializable(package="zoo")
class SIMSoft(ZooModel):
    """SIM with soft search (SUAN's SoftSIM, second group §4.1.2): two stages per candidate A.

        GSU:  r_j = e_A · e_j  over the behaviours visible to A; keep the top k                (SIM §4.1)
        ESU:  U(A) = concat_i Σ_j softmax_j((W_bi z_j)·(W_ai e_A)/sqrt(d_att)) z_j,
              z_j = [e_j, e_t(Δ_j)] over the k kept                                              (SIM §4.2)
        pctr = sigmoid(DiceMLP([U(A), e_A, user, ctx, num]))

    Output `pctr` [B, M]. e_A, e_j are the candidate and behaviour tokens of FeatureEmbedding (one
    table per field, shared by candidates and behaviours; fields a side lacks are zero).

    Decisions where the paper is silent or that this zoo changes:
    - The search space: SIM's soft search projects both sides (W_a e_A, W_b e_j) and trains those
      projections with an auxiliary CTR loss on the GSU; SUAN compares a SoftSIM that "retrieves by
      embedding similarity", done here with the shared embeddings themselves, which the ESU's loss
      trains (top-k passes no gradient to the scores), so one loss trains the model.
    - Ties in r_j (identical behaviours) go to the backend's top_k.
    - Sizes: k = 50 kept behaviours, 2 heads of d_att = 32, time-gap embedding 8 (log2 buckets of
      seconds): SIM states none of them for its public data; SUAN gives its long-sequence baselines
      L = 1000 (Taobao) and embedding 8 per field.

    Args:
        schema: the input contract; needs hist_ and cand_ features and time=True.
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
        name = "sim_soft"
        schema.require(name, time=True, groups=("hist", "cand"))
        check_top_k(name, k, schema)
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        candidates = embedded["cand"]
        relevance = ops.einsum("bmd,bld->bml", candidates, embedded["hist"])  # r_j, [B, M, L]
        interest = search_then_attend(
            inputs, embedded, relevance, embedded["hist_visible"], k, num_heads, attention_dim, time_embedding_dim
        )
        pctr = dice_head([interest, candidates], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
