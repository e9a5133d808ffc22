"""The CTR Transformer that DeRes and its ablation baselines share (DeRes §"experiments": "all
Transformer methods share one backbone, only the inter-layer mechanism changes").

    features -> FeatureEmbedding -> CTRTransformerTokens -> connector (L layers) -> [CLS] output
             -> LayerNorm -> Dense(1) -> sigmoid = pctr [B, M]

The connector is the only part that differs: DeRes (dual, residual-only, attnres-only) or
DenseFormerStack. Every model's connector layer is named "connector".
"""

import keras
import numpy as np
from keras import ops

from zoo.layers.ctr_transformer_tokens import CTRTransformerTokens
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.schema import Schema


def ctr_transformer_graph(schema, connector, width):
    """Returns (schema, inputs, pctr) of the shared backbone around `connector`."""
    schema = Schema.from_dict(schema)
    inputs = schema.inputs()
    embedded = FeatureEmbedding(schema, name="embedding")(inputs)
    tokens, valid = CTRTransformerTokens(schema, width, name="tokens")(embedded)  # [B*M, n, d], [B*M, n]
    encoded = connector(tokens, valid=valid)
    target = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(encoded[:, 0, :])  # [CLS]
    logit = keras.layers.Dense(1, name="head")(target)  # [B*M, 1]
    pctr = keras.layers.Activation("sigmoid", name="pctr")(ops.reshape(logit, (-1, schema.num_candidates)))
    return schema, inputs, pctr


def connector_statistics(model, features):
    """Figure 3 material of a model whose connector is a DeRes layer, for one batch (NumPy).

    Averages are over the batch's rows and valid tokens. Returns a dict:
        "alpha" [L, B+1]: mean alpha_{l,b}; NaN where block b is not available to layer l;
        "alpha_negative_fraction" [L, B+1]: share of tokens with alpha_{l,b} < 0 (SiLU's forgetting);
        "gamma_mean" [L], "gamma_std" [L]: mean of gamma_l and its standard deviation across the d/2
            hidden channels (each channel averaged over tokens first), as in Figure 3(c);
    an entry is None when the connector lacks the part (no gate, no attention-residual path).
    """
    connector = model.get_layer("connector")
    tokens, valid = keras.Model(model.input, connector.input)(features)
    found = connector.introspect(tokens, valid)
    valid = ops.convert_to_numpy(valid).astype("float64")  # [N, n]
    total = valid.sum()

    def token_mean(values):  # [N, n, L, k] -> [L, k]
        return np.einsum("tn,tnlk->lk", valid, values) / total

    result = {"alpha": None, "alpha_negative_fraction": None, "gamma_mean": None, "gamma_std": None}
    if found["alpha"] is not None:
        alpha = ops.convert_to_numpy(found["alpha"]).astype("float64")
        missing = ~found["alpha_available"]
        result["alpha"] = np.where(missing, np.nan, token_mean(alpha))
        result["alpha_negative_fraction"] = np.where(missing, np.nan, token_mean((alpha < 0).astype("float64")))
    if found["gamma"] is not None:
        per_channel = token_mean(ops.convert_to_numpy(found["gamma"]).astype("float64"))  # [L, d/2]
        result["gamma_mean"] = per_channel.mean(axis=1)
        result["gamma_std"] = per_channel.std(axis=1)
    return result
