import keras

from zoo.layers.causal_transformer_block import CausalTransformerBlock
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_cross_attention import TargetCrossAttention
from zoo.models.baseline_parts import dice_head
from zoo.models.sequence_parts import check_heads
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "transformer",
    description="Trans.: causal Pre-LN Transformer (LayerNorm, GELU FFN, RoPE) over the history, multi-head "
    "target attention from each candidate, Dice MLP head",
    paper="Vaswani et al., Attention Is All You Need, NeurIPS 2017; the 'Trans.' baseline of Chen et al., "
    "From Language to Behavior (ReST), arXiv:2609.01240, 2026",
)
@keras.saving.register_keras_serializable(package="zoo")
class Transformer(ZooModel):
    """The standard Transformer baseline of ReST's Tables 1-2 ("Trans."). Output `pctr` [B, M].

        X^0 = behaviour tokens W_e                                   (Dense_d, shared with the candidates)
        X^l = X^{l-1} + Dropout(MH(LN(X^{l-1}))),  then  + Dropout(FFN(LN(.)))     l = 1..num_layers
        H = LN(X^N)
        c_m = MHA(q = e_m W_e, K = V = H, over the behaviours visible to candidate m)
        pctr_m = sigmoid(DiceMLP([c_m, e_m, user, ctx, num]))

    MH is causal multi-head self-attention with RoPE on queries and keys, FFN(x) = GELU(x W_1 + b_1) W_2 + b_2
    (CausalTransformerBlock, norm_position="pre", norm="layer", ffn="gelu", rope=True); the readout is
    TargetCrossAttention with the candidate as the query.

    Sizes: ReST's public configuration (two sequence layers) at the zoo's ReST widths: d = 32, 2 heads,
    FFN 64 (zoo/models/rest.py); no dropout (ModernBERT, which ReST's Trans. follows, trains without).

    Decisions where the papers are silent or the zoo decides:
    - ReST's Trans. is a ModernBERT-style *bidirectional* encoder with GeGLU and token-specific
      parameters; here the history is encoded causally (the zoo's rule: one encoding serves all M
      candidates, each reading only the behaviours before its exposure time), the FFN is the standard
      GELU one, and there are no token-specific parameters: this is the standard Pre-LN Transformer.
      RoPE (as in ModernBERT) gives the positions: the sequence index over the left-padded history.
    - The readout: ReST gives every sequence model the same query tokens; here the candidate token
      (projected by the behaviours' W_e) is the one query, and the MLP also reads the raw candidate
      embedding, the profile, context and numerics (DIN's head, the zoo's head for every baseline).
    - A final LayerNorm on the history states (the Pre-LN convention).

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        width: d, the model width.
        num_heads: attention heads of the encoder and the readout (d divisible by them, d / H even).
        num_layers: encoder layers.
        ffn_dim: inner width of the FFN.
        dropout: residual dropout while training.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): self-attention over the L behaviours, then each candidate's readout."""
        return L ** 2 + M * L

    required = ("ffn_dim",)  # (its rule admits None, bst's default: these need a width)

    def __init__(self, schema, width=32, num_heads=2, num_layers=2, ffn_dim=64, dropout=0.0, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "transformer"
        check_heads(name, width, num_heads, rope=True)
        schema.require(name, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        projection = keras.layers.Dense(width, name="token_projection")
        states = projection(embedded["hist"])  # [B, L, d]
        for l in range(1, num_layers + 1):
            states = CausalTransformerBlock(
                num_heads, ffn_dim, norm="layer", norm_position="pre", ffn="gelu", rope=True, dropout=dropout,
                name=f"block_{l}",
            )(states, embedded["hist_valid"])
        states = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(states)
        interest = TargetCrossAttention(num_heads, name="target_attention")(
            projection(embedded["cand"]), states, embedded["hist_visible"]
        )  # [B, M, d]
        pctr = dice_head([interest, embedded["cand"]], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
