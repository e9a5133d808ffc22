"""Pieces shared by the feature-interaction baselines of DeRes Table 2 (fm, deepfm, dcnv2, autoint, fibinet):
the check of a choice among names (each argument's own range is its rule in zoo.hyperparameters), the
field-token front end and FM's first-order term.

Every one of them starts from FieldTokens: the schema's fields as k-dimensional tokens [B, M, F, k], a
candidate's history fields pooled over the behaviours visible to it (so nothing from a label's future
or another candidate reaches its score).
"""

from keras import ops

from zoo.errors import ZooError
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.layers.field_tokens import FieldTokens


def check_choice(model, name, value, choices):
    """`value` if it is one of `choices`, else a one-line ZooError listing them."""
    if value not in choices:
        raise ZooError(f"{model}: {name} is {value!r}; it must be one of {', '.join(map(repr, choices))}")
    return value


def field_tokens(model, schema, inputs, embeddings_initializer="uniform"):
    """(embedded, tokens [B, M, F, k]) through FeatureEmbedding "embedding" and FieldTokens "field_tokens"."""
    schema.require(model, groups=("cand",))
    embedded = FeatureEmbedding(schema, embeddings_initializer=embeddings_initializer, sequence_tokens=False,
                                name="embedding")(inputs)
    return embedded, FieldTokens(schema, name="field_tokens")(embedded)


def first_order(schema, inputs, embeddings_initializer="uniform"):
    """FM's first-order terms w_i x_i per field, [B, M, F] (see FieldTokens: 1-dim embeddings)."""
    scalar_schema = FieldTokens.first_order_schema(schema)
    embedded = FeatureEmbedding(scalar_schema, embeddings_initializer=embeddings_initializer, sequence_tokens=False,
                                name="first_order_embedding")(inputs)
    return ops.squeeze(FieldTokens(scalar_schema, name="first_order_tokens")(embedded), axis=-1)


def flatten_fields(tokens):
    """[B, M, F, k] -> [B, M, F * k]: the concatenated field embeddings of each candidate."""
    return ops.reshape(tokens, (-1, tokens.shape[1], tokens.shape[2] * tokens.shape[3]))
