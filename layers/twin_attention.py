import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_softmax
from zoo.layers.top_k_behaviours import TopKBehaviours


@keras.saving.register_keras_serializable(package="zoo")
class TWINAttention(keras.layers.Layer):
    """TWIN's two stages with one relevance metric (Chang et al., TWIN: TWo-stage Interest Network for
    Lifelong User Behavior Modeling in CTR Prediction at Kuaishou, KDD 2023, §4.2-4.3).

    A behaviour's features are split into inherent ones K_h (the item's own, here its embeddings) and
    user-item cross ones K_c (here the time gap to the candidate and the behaviour-only fields), the
    cross ones compressed to one bias per head:

        α_h(A, j) = (K_h W_h^h)_j · (q_A W_h^q) / sqrt(d_k) + (K_c W_h^c)_j                    (eq 5-6)
        CP-GSU:  S(A) = top-k_j mean_h α_h(A, j)   over the behaviours visible to A            (§4.2)
        ESU:     head_h = Σ_{j ∈ S(A)} softmax_j(α_h(A, j)) (K_h W_h^v)_j
                 TWIN(A) = concat(head_1, ..., head_H) W^o                                      (eq 7)

    The GSU ranks with exactly the α the ESU attends with (same parameters, "consistency-preserved");
    with H heads it ranks by their mean (the paper's choice is not stated). α is computed once for all
    L behaviours and the ESU reads it at the k kept ones. The projections have no biases.

    Args:
        k: behaviours the CP-GSU keeps per candidate.
        num_heads: H.
        head_dim: d_k, the width of a head's query, key and value.
    Call:
        candidates [B, M, D_q], inherent [B, L, D] (K_h), cross [B, M, L, C] (K_c per candidate and
        behaviour), visible [B, M, L] bool -> TWIN(A) [B, M, D].
    """

    def __init__(self, k, num_heads=4, head_dim=16, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("head_dim", head_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ZooError(f"TWINAttention {name} is {value!r}; it must be an integer >= 1")
        self.k = k
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.top_k = TopKBehaviours(k, dtype=self.dtype_policy, name="general_search_unit")

    def build(self, candidates_shape, inherent_shape=None, cross_shape=None, visible_shape=None):
        h, dk, width = self.num_heads, self.head_dim, int(inherent_shape[-1])
        init = keras.initializers.GlorotUniform()
        query_shape = (int(candidates_shape[-1]), h, dk)
        self.query_kernel = self.add_weight(name="query_kernel", shape=query_shape, initializer=init)
        self.key_kernel = self.add_weight(name="key_kernel", shape=(width, h, dk), initializer=init)
        self.value_kernel = self.add_weight(name="value_kernel", shape=(width, h, dk), initializer=init)
        self.cross_kernel = self.add_weight(name="cross_kernel", shape=(int(cross_shape[-1]), h), initializer=init)
        self.output_kernel = self.add_weight(name="output_kernel", shape=(h * dk, width), initializer=init)
        self.built = True

    def call(self, candidates, inherent, cross, visible):
        h, dk = self.num_heads, self.head_dim
        length = ops.shape(inherent)[1]
        query = ops.einsum("bmd,dhc->bmhc", candidates, self.query_kernel)
        keys = ops.einsum("bld,dhc->blhc", inherent, self.key_kernel)
        values = ops.reshape(ops.einsum("bld,dhc->blhc", inherent, self.value_kernel), (-1, length, h * dk))
        cross_bias = ops.einsum("bmlc,ch->bmhl", cross, self.cross_kernel)
        alpha = ops.einsum("bmhc,blhc->bmhl", query, keys) / math.sqrt(dk) + cross_bias  # [B, M, H, L]

        picked_values, picked_allowed, indices = self.top_k(ops.mean(alpha, axis=2), visible, values)
        m = ops.shape(indices)[1]
        alpha_picked = ops.take_along_axis(alpha, ops.repeat(indices[:, :, None, :], h, axis=2), axis=3)
        weights = masked_softmax(alpha_picked, picked_allowed[:, :, None, :])  # [B, M, H, k]
        picked_values = ops.reshape(picked_values, (-1, m, self.k, h, dk))
        heads = ops.einsum("bmhj,bmjhc->bmhc", weights, picked_values)
        return ops.matmul(ops.reshape(heads, (-1, m, h * dk)), self.output_kernel)

    def compute_output_shape(self, candidates_shape, inherent_shape=None, cross_shape=None, visible_shape=None):
        return tuple(candidates_shape[:2]) + (int(inherent_shape[-1]),)

    def get_config(self):
        config = super().get_config()
        config.update({"k": self.k, "num_heads": self.num_heads, "head_dim": self.head_dim})
        return config
