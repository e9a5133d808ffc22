import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SENET(keras.layers.Layer):
    """FiBiNET's SENET layer (Huang et al., FiBiNET: Combining Feature Importance and Bilinear feature
    Interaction for Click-Through Rate Prediction, RecSys 2019, §3.3, eq 3-6): learns a weight a_i per
    field and re-weights the field embeddings.

        Squeeze:    z_i = F_sq(e_i) = (1/k) sum_t e_i^(t)                  (eq 3, mean pooling)
        Excitation: A = F_ex(Z) = σ2(W_2 σ1(W_1 Z)),  W_1 in R^{f x f/r}, W_2 in R^{f/r x f}   (eq 4)
        Re-Weight:  V = F_ReWeight(A, E) = [a_1 · e_1, ..., a_f · e_f]      (eq 5-6)

    Decisions where the paper is silent: σ1 = σ2 = ReLU, no biases in W_1, W_2 (as FuxiCTR and DeepCTR
    implement it), and the bottleneck f/r is max(1, f // r) fields.

    Args:
        reduction_ratio: r.
    Call:
        fields E [..., f, k] -> V [..., f, k].
    """

    def __init__(self, reduction_ratio=3, **kwargs):
        super().__init__(**kwargs)
        self.reduction_ratio = reduction_ratio

    def build(self, fields_shape):
        f = int(fields_shape[-2])
        reduced = max(1, f // self.reduction_ratio)
        add = lambda name, shape: self.add_weight(name=name, shape=shape, initializer="glorot_uniform")  # noqa: E731
        self.squeeze_kernel = add("squeeze_kernel", (f, reduced))  # W_1
        self.excite_kernel = add("excite_kernel", (reduced, f))  # W_2
        self.built = True

    def call(self, fields):
        z = ops.mean(fields, axis=-1)  # [..., f]
        a = ops.relu(ops.matmul(ops.relu(ops.matmul(z, self.squeeze_kernel)), self.excite_kernel))  # [..., f]
        return fields * a[..., None]

    def compute_output_shape(self, fields_shape):
        return tuple(fields_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"reduction_ratio": self.reduction_ratio})
        return config
