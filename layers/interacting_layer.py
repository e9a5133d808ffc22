import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class InteractingLayer(keras.layers.Layer):
    """AutoInt's interacting layer (Song et al., AutoInt: Automatic Feature Interaction Learning via
    Self-Attentive Neural Networks, CIKM 2019, §4.3, eq 5-8): multi-head self-attention over the fields
    with a residual projection.

        α^(h)_{m,k} = exp(ψ^(h)(e_m, e_k)) / sum_l exp(ψ^(h)(e_m, e_l)),
            ψ^(h)(e_m, e_k) = <W^(h)_Query e_m, W^(h)_Key e_k>                          (eq 5)
        ẽ^(h)_m = sum_k α^(h)_{m,k} (W^(h)_Value e_k)                                   (eq 6)
        ẽ_m = ẽ^(1)_m ⊕ ẽ^(2)_m ⊕ ... ⊕ ẽ^(H)_m                                       (eq 7)
        e^Res_m = ReLU(ẽ_m + W_Res e_m)                                                  (eq 8)

    W_Query, W_Key, W_Value in R^{d' x d} per head, W_Res in R^{d'H x d}; no biases (the paper writes
    none). Decision: ψ is the plain inner product as the paper defines it, without the 1/sqrt(d')
    scaling of Transformer attention. Every field attends to every field (the fields of one row are
    never padding).

    Args:
        num_heads: H.
        head_dim: d', the attention size of each head.
    Call:
        fields [N, F, d] -> [N, F, H d'].
    """

    def __init__(self, num_heads=2, head_dim=32, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_dim = head_dim

    def build(self, fields_shape):
        d, h, e = int(fields_shape[-1]), self.num_heads, self.head_dim
        add = lambda name, shape: self.add_weight(name=name, shape=shape, initializer="glorot_uniform")  # noqa: E731
        self.query_kernel = add("query_kernel", (d, h, e))
        self.key_kernel = add("key_kernel", (d, h, e))
        self.value_kernel = add("value_kernel", (d, h, e))
        self.residual_kernel = add("residual_kernel", (d, h * e))
        self.built = True

    def call(self, fields):
        num_fields = fields.shape[1]
        query = ops.einsum("nfd,dhe->nhfe", fields, self.query_kernel)
        key = ops.einsum("nfd,dhe->nhfe", fields, self.key_kernel)
        value = ops.einsum("nfd,dhe->nhfe", fields, self.value_kernel)
        alpha = ops.softmax(ops.einsum("nhme,nhke->nhmk", query, key), axis=-1)  # [N, H, F, F]
        heads = ops.einsum("nhmk,nhke->nmhe", alpha, value)  # ẽ^(h)_m
        combined = ops.reshape(heads, (-1, num_fields, self.num_heads * self.head_dim))  # ẽ_m
        return ops.relu(combined + ops.matmul(fields, self.residual_kernel))

    def compute_output_shape(self, fields_shape):
        return tuple(fields_shape)[:-1] + (self.num_heads * self.head_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "head_dim": self.head_dim})
        return config
