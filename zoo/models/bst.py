import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.causal_transformer_block import CausalTransformerBlock
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.time_gap_embedding import TimeGapEmbedding
from zoo.models.baseline_parts import dice_head
from zoo.models.sequence_parts import check_heads
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "bst",
    description="BST: Transformer over the behaviour sequence with the candidate appended, time-gap positions, "
    "LeakyReLU FFN, Dice MLP head",
    paper="Chen et al., Behavior Sequence Transformer for E-commerce Recommendation in Alibaba, DLP-KDD 2019",
)
@keras.saving.register_keras_serializable(package="zoo")
class BST(ZooModel):
    """BST, the Transformer baseline of SUAN's third group (§4.1.2). Output `pctr` [B, M].

    For each candidate m, the sequence [v_1, ..., v_L, v_t = m] of width w = D + d_p:

        E_i = [e_i ; p_i],   p_i = P[bucket(t(v_t) - t(v_i))]      (TimeGapEmbedding, pos(v_t) = 0)
        S = LN(E + Dropout(MH(E)))                                  (MH causal: see below)
        F = LN(S + Dropout(LeakyReLU(S W^(1) + b^(1)) W^(2) + b^(2)))
        then pctr_m = sigmoid(DiceMLP([F_t, mean of F_i over the visible v_i, e_m, user, ctx, num]))

    (CausalTransformerBlock, norm_position="post", norm="layer", ffn="leaky_relu".) Sizes from the
    paper: one block, 8 heads, dropout 0.2; FFN inner width 4w (the Transformer's, which BST takes).

    Decisions where the paper is silent or the zoo decides:
    - Positions depend on the candidate's time, so each candidate gets its own pass (B x M sequences
      of L + 1 tokens; M = 1 in ordinary training): the candidate's sequence holds the behaviours
      before its exposure time (hist_visible) and itself, never another candidate.
    - Attention is causal (the zoo's rule for self-attention over a history; BST's encoder is
      bidirectional): behaviour v_i reads the visible v_j with j <= i, the candidate, appended last,
      reads all of them and itself.
    - The time gap is bucketed by log2 of the seconds (1 s, 2-3 s, 4-7 s, ...; `time_buckets` K, the
      last bucket holds every gap of 2^(K-2) s or more) and embedded in d_p = `position_dim`
      dimensions, concatenated to the item token (BST concatenates, it does not add).
    - Tokens: a behaviour's (and the candidate's) fields' embeddings concatenated (FeatureEmbedding),
      the candidate's behaviour-only fields zero; no projection, so w = D + d_p must be divisible by
      num_heads.
    - Output: the candidate token's F_t and, standing for the paper's concatenation of every position's
      output (a length-dependent input), the mean of the visible behaviours' outputs (zero when none);
      DIN's Dice MLP with the candidate's embedding, the profile, context and numerics (SUAN §4.1.4
      gives every baseline the same head). LeakyReLU slope 0.2 (Keras' default; BST names none).

    Args:
        schema: the input contract (needs hist_ and cand_ features and time=True).
        num_heads: attention heads (w = D + position_dim divisible by them).
        num_layers: Transformer blocks.
        position_dim: d_p, the width of the time-gap embedding.
        time_buckets: K, the number of log2 time-gap buckets (2..32).
        ffn_dim: inner width of the FFN; None gives 4w.
        dropout: residual dropout while training.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's sequence: the L behaviours and the candidate, attending to each other."""
        return M * (L + 1) ** 2

    def __init__(self, schema, num_heads=8, num_layers=1, position_dim=8, time_buckets=32, ffn_dim=None,
                 dropout=0.2, mlp_units=(200, 80), dice_momentum=0.9, **kwargs):
        name = "bst"
        if not 2 <= time_buckets <= 32:
            raise ZooError(f"{name}: time_buckets is {time_buckets}; it must lie in 2..32")
        schema.require(name, time=True, groups=("hist", "cand"))
        dims = {f.name: f.embedding_dim for f in schema.group("hist") + schema.group("cand")}
        token_width = sum(dims[field] for field in schema.sequence_fields())  # D, FeatureEmbedding's token
        width = token_width + position_dim
        check_heads(name, width, num_heads,
                    width_name=f"the token width (sequence fields {token_width} + position_dim {position_dim})")
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        m, length = schema.num_candidates, schema.sequence_length
        history = ops.repeat(embedded["hist"][:, None], m, axis=1)  # [B, M, L, D]
        items = ops.concatenate([history, embedded["cand"][:, :, None]], axis=2)  # [v_1..v_L, v_t], [B, M, L+1, D]
        positions = TimeGapEmbedding(time_buckets, position_dim, name="time_gap_embedding")(
            inputs["hist_time"], inputs["cand_time"]
        )  # [B, M, L+1, d_p]
        visible = ops.concatenate([embedded["hist_visible"], ops.ones_like(embedded["hist_visible"][:, :, :1])], axis=2)
        x = ops.reshape(ops.concatenate([items, positions], axis=-1), (-1, length + 1, width))  # one pass per candidate
        valid = ops.reshape(visible, (-1, length + 1))
        for l in range(1, num_layers + 1):
            x = CausalTransformerBlock(
                num_heads, ffn_dim or 4 * width, norm="layer", norm_position="post", ffn="leaky_relu",
                dropout=dropout, name=f"block_{l}",
            )(x, valid)
        x = ops.reshape(x, (-1, m, length + 1, width))
        target = x[:, :, -1]  # F_t, [B, M, w]
        seen = ops.cast(embedded["hist_visible"], x.dtype)[..., None]  # [B, M, L, 1]
        pooled = ops.sum(x[:, :, :-1] * seen, axis=2) / ops.maximum(ops.sum(seen, axis=2), 1.0)  # [B, M, w]
        pctr = dice_head([target, pooled, embedded["cand"]], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
