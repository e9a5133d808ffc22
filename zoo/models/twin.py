import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.exact_search_unit import time_gap_bucket
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.twin_attention import TWINAttention
from zoo.models.baseline_parts import check_top_k, dice_head, time_gaps
from zoo.models.zoo_model import ZooModel
from zoo.registry import register

NUM_TIME_BUCKETS = 32  # log2 buckets of seconds (time_gap_bucket): the last holds gaps of 2^30 s and more


@register(
    "twin",
    description="TWIN: one target-attention relevance (inherent features + cross-feature bias) both picks "
    "the top-k behaviours and attends over them; Dice MLP head",
    paper="Chang et al., TWIN: TWo-stage Interest Network for Lifelong User Behavior Modeling in CTR "
    "Prediction at Kuaishou, KDD 2023",
)
@keras.saving.register_keras_serializable(package="zoo")
class TWIN(ZooModel):
    """TWIN (SUAN's second group, §4.1.2): a consistency-preserved GSU and the ESU share one relevance
    (TWINAttention):

        α_h(A, j) = (K_h W_h^h)_j · (e_A W_h^q) / sqrt(d_k) + (K_c W_h^c)_j
        S(A) = the k behaviours visible to A with the highest mean_h α_h(A, j)             (CP-GSU)
        TWIN(A) = concat_h Σ_{j ∈ S(A)} softmax_j(α_h(A, j)) (K_h W_h^v)_j  W^o              (ESU)
        pctr = sigmoid(DiceMLP([TWIN(A), e_A, user, ctx, num]))

    Output `pctr` [B, M].

    The feature split (TWIN §4.3), decided for the input contract:
    - inherent features K_h: a behaviour's fields that candidates also carry (item id, category): the
      item's own embeddings, identical for every user, which TWIN pre-computes and caches;
    - cross features K_c, one bias per head: the embedding (d_t) of the log2 bucket of the gap between
      the candidate's exposure and the behaviour, and the embeddings of the behaviour-only fields
      (the behaviour type: how this user acted on the item).
    The query e_A is the candidate's token (FeatureEmbedding). The GSU ranks by the heads' mean α (the
    paper does not say how its multi-head α ranks). Sizes: k = 100 and 4 heads (TWIN's online setting),
    d_k = 16 and d_t = 8 per head (not stated).

    Args:
        schema: the input contract; needs a field in both hist_ and cand_ (e.g. item_id) and time=True.
        k: behaviours the CP-GSU keeps per candidate (1 <= k <= L).
        num_heads: H.
        head_dim: d_k.
        time_embedding_dim: d_t, the width of the time-gap cross feature.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's relevance over the L behaviours."""
        return M * L

    def __init__(self, schema, k=100, num_heads=4, head_dim=16, time_embedding_dim=8, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "twin"
        schema.require(name, time=True, groups=("hist", "cand"))
        item_fields = [f for f in schema.field_names("hist") if f in schema.field_names("cand")]
        if not item_fields:
            raise ZooError(
                f"{name} needs a field in both hist_ and cand_ (e.g. item_id) for the behaviours' inherent features"
            )
        check_top_k(name, k, schema)
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        inherent = ops.concatenate([embedded[f"hist_{f}"] for f in item_fields], axis=-1)  # K_h, [B, L, D_i]
        gap = keras.layers.Embedding(NUM_TIME_BUCKETS, time_embedding_dim, name="time_gap_embedding")(
            time_gap_bucket(time_gaps(inputs), NUM_TIME_BUCKETS)
        )  # [B, M, L, d_t]
        m = schema.num_candidates
        behaviour_only = [
            ops.repeat(embedded[f"hist_{f}"][:, None], m, axis=1)
            for f in schema.field_names("hist") if f not in item_fields
        ]
        cross = ops.concatenate([gap] + behaviour_only, axis=-1) if behaviour_only else gap  # K_c
        candidates = embedded["cand"]
        interest = TWINAttention(k, num_heads, head_dim, name="twin_attention")(
            candidates, inherent, cross, embedded["hist_visible"]
        )
        pctr = dice_head([interest, candidates], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
