import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import NEG_INF


@keras.saving.register_keras_serializable(package="zoo")
class TopKBehaviours(keras.layers.Layer):
    """The general search unit's selection (SIM, Pi et al., CIKM 2020, §4.1; ETA; TWIN's CP-GSU): for
    every candidate, the k behaviours with the highest relevance r_j among those it may see.

        S(A) = top-k_{j : allowed[A, j]} r_j(A)

    Only allowed behaviours compete (FeatureEmbedding's hist_visible: real and before the candidate's
    exposure), so a behaviour from a candidate's future is never picked. With fewer than k allowed
    behaviours the remaining slots are filled with arbitrary behaviours marked not allowed in the
    returned mask; the exact search unit must ignore them (masked_softmax gives them weight 0).
    Ties are broken by the backend's top_k (the lower index first under TensorFlow and JAX): a model
    that needs a defined order (SIM hard search, ETA's Hamming distances) encodes it in r.

    Args:
        k: behaviours kept per candidate.
    Call:
        scores [B, M, L] (r), allowed [B, M, L] bool, behaviours [B, L, D]
        -> (picked [B, M, k, D], picked_allowed [B, M, k] bool, indices [B, M, k] int32).
    """

    def __init__(self, k, **kwargs):
        super().__init__(**kwargs)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ZooError(f"TopKBehaviours k is {k!r}; it must be an integer >= 1")
        self.k = k

    def call(self, scores, allowed, behaviours):
        allowed = ops.cast(allowed, "bool")
        ranked = ops.where(allowed, ops.cast(scores, "float32"), NEG_INF)  # [B, M, L]
        _, indices = ops.top_k(ranked, self.k)  # [B, M, k]
        indices = ops.cast(indices, "int32")
        picked_allowed = ops.cast(ops.take_along_axis(ops.cast(allowed, "int32"), indices, axis=2), "bool")
        m = ops.shape(scores)[1]
        per_candidate = ops.repeat(behaviours[:, None], m, axis=1)  # [B, M, L, D]
        picked = ops.take_along_axis(per_candidate, indices[..., None], axis=2)  # [B, M, k, D]
        return picked, picked_allowed, indices

    def compute_output_spec(self, scores, allowed, behaviours):
        b, m = scores.shape[0], scores.shape[1]
        return (
            keras.KerasTensor((b, m, self.k, behaviours.shape[-1]), dtype=behaviours.dtype),
            keras.KerasTensor((b, m, self.k), dtype="bool"),
            keras.KerasTensor((b, m, self.k), dtype="int32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update({"k": self.k})
        return config
