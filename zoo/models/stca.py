import keras

from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.stacked_target_attention import StackedTargetAttention
from zoo.models.baseline_parts import dice_head
from zoo.models.sequence_parts import check_heads
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "stca",
    description="STCA: stacked target-to-history cross attention (the candidate the only query, no history "
    "self-attention), Dice MLP head",
    paper="Guan et al., Make It Long, Keep It Fast: End-to-End 10k-Sequence Modeling at Billion Scale on Douyin, "
    "arXiv:2511.06077, 2025; the STCA baseline of Chen et al., From Language to Behavior (ReST), 2026",
)
@keras.saving.register_keras_serializable(package="zoo")
class STCA(ZooModel):
    """STCA, ReST's target-aware cross-attention baseline (ReST §1, Tables 1 and 4). Output `pctr` [B, M].

        X = behaviour tokens W_e,   x_t = candidate token W_e          (Dense_d, shared)
        q^(1) = LN(SwiGLU(x_t)),   X~^(i) = LN_i(SwiGLU_i(X))
        z^(i) = MHA_i(q^(i), X~^(i), X~^(i)) over the behaviours visible to the candidate
        q^(i+1) = W_f^(i+1) [z^(1); ...; z^(i); x_t]
        pctr_m = sigmoid(DiceMLP([z^(N)_m, e_m, user, ctx, num]))

    (StackedTargetAttention; see it for the equations and its choices.) No self-attention over the
    history: the cost is linear in L per candidate, and ReST notes that scaling STCA makes the
    candidate side expensive (every layer is per candidate).

    Sizes: the zoo's ReST widths (d = 32, 2 heads, SwiGLU inner width 64, zoo/models/rest.py) and two
    layers (ReST's public configuration has two sequence layers); neither paper gives STCA's sizes.

    Decisions where the papers are silent or the zoo decides: no position or time feature (STCA's
    attention carries none; its production tokens fuse side information into the behaviour embedding,
    here the tokens are the schema's fields); each candidate reads only the behaviours before its
    exposure time (hist_visible), so candidates never see each other; the head is DIN's Dice MLP over
    z^(N), the raw candidate embedding, the profile, context and numerics (the zoo's head for every
    baseline).

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        width: d, the model width.
        num_heads: heads of each cross attention (d divisible by them).
        num_layers: N, stacked cross-attention layers.
        ffn_dim: inner width of the SwiGLU transforms.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's cross-attention over the L behaviours."""
        return M * L

    required = ("ffn_dim",)  # (its rule admits None, bst's default: these need a width)

    def __init__(self, schema, width=32, num_heads=2, num_layers=2, ffn_dim=64, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "stca"
        check_heads(name, width, num_heads)
        schema.require(name, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        projection = keras.layers.Dense(width, name="token_projection")
        interest = StackedTargetAttention(num_layers, num_heads, ffn_dim, name="stca")(
            projection(embedded["cand"]), projection(embedded["hist"]), embedded["hist_visible"]
        )  # z^(N), [B, M, d]
        pctr = dice_head([interest, embedded["cand"]], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
