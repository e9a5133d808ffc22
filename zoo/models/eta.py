import keras
import numpy as np
from keras import ops

from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.sim_hash import SimHash
from zoo.models.baseline_parts import check_top_k, dice_head, search_then_attend
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


def candidate_field_mask(schema):
    """[D] 0/1: the token dimensions of the fields candidates carry (a behaviour-only field is 0)."""
    cand = set(schema.field_names("cand"))
    parts = []
    for name in schema.sequence_fields():
        key = f"hist_{name}" if name in schema.field_names("hist") else f"cand_{name}"
        parts.append(np.full(schema.feature(key).embedding_dim, float(name in cand), "float32"))
    return np.concatenate(parts)


@register(
    "eta",
    description="ETA: top-k behaviours by the Hamming distance of SimHash signatures of the embeddings, "
    "then multi-head target attention with time-gap embeddings; Dice MLP head",
    paper="Chen et al., End-to-End User Behavior Retrieval in Click-Through Rate Prediction Model, 2021",
)
@keras.saving.register_keras_serializable(package="zoo")
class ETA(ZooModel):
    """ETA (SUAN's second group, §4.1.2): SIM's two stages with a retrieval that uses the model's own
    embeddings, hashed, so it trains end to end with the attention.

        GSU:  d_H(A, j) = Hamming(SimHash(e_A), SimHash(e_j)), m-bit signatures from fixed random
              hyperplanes, over the behaviours visible to A; keep the k nearest                 (ETA §3.2)
        ESU:  U(A) = concat_i Σ_j softmax_j((W_bi z_j)·(W_ai e_A)/sqrt(d_att)) z_j,
              z_j = [e_j, e_t(Δ_j)] over the kept                           (multi-head target attention)
        pctr = sigmoid(DiceMLP([U(A), e_A, user, ctx, num]))

    Output `pctr` [B, M].

    Decisions where the paper is silent or that this zoo changes:
    - What is hashed: the candidate and behaviour tokens on the fields candidates carry (item id,
      category; a behaviour-only field such as the behaviour type is zeroed before hashing, as ETA
      hashes item embeddings).
    - Ties in d_H are broken towards the most recent behaviour (ranking by (m - d_H) L + position,
      exact in float32).
    - The hyperplanes are SimHash's non-trainable weight drawn by NumPy from seed 0: reproducible
      under every backend and saved with the model. Signatures pass no gradient; the ESU's loss
      trains the embeddings the GSU hashes.
    - The ESU is the zoo's ExactSearchUnit (SIM §4.2 with time-gap embeddings), shared with SIM.
    - Sizes: m = 64 bits, k = 50, 2 heads of d_att = 32, time-gap embedding 8.

    Args:
        schema: the input contract; needs hist_ and cand_ features and time=True.
        k: behaviours the GSU keeps per candidate (1 <= k <= L).
        num_bits: m, the SimHash signature length.
        num_heads: H, the ESU's heads.
        attention_dim: d_att per head.
        time_embedding_dim: d_t, the width of the time-gap embedding.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's retrieval and attention over the L behaviours."""
        return M * L

    def __init__(self, schema, k=50, num_bits=64, num_heads=2, attention_dim=32, time_embedding_dim=8,
                 mlp_units=(200, 80), dice_momentum=0.9, **kwargs):
        name = "eta"
        schema.require(name, time=True, groups=("hist", "cand"))
        check_top_k(name, k, schema)
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        candidates = embedded["cand"]
        item_fields = ops.convert_to_tensor(candidate_field_mask(schema))
        distance = SimHash(num_bits, seed=0, name="sim_hash")(candidates, embedded["hist"] * item_fields)  # [B, M, L]
        nearness = ops.cast(num_bits - distance, "float32") * schema.sequence_length
        ranking = nearness + ops.arange(schema.sequence_length, dtype="float32")  # ties: the most recent
        interest = search_then_attend(
            inputs, embedded, ranking, embedded["hist_visible"], k, num_heads, attention_dim, time_embedding_dim
        )
        pctr = dice_head([interest, candidates], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
