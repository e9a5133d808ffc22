import keras
from keras import ops

from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.target_attention import TargetAttention
from zoo.models import interaction_parts
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "din",
    description="Deep Interest Network: candidate-aware attention pooling of the history, Dice MLP",
    paper="Zhou et al., Deep Interest Network for Click-Through Rate Prediction, KDD 2018",
)
@keras.saving.register_keras_serializable(package="zoo")
class DIN(ZooModel):
    """DIN, the baseline of SUAN's and ReST's tables.

    For each of the M candidates A: v_U(A) = TargetAttention(e_A, history) (DIN eq 3) over the behaviours
    before A's exposure time (FeatureEmbedding's hist_visible), then
    pctr = sigmoid(DiceMLP([v_U(A), e_A, user, ctx, num]) + sum_i w_i x_i). Output `pctr` [B, M].

    The last term (`first_order`, not in the DIN paper) is FM's first-order part (Rendle 2010 eq 1, the
    "wide" part of Wide & Deep): a scalar weight per id of each field (zoo.models.interaction_parts
    .first_order; a history field adds the mean weight of its visible behaviours, a numeric field w_f x),
    the id weights starting at zero. It lets the network read a running statistic's bucket, or an id's rate, as a
    log-odds from the first steps, where the MLP alone learned the ids first and overfitted before it used
    them (issue #50). Measured with `fit din` on drafted specs, same rows and seed: the Taobao event log's
    test AUC 0.6400 -> 0.6902 (the user running rate alone: 0.6774), the MovieLens impression log 0.7340 ->
    0.7350. Presets written before it build without it (`written_before`).

    Embedding tables start from N(0, 1e-4) (zoo.layers.EmbeddingNormal, DeepCTR's and FuxiCTR's default),
    not Keras' U(-0.05, 0.05): measured against FuxiCTR's DIN at equal sizes on ML-100K over 3 seeds
    (benchmarks/vs_fuxictr_epochs.py, table in benchmarks/reproduced/vs_fuxictr_epochs/), it raises the
    test AUC (issue #40).

    The gradients are not clipped by default (FuxiCTR clips their global norm at 10; `fit --clipnorm 10`
    or `Recipe.clipnorm` does the same here). Measured (issue #40): tables this small make the first step's
    gradient large (global norm 297 on ML-100K, 296 of it in the 12-row table of the history's ratings; 3.0 at
    the second step, under 1 from the tenth), because the BatchNorm after the first Dense divides by the
    tiny spread of those inputs. Adam's second moment keeps that step for hundreds of steps, so the tables
    it touched move slowly through the first epoch: the first epoch's validation AUC is 0.768 (FuxiCTR
    0.779), clipped at 10 0.782. The slow start ends better: test AUC 0.793 against 0.785 clipped (FuxiCTR
    0.781) on ML-100K, and 0.748 against 0.746 on the own-data impression log
    (benchmarks/reproduced/own_data_compare*), so the default stays unclipped.

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        attention_units: hidden widths of the activation unit.
        mlp_units: hidden widths of the prediction MLP.
        dice_momentum: moving-average decay of the BatchNorm/Dice statistics.
        first_order: add the first-order term sum_i w_i x_i to the MLP's logit.
    """

    written_before = {"first_order": False}

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's target attention over the L behaviours."""
        return M * L

    def __init__(self, schema, attention_units=(80, 40), mlp_units=(200, 80), dice_momentum=0.9, first_order=True,
                 **kwargs):
        schema.require("din", groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, embeddings_initializer="normal", name="embedding")(inputs)
        candidates = embedded["cand"]  # [B, M, D]
        interest = TargetAttention(attention_units, name="target_attention")(
            candidates, embedded["hist"], embedded["hist_visible"]
        )
        parts = [interest, candidates]
        m = schema.num_candidates
        for group in ("user", "ctx", "num"):
            if group in embedded:
                parts.append(ops.repeat(embedded[group][:, None, :], m, axis=1))
        logit = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(ops.concatenate(parts, axis=-1))
        if first_order:
            terms = interaction_parts.first_order(schema, inputs, embeddings_initializer="zeros")  # [B, M, F]
            logit = logit + ops.sum(terms, axis=-1, keepdims=True)
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
