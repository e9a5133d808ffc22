import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.unimixer_block import UniMixerBlock
from zoo.models.tokenmixer_large import candidate_groups
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "unimixer",
    description="UniMixer: learned doubly-stochastic block mixing (TokenMixer's permutation relaxed), per-token "
    "SwiGLU, SiameseNorm streams",
    paper="Ha et al., UniMixer: A Unified Architecture for Scaling Laws in Recommendation Systems (Kuaishou, 2026)",
)
@keras.saving.register_keras_serializable(package="zoo")
class UniMixer(ZooModel):
    """UniMixer (Ha et al., 2026): RankMixer's rule-based token mixing made a learned, constrained
    matrix, inside two residual streams.

    Tokens: every candidate's semantic feature groups (its fields, its target-attention view of the
    history, user, context, numerics; zoo/models/tokenmixer_large.py's `candidate_groups`), each
    projected to one D-wide token by its own linear map (UniMixer's token-specific linear layer):
        X^(0) = [g_1 W_1, ..., g_T W_T]       [B*M, T, D], one pass per candidate (rows b * M + m)
    Blocks (layers/unimixer_block.py), with X = Y = X^(0) at the start:
        U = X + Norm(Y),   M = UniMixing(U),   O = pSwiGLU(M) + M,   X <- Norm(X + O),   Y <- Y + O
    UniMixing (layers/unimixing.py): the flattened tokens are cut into B-wide blocks; each block is
    mixed by its own W_B^i, the blocks by W_G, both symmetric doubly-stochastic (Sinkhorn at
    temperature tau); RankMixer's mixing is the corner W_B = I, W_G = its block permutation.
    Read-out: X_L + Norm(Y_L), mean over the T tokens, pctr = sigmoid(DiceMLP(.)) [B, M].

    Sources: the paper's text was not available here. The block follows the paper's abstract and
    architecture figure (UniMixing / UniMixing-Lite, per-token SwiGLU, SiameseNorm) and its public
    re-implementations, which agree on the mixing equation and the two streams. Decisions where they
    differ or are silent:
    - Standard UniMixing only (no UniMixing-Lite); fixed temperature tau (the re-implementations
      anneal it during training, a schedule outside the model); 5 Sinkhorn iterations; logits start
      N(0, 1); the symmetric constraint is applied to the logits before Sinkhorn.
    - One SiameseNorm update per block around UniMixing + pSwiGLU; RMSNorm (learned scale).
    - Token-specific linear maps without bias; the history group is DIN's target attention over the
      behaviours before each candidate's time (hist_visible), as in tokenmixer_large.
    - Sizes (the paper's are not available): L = 4 blocks, D = 128, B = 32, pSwiGLU 4x; head: the
      zoo's DiceMLP (mlp_units, dice_momentum) on the mean token.

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: D.  block_size: B (must divide T x D, T the number of groups).
        expansion: the pSwiGLU hidden width as a multiple of D.
        sinkhorn_iterations: Sinkhorn-Knopp iterations.  temperature: tau (> 0).
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
        num_layers=4,
        width=128,
        block_size=32,
        expansion=4,
        sinkhorn_iterations=5,
        temperature=1.0,
        attention_units=(80, 40),
        mlp_units=(200, 80),
        dice_momentum=0.9,
        **kwargs,
    ):
        schema.require("unimixer", groups=("cand",))
        tokens_count = sum(1 for group in ("cand", "hist", "user", "ctx", "num") if schema.group(group))
        if (tokens_count * width) % block_size:
            raise ZooError(
                f"unimixer block_size {block_size} does not divide T x width = {tokens_count} x {width} "
                f"(T = {tokens_count} feature groups in this schema)"
            )
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        groups = candidate_groups(schema, embedded, attention_units)
        m = schema.num_candidates
        tokens = [keras.layers.Dense(width, use_bias=False, name=f"token_{i}")(g) for i, g in enumerate(groups)]
        x = y = ops.reshape(ops.stack(tokens, axis=2), (-1, len(groups), width))  # [B*M, T, D]
        for l in range(1, num_layers + 1):
            block = UniMixerBlock(
                block_size, expansion, sinkhorn_iterations, float(temperature), name=f"block_{l}"
            )
            x, y = block(x, y)
        out = x + keras.layers.RMSNormalization(epsilon=1e-6, name="final_norm")(y)
        head = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")
        logit = head(ops.reshape(ops.mean(out, axis=1), (-1, m, width)))
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
