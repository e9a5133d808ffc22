import keras

from zoo.layers.causal_transformer_block import CausalTransformerBlock
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_cross_attention import TargetCrossAttention
from zoo.models.baseline_parts import dice_head
from zoo.models.sequence_parts import check_heads
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "llama",
    description="LLaMA-style causal backbone over the history (RMSNorm pre-norm, SwiGLU FFN, RoPE, no biases), "
    "multi-head target attention from each candidate, Dice MLP head",
    paper="Touvron et al., LLaMA: Open and Efficient Foundation Language Models, arXiv:2302.13971, 2023; the "
    "LLaMA baseline of Chen et al., From Language to Behavior (ReST), arXiv:2609.01240, 2026",
)
@keras.saving.register_keras_serializable(package="zoo")
class LLaMA(ZooModel):
    """The LLaMA-style causal Transformer that ReST compares with (§1, Tables 1-4). Output `pctr` [B, M].

        X^0 = behaviour tokens W_e                                   (Dense_d, no bias, shared with the candidates)
        X^l = X^{l-1} + MH(RMSNorm(X^{l-1})),  then  + SwiGLU(RMSNorm(.))          l = 1..num_layers
        H = RMSNorm(X^N)
        c_m = MHA(q = e_m W_e, K = V = H, over the behaviours visible to candidate m)   (no biases)
        pctr_m = sigmoid(DiceMLP([c_m, e_m, user, ctx, num]))

    MH is causal multi-head self-attention with RoPE on queries and keys and no biases, SwiGLU(x) =
    (SiLU(x W_1) ⊙ x W_3) W_2 (CausalTransformerBlock, norm="rms", ffn="swiglu", rope=True,
    use_bias=False); the readout is TargetCrossAttention without biases.

    Sizes: as `transformer` (ReST's two sequence layers at the zoo's ReST widths: d = 32, 2 heads,
    SwiGLU inner width 64, zoo/models/rest.py), no dropout (LLaMA trains without).

    Decisions where the papers are silent or the zoo decides: ReST calls this baseline "LLaMA-style
    causal Transformer" and T's starting point (causal self-attention + SwiGLU FFN); RMSNorm epsilon
    1e-6 and a final RMSNorm on the states (LLaMA's); RoPE over the sequence index of the left-padded
    history (half-split layout, base 10000); the readout and head as in `transformer` (the candidate
    token as the one query over the states visible to it; DIN's Dice MLP).

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        width: d, the model width.
        num_heads: attention heads of the backbone and the readout (d divisible by them, d / H even).
        num_layers: backbone layers.
        ffn_dim: inner width of the SwiGLU FFN.
        dropout: residual dropout while training.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): causal self-attention over the L behaviours, then each candidate's readout."""
        return L ** 2 + M * L

    required = ("ffn_dim",)  # (its rule admits None, bst's default: these need a width)

    def __init__(self, schema, width=32, num_heads=2, num_layers=2, ffn_dim=64, dropout=0.0, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "llama"
        check_heads(name, width, num_heads, rope=True)
        schema.require(name, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        projection = keras.layers.Dense(width, use_bias=False, name="token_projection")
        states = projection(embedded["hist"])  # [B, L, d]
        for l in range(1, num_layers + 1):
            states = CausalTransformerBlock(
                num_heads, ffn_dim, norm="rms", norm_position="pre", ffn="swiglu", rope=True, use_bias=False,
                dropout=dropout, name=f"block_{l}",
            )(states, embedded["hist_valid"])
        states = keras.layers.RMSNormalization(epsilon=1e-6, name="final_norm")(states)
        interest = TargetCrossAttention(num_heads, use_bias=False, name="target_attention")(
            projection(embedded["cand"]), states, embedded["hist_visible"]
        )  # [B, M, d]
        pctr = dice_head([interest, embedded["cand"]], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
