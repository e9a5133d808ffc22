import keras

from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.hstu_layer import HSTULayer
from zoo.models.baseline_parts import dice_head
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "hstu",
    description="HSTU: pointwise SiLU attention with relative position/time bias over the history, "
    "candidates appended; Dice MLP head",
    paper="Zhai et al., Actions Speak Louder than Words: Trillion-Parameter Sequential Transducers for "
    "Generative Recommendations, ICML 2024",
)
@keras.saving.register_keras_serializable(package="zoo")
class HSTU(ZooModel):
    """HSTU as a ranking baseline (SUAN's third group, §4.1.2): the behaviour tokens with the M
    candidates appended go through `num_layers` HSTU layers (HSTULayer, eq 1-3):

        U, V, Q, K = Split(SiLU(f1(LayerNorm(X))))
        A V = SiLU(Q K^T + rab^{p,t}) V / n                 (pointwise, no softmax; n = L + 1)
        Y = f2(LayerNorm(A V) ⊙ U) + X

    then pctr = sigmoid(DiceMLP([y_A, user, ctx, num])) for each candidate A, y_A its last-layer token.
    Output `pctr` [B, M].

    Sizes: 2 layers, 2 heads, d_qk = d_v = 25 per head (the public ML-1M config of
    meta-recsys/generative-recommenders; SUAN §4.1.4 also runs its sequence baselines with 2 layers and
    2 heads). The residual stream is the token width d (the concatenated field embeddings, as HSTU's
    stream is the item embedding width).

    Decisions where the paper is silent:
    - Tokens: one per behaviour (its fields' embeddings concatenated, FeatureEmbedding), not HSTU's
      interleaved item/action tokens: the behaviour type is a field of the token. No absolute position
      embedding (the relative bias carries positions and time gaps).
    - Candidates: appended after the history at one shared position L (the public code's targets);
      each sees the behaviours before its exposure time (FeatureEmbedding's hist_visible) and itself,
      never another candidate. The history is encoded causally, so one encoding serves all M.
    - Head: SUAN §4.1.4 gives every baseline the same Dice MLP, so the candidate's last token feeds
      DiceMLP with the profile, context and numerics, not HSTU's dot product with an item embedding.
    - No dropout (the public code drops 0.2 after U ⊙ Norm(AV) when training on ML-1M).

    Args:
        schema: the input contract; needs hist_ and cand_ features and time=True.
        num_layers: stacked HSTU layers.
        num_heads: H.
        attention_dim: d_qk per head.
        linear_dim: d_v per head.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the head's BatchNorm/Dice statistics.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): the L behaviours with the M candidates appended."""
        return (L + M) ** 2

    def __init__(self, schema, num_layers=2, num_heads=2, attention_dim=25, linear_dim=25, mlp_units=(200, 80),
                 dice_momentum=0.9, **kwargs):
        name = "hstu"
        schema.require(name, time=True, groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        history, candidates = embedded["hist"], embedded["cand"]
        for i in range(num_layers):
            history, candidates = HSTULayer(
                num_heads, attention_dim, linear_dim, schema.sequence_length, name=f"hstu_layer_{i}"
            )(history, candidates, embedded["hist_valid"], embedded["hist_visible"], inputs["hist_time"],
              inputs["cand_time"])
        pctr = dice_head([candidates], embedded, schema, mlp_units, dice_momentum)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
