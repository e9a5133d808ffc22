import keras
from keras import ops

from zoo.layers.causal_transformer_block import CausalTransformerBlock
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.models.baseline_parts import dice_head
from zoo.models.sequence_parts import check_heads
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


def last_visible(states, visible):
    """F_m: the state of the newest behaviour visible to candidate m, zero when none is. [B, L, d], [B, M, L]
    -> [B, M, d]."""
    length = states.shape[1]
    newest = ops.argmax(ops.where(visible, ops.arange(length, dtype="int32"), -1), axis=-1)  # [B, M]
    any_visible = ops.cast(ops.any(visible, axis=-1), states.dtype)[..., None]
    pick = ops.one_hot(newest, length, dtype=states.dtype) * any_visible  # [B, M, L]
    return ops.einsum("bml,bld->bmd", pick, states)


@register(
    "sasrec",
    description="SASRec: causal self-attention blocks with learned positions over the history; the newest "
    "visible behaviour's state matched against each candidate (dot product) into a Dice MLP",
    paper="Kang and McAuley, Self-Attentive Sequential Recommendation, ICDM 2018",
)
@keras.saving.register_keras_serializable(package="zoo")
class SASRec(ZooModel):
    """SASRec as a ranking baseline (DeRes Table 2). Output `pctr` [B, M].

        Ê = [e_1 M + P_1; ...; e_L M + P_L]          (§3.1: item embedding M, learned positions P)
        S^b = SA(F^{b-1}), F^b = FFN(S^b), each as g(x) = x + Dropout(g(LN(x))), b = 1..num_layers  (§3.2-3.3)
        F = LN(F^B)
        F_m = the row of F at the newest behaviour visible to candidate m (0 when none is)
        r_m = F_m · (e_m M)                           (§3.4, shared item embedding: item m's relevance)
        pctr_m = sigmoid(DiceMLP([F_m, e_m M, r_m, user, ctx, num]))

    SA is causal single- or multi-head self-attention, FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2 with
    W_1, W_2: d x d (CausalTransformerBlock, norm_position="pre", norm="layer", ffn="relu",
    ffn_dim = d). Sizes from the paper: d = 50, 2 blocks, one head, dropout 0.2 (its ML-1M setting).

    Decisions where the paper is silent or the zoo decides:
    - Tokens: a behaviour's fields' embeddings concatenated (FeatureEmbedding) times M, a bias-free
      Dense_d shared with the candidates, so M plays SASRec's shared item embedding in the input (§3.1)
      and in the prediction (§3.4).
    - Positions: P over the slots of the left-padded history (the newest behaviour always at L - 1),
      as SASRec's own code indexes them; no sqrt(d) scaling of the embeddings (the code's, not the
      paper's); padding is never attended to, so it is not zeroed after each block.
    - The prefix: the paper predicts item t+1 from F_t, the state after behaviour t; here each
      candidate reads F at its newest behaviour strictly before its exposure time (hist_visible), so
      candidates see neither each other nor their own future.
    - CTR head: r_m is the paper's score; as a CTR baseline it is one input of DIN's Dice MLP, with
      F_m, the candidate's own embedding, the profile, context and numerics (the zoo's head for every
      baseline), instead of the paper's sampled binary cross-entropy over r alone.
    - Dropout: on Ê and on each residual branch (the paper's "dropout on the embedding and the
      outputs of each sub-layer"); none on the attention probabilities.

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        width: d, the model width.
        num_heads: attention heads (d divisible by them; SASRec uses one).
        num_layers: self-attention blocks.
        dropout: dropout rate while training.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): self-attention over the L behaviours, then each candidate's read of them."""
        return L ** 2 + M * L

    def __init__(self, schema, width=50, num_heads=1, num_layers=2, dropout=0.2, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "sasrec"
        check_heads(name, width, num_heads)
        schema.require(name, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        item_embedding = keras.layers.Dense(width, use_bias=False, name="item_embedding")  # M
        length = schema.sequence_length
        slots = ops.zeros_like(inputs[schema.group("hist")[0].key], dtype="int32") + ops.arange(length, dtype="int32")
        positions = keras.layers.Embedding(length, width, name="position_embedding")(slots)  # P, [B, L, d]
        states = keras.layers.Dropout(dropout, name="embedding_dropout")(item_embedding(embedded["hist"]) + positions)
        for b in range(1, num_layers + 1):
            states = CausalTransformerBlock(
                num_heads, width, norm="layer", norm_position="pre", ffn="relu", dropout=dropout, name=f"block_{b}"
            )(states, embedded["hist_valid"])
        states = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(states)
        prefix = last_visible(states, embedded["hist_visible"])  # F_m, [B, M, d]
        candidates = item_embedding(embedded["cand"])  # e_m M, [B, M, d]
        relevance = ops.sum(prefix * candidates, axis=-1, keepdims=True)  # r_m, [B, M, 1]
        pctr = dice_head([prefix, candidates, relevance], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
