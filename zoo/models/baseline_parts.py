"""Pieces shared by the SUAN paper's baselines (hstu, can, sim_soft, sim_hard, eta, twin): the check of k
against L (each argument's own range is its rule in zoo.hyperparameters), the time gaps between candidates
and behaviours, SIM's two stages, and the common prediction layer.

SUAN §4.1.4 gives every compared model the same prediction layer (an MLP with Dice); here that is
DIN's head: DiceMLP over [the model's interest vector(s), user, ctx, num] -> `pctr` [B, M].
"""

import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError
from zoo.layers.dice_mlp import DiceMLP
from zoo.layers.exact_search_unit import ExactSearchUnit
from zoo.layers.top_k_behaviours import TopKBehaviours


def check_size(model, name, value):
    """`value` as an int; a one-line ZooError naming `name` unless it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ZooError(f"{model}: {name} is {value!r}; it must be an integer >= 1")
    return int(value)


def check_top_k(model, k, schema):
    """k as an int in [1, L]."""
    k = check_size(model, "k", k)
    if k > schema.sequence_length:
        raise ZooError(f"{model}: k is {k} but the history holds only L = {schema.sequence_length} behaviours")
    return k


def time_gaps(inputs):
    """cand_time - hist_time in integer seconds, [B, M, L] (exact, whatever the dtype of the times)."""
    hist_time = ops.convert_to_tensor(inputs["hist_time"])
    cand_time = ops.cast(inputs["cand_time"], hist_time.dtype)
    return cand_time[:, :, None] - hist_time[:, None, :]


def search_then_attend(inputs, embedded, scores, allowed, k, num_heads, attention_dim, time_embedding_dim):
    """SIM's two stages: the general search unit keeps each candidate's k best allowed behaviours by
    `scores` [B, M, L] (TopKBehaviours), the exact search unit attends over them with their time gaps
    (ExactSearchUnit). Returns U [B, M, H (D + d_t)]."""
    picked, picked_allowed, indices = TopKBehaviours(k, name="general_search_unit")(scores, allowed, embedded["hist"])
    gaps = ops.take_along_axis(time_gaps(inputs), indices, axis=2)  # [B, M, k]
    esu = ExactSearchUnit(num_heads, attention_dim, time_embedding_dim, name="exact_search_unit")
    return esu(embedded["cand"], picked, picked_allowed, gaps)


def dice_head(parts, embedded, schema, mlp_units, dice_momentum):
    """pctr [B, M] = sigmoid(DiceMLP([parts..., user, ctx, num])); `parts` are [B, M, *] tensors."""
    parts = list(parts)
    m = schema.num_candidates
    for group in ("user", "ctx", "num"):
        if group in embedded:
            parts.append(ops.repeat(embedded[group][:, None, :], m, axis=1))
    logit = DiceMLP(mlp_units, dice_momentum=dice_momentum, name="mlp")(ops.concatenate(parts, axis=-1))
    return keras.layers.Activation("sigmoid", name="pctr")(ops.squeeze(logit, axis=-1))
