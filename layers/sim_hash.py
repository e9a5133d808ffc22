import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError


@keras.saving.register_keras_serializable(package="zoo")
class SimHash(keras.layers.Layer):
    """ETA's retrieval metric (Chen et al., End-to-End User Behavior Retrieval in Click-Through Rate
    Prediction Model, 2021, §3.2): SimHash signatures (locality-sensitive hashing of the embeddings) and
    the Hamming distance between a candidate's and each behaviour's.

        sig(x)_b = [x · R_b > 0],  b = 1..m,  R ~ N(0, 1) of shape [D, m], fixed (not trained)
        d_H(A, j) = Σ_b [sig(e_A)_b ≠ sig(e_j)_b]        (small d_H: small angle between e_A and e_j)

    R is a non-trainable weight drawn by NumPy from `seed`, so the same seed gives the same hyperplanes
    under every backend, and a saved model carries them. The projections are computed in float32 under
    any dtype policy (a float16 rounding could flip a sign); the distances are exact int32.

    Args:
        num_bits: m, the signature length.
        seed: the seed of R.
    Call:
        candidates [B, M, D], history [B, L, D] -> d_H [B, M, L] int32 in 0..m.
    """

    def __init__(self, num_bits=64, seed=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(num_bits, bool) or not isinstance(num_bits, int) or num_bits < 1:
            raise ZooError(f"SimHash num_bits is {num_bits!r}; it must be an integer >= 1")
        self.num_bits = num_bits
        self.seed = int(seed)

    def build(self, candidates_shape, history_shape=None):
        def hyperplanes(shape, dtype=None):
            return ops.convert_to_tensor(np.random.default_rng(self.seed).standard_normal(shape), dtype="float32")

        self.hyperplanes = self.add_weight(
            name="hyperplanes", shape=(int(candidates_shape[-1]), self.num_bits), initializer=hyperplanes,
            trainable=False, dtype="float32",
        )
        self.built = True

    def signature(self, x):
        """sig(x) as 0/1 float32, [..., m]."""
        projected = ops.matmul(ops.cast(x, "float32"), ops.cast(self.hyperplanes, "float32"))
        return ops.cast(ops.greater(projected, 0.0), "float32")

    def call(self, candidates, history):
        sig_a, sig_j = self.signature(candidates), self.signature(history)  # [B, M, m], [B, L, m]
        agree = ops.einsum("bmc,blc->bml", sig_a, sig_j) + ops.einsum("bmc,blc->bml", 1.0 - sig_a, 1.0 - sig_j)
        return ops.cast(self.num_bits - agree, "int32")

    def compute_output_spec(self, candidates, history):
        return keras.KerasTensor((candidates.shape[0], candidates.shape[1], history.shape[1]), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({"num_bits": self.num_bits, "seed": self.seed})
        return config
