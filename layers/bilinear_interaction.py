import itertools

import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError

TYPES = ("field-all", "field-each", "field-interaction")


@keras.saving.register_keras_serializable(package="zoo")
class BilinearInteraction(keras.layers.Layer):
    """FiBiNET's bilinear-interaction layer (Huang et al., RecSys 2019, §3.4, eq 7-9): one vector per
    pair of fields i < j,

        p_ij = v_i · W ⊙ v_j          "field-all":         one W in R^{k x k} shared by all pairs   (eq 7)
        p_ij = v_i · W_i ⊙ v_j        "field-each":        one W_i per field i                      (eq 8)
        p_ij = v_i · W_ij ⊙ v_j       "field-interaction": one W_ij per pair                        (eq 9)

    (· the vector-matrix product, ⊙ the Hadamard product), output p = [p_12, p_13, ..., p_{f-1,f}].
    Decisions where the paper is silent: pairs in lexicographic order (i, j), i < j; "field-each" has
    f - 1 matrices (the last field is never the left one of a pair i < j); W initialised glorot-uniform.

    Args:
        bilinear_type: "field-all", "field-each" or "field-interaction".
    Call:
        fields V [..., f, k] -> p [..., f (f - 1) / 2, k].
    """

    def __init__(self, bilinear_type="field-interaction", **kwargs):
        super().__init__(**kwargs)
        if bilinear_type not in TYPES:
            raise ZooError(f"bilinear_type is {bilinear_type!r}; it must be one of {', '.join(map(repr, TYPES))}")
        self.bilinear_type = bilinear_type

    def build(self, fields_shape):
        f, k = int(fields_shape[-2]), int(fields_shape[-1])
        pairs = list(itertools.combinations(range(f), 2))
        self.left = np.array([i for i, _ in pairs], "int32")
        self.right = np.array([j for _, j in pairs], "int32")
        count = {"field-all": None, "field-each": f - 1, "field-interaction": len(pairs)}[self.bilinear_type]
        shape = (k, k) if count is None else (count, k, k)
        self.kernel = self.add_weight(name="kernel", shape=shape, initializer="glorot_uniform")
        self.built = True

    def call(self, fields):
        v_i = ops.take(fields, self.left, axis=-2)  # [..., P, k]
        v_j = ops.take(fields, self.right, axis=-2)
        if self.bilinear_type == "field-all":
            v_i_w = ops.matmul(v_i, self.kernel)
        elif self.bilinear_type == "field-each":
            v_i_w = ops.einsum("...pk,pkl->...pl", v_i, ops.take(self.kernel, self.left, axis=0))
        else:
            v_i_w = ops.einsum("...pk,pkl->...pl", v_i, self.kernel)
        return v_i_w * v_j

    def compute_output_shape(self, fields_shape):
        f = fields_shape[-2]
        return tuple(fields_shape)[:-2] + (f * (f - 1) // 2, fields_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"bilinear_type": self.bilinear_type})
        return config
