import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.onetrans_block import OneTransBlock
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "onetrans",
    description="OneTrans: one causal Transformer over behaviour tokens then feature tokens, shared weights for "
    "behaviours, token-specific weights for features",
    paper="Zhang et al., OneTrans: Unified Feature Interaction and Sequence Modeling with One Transformer in "
    "Industrial Recommender (ByteDance, WWW 2026)",
)
@keras.saving.register_keras_serializable(package="zoo")
class OneTrans(ZooModel):
    """OneTrans (Zhang et al., 2025, §3): sequence modelling and feature interaction in one Transformer.

    Unified tokenizer (§3.2):
        S-tokens  = [MLP_S(e_1) + p_1, ..., MLP_S(e_L) + p_L]               [B, L, d]
        NS-tokens = Split(MLP_NS(concat(candidate, user, ctx, num)), L_NS)   [B, M, L_NS, d]
        X^(0) = [S-tokens; NS-tokens]   (behaviours first, features last)
    with e_l the behaviour's field embeddings (FeatureEmbedding's "hist") and the Auto-Split
    tokenizer for the non-sequential features (the paper's better tokenizer; the candidate's fields
    are non-sequential features). Then num_layers OneTrans blocks (layers/onetrans_block.py):
    Pre-Norm RMSNorm, mixed causal attention and mixed FFN, where the S-tokens share one set of
    weights and each NS-token has its own. The last block's NS-tokens, RMS-normalised and
    concatenated, feed the prediction head: pctr = sigmoid(DiceMLP(concat NS-tokens)) [B, M].

    How it differs from the zoo's ctr_transformer (which calls itself OneTrans-style): that model
    runs a bidirectional Transformer with one set of weights for every token over
    [CLS | candidate | features | behaviours], one pass per candidate. OneTrans orders behaviours
    first and features last, attends causally, gives every feature token its own weights, and reads
    the feature tokens, not a [CLS] token.

    Candidates and time: the S-tokens are computed once per row (causal attention makes them
    independent of the features that follow, OneTrans' KV-caching argument); candidate m's NS-tokens
    read only the behaviours before its exposure time (FeatureEmbedding's hist_visible) and their own
    NS-tokens. Candidates never see each other.

    Sizes: OneTrans-S (§4.1.4): 6 blocks, d = 256, H = 4; L_NS = 12 (the pyramid's last length).
    Decisions where the paper is silent or that the zoo changes:
    - No pyramid stacking (§3.4, where later blocks keep only the last tokens' queries): with
      several candidates per row each candidate sees a different prefix of the history, so "the last
      S-tokens" are not the same for all of them; the zoo's histories (L <= 200) are short enough
      to keep every token. Every block keeps all L + L_NS tokens.
    - One behaviour sequence, so no sequence merging or [SEP] tokens. MLP_S and MLP_NS are
      Dense(width, relu) -> Dense(width) (MLP_NS: width L_NS * d). The S-tokens get a learned
      position embedding p_l per history slot (left-padded: slot L is always the newest); the paper
      gives the S-tokens no other order signal than causality.
    - A final RMSNorm (learned scale) on the NS-tokens before the head, as Pre-Norm stacks end;
      the head is the zoo's DiceMLP (mlp_units, dice_momentum) on the concatenated NS-tokens.
    - Block internals (GELU FFN of 4d, biases, mixed norms and output projection): see
      layers/onetrans_block.py.

    Args:
        schema: the input contract (needs hist_ and cand_ features).
        num_layers: the number of OneTrans blocks.
        width: d.  num_heads: H (d must be divisible by H).
        num_ns_tokens: L_NS, the number of non-sequential tokens.
        mlp_units: hidden widths of the prediction MLP.  dice_momentum: its BatchNorm/Dice decay.
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): the L behaviour tokens and each candidate's NS-tokens in one causal sequence."""
        return (L + M * hyperparameters['num_ns_tokens']) ** 2

    def __init__(
        self,
        schema,
        num_layers=6,
        width=256,
        num_heads=4,
        num_ns_tokens=12,
        mlp_units=(200, 80),
        dice_momentum=0.9,
        **kwargs,
    ):
        if width % num_heads:
            raise ZooError(f"onetrans width {width} is not divisible by num_heads {num_heads}")
        schema.require("onetrans", groups=("hist", "cand"))
        inputs = schema.inputs()
        embedded = FeatureEmbedding(schema, name="embedding")(inputs)
        m, length = schema.num_candidates, schema.sequence_length

        # S-tokens [B, L, d]: MLP_S of each behaviour plus its slot's position embedding.
        s = keras.layers.Dense(width, activation="relu", name="sequence_mlp_hidden")(embedded["hist"])
        s = keras.layers.Dense(width, name="sequence_mlp_output")(s)
        slots = ops.cumsum(ops.ones_like(inputs[schema.group("hist")[0].key]), axis=1) - 1  # [B, L]: 0..L-1
        s = s + keras.layers.Embedding(length, width, name="positions")(slots)

        # NS-tokens [B, M, L_NS, d]: Auto-Split of every candidate's non-sequential features.
        parts = [embedded["cand"]]
        for group in ("user", "ctx", "num"):
            if group in embedded:
                parts.append(ops.repeat(embedded[group][:, None, :], m, axis=1))
        ns = keras.layers.Dense(num_ns_tokens * width, activation="relu", name="feature_mlp_hidden")(
            ops.concatenate(parts, axis=-1)
        )
        ns = keras.layers.Dense(num_ns_tokens * width, name="feature_mlp_output")(ns)
        ns = ops.reshape(ns, (-1, m, num_ns_tokens, width))

        for l in range(num_layers):
            block = OneTransBlock(num_heads, sequence_queries=l < num_layers - 1, name=f"block_{l}")
            s, ns = block(s, ns, embedded["hist_valid"], embedded["hist_visible"])
        ns = keras.layers.RMSNormalization(epsilon=1e-6, name="final_norm")(ns)
        head = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")
        logit = head(ops.reshape(ns, (-1, m, num_ns_tokens * width)))
        pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
