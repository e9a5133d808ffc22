import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_attention import TargetAttention
from zoo.layers.tokenmixer_large_block import TokenMixerLargeBlock
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


def candidate_groups(schema, embedded, attention_units):
    """The semantic feature groups of every candidate, each [B, M, D_g], in a fixed order:
    the candidate's fields, its view of the history, then the user, context and numeric groups.

    The history group is DIN's target attention of the candidate over the behaviours before its
    exposure time (FeatureEmbedding's hist_visible), the sequence module that feeds RankMixer-family
    models a candidate-aware summary. Groups the schema lacks are left out.
    """
    m = schema.num_candidates
    groups = [embedded["cand"]]
    if "hist" in embedded:
        groups.append(
            TargetAttention(attention_units, name="target_attention")(
                embedded["cand"], embedded["hist"], embedded["hist_visible"]
            )
        )
    for group in ("user", "ctx", "num"):
        if group in embedded:
            groups.append(ops.repeat(embedded[group][:, None, :], m, axis=1))
    return groups


@register(
    "tokenmixer_large",
    description="TokenMixer-Large: semantic-group tokens + a global token, mixing-and-reverting blocks with "
    "per-token SwiGLU, inter-layer residuals",
    paper="Jiang et al., TokenMixer-Large: Scaling Up Large Ranking Models in Industrial Recommenders (ByteDance, "
    "2026); RankMixer (Zhu et al., CIKM 2025)",
)
@keras.saving.register_keras_serializable(package="zoo")
class TokenMixerLarge(ZooModel):
    """TokenMixer-Large (Jiang et al., 2026), the scaled-up RankMixer: token mixing by reshape instead
    of attention, per-token feed-forward networks.

    Tokenization (§3.2): every candidate's features form semantic groups g_i (its fields, its
    target-attention view of the history, user, context, numerics; `candidate_groups`); each group
    becomes one token by its own MLP_i, and a global token ([CLS]-like) is MLP_0 of all the groups'
    raw concatenation:
        X^(0) = [MLP_0(concat_i g_i), MLP_1(g_1), ..., MLP_n(g_n)]      [B*M, T, D], T = 1 + n
    Then num_layers blocks (layers/tokenmixer_large_block.py, eq 12, 16):
        H = Mix(X), H' = pSwiGLU(Norm(H)) + H, X' = pSwiGLU(Norm(Revert(H'))) + X
    with inter-layer residuals (§3.3.4): every k-th layer's output also adds the output of the layer
    k before it, X_l <- X_l + X_{l-k} for l = k, 2k, ... < L (X_0 the tokens; the last layer never
    takes one). The final tokens are RMS-normalised, mean-pooled and scored:
        pctr = sigmoid(DiceMLP(mean_t X_L)) [B, M].

    Each candidate is scored by its own pass (rows b * M + m); candidates never see each other and a
    candidate reads the history only through its own hist_visible mask.

    Sizes: L = 6, D = 128, H = 8, k = 2, pSwiGLU hidden 4x (the settings of a public re-implementation;
    the paper's production models are 7-15B parameters). Decisions where the paper is silent or that
    the zoo changes:
    - Dense per-token SwiGLUs, not the Sparse-Pertoken MoE (§3.4), which exists to reach billions
      of parameters at a fixed cost; and no auxiliary losses from the inter-residual layers
      (§3.3.4): the zoo's models have one output, pctr, and a training-only loss belongs to a
      recipe.
    - MLP_0..MLP_n are Dense(D, relu) -> Dense(D) without biases (the paper drops biases, §A.4).
    - The history group is DIN's target attention (attention_units) over the visible behaviours;
      the paper's sequence modules are outside its scope.
    - Head: final RMSNorm, mean over the T tokens, the zoo's DiceMLP (mlp_units, dice_momentum).

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: D, the token width.  num_heads: H, the mixing heads (must divide D).
        expansion: the pSwiGLU hidden width as a multiple of its token width.
        inter_residual_interval: k, the distance of the inter-layer residuals.
        attention_units: hidden widths of the history's target-attention unit.
        mlp_units: hidden widths of the prediction MLP.  dice_momentum: its BatchNorm/Dice decay.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's target-attention view of the L behaviours."""
        return M * L

    def __init__(
        self,
        schema,
        num_layers=6,
        width=128,
        num_heads=8,
        expansion=4,
        inter_residual_interval=2,
        attention_units=(80, 40),
        mlp_units=(200, 80),
        dice_momentum=0.9,
        **kwargs,
    ):
        if width % num_heads:
            raise ZooError(f"tokenmixer_large width {width} is not divisible by num_heads {num_heads}")
        schema.require("tokenmixer_large", groups=("cand",))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        groups = candidate_groups(schema, embedded, attention_units)
        m, t = schema.num_candidates, 1 + len(groups)

        def mlp(x, name):
            x = keras.layers.Dense(width, activation="relu", use_bias=False, name=f"{name}_hidden")(x)
            return keras.layers.Dense(width, use_bias=False, name=f"{name}_output")(x)

        tokens = [mlp(ops.concatenate(groups, axis=-1), "global_mlp")]
        tokens += [mlp(group, f"group_mlp_{i}") for i, group in enumerate(groups)]
        x = ops.reshape(ops.stack(tokens, axis=2), (-1, t, width))  # [B*M, T, D], row b * M + m
        outputs = [x]  # X_0, X_1, ...
        for l in range(1, num_layers + 1):
            x = TokenMixerLargeBlock(num_heads, expansion, name=f"block_{l}")(x)
            if l % inter_residual_interval == 0 and l < num_layers:
                x = x + outputs[l - inter_residual_interval]
            outputs.append(x)
        pooled = ops.mean(keras.layers.RMSNormalization(epsilon=1e-6, name="final_norm")(x), axis=1)
        logit = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(ops.reshape(pooled, (-1, m, width)))
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
