import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_softmax


@keras.saving.register_keras_serializable(package="zoo")
class TargetCrossAttention(keras.layers.Layer):
    """Multi-head target attention: each candidate is one query over the history (Vaswani et al. 2017, §3.2).

        c_m = [head_1; ...; head_H] W^O,    head_h = softmax(q_{m,h} K_h^T / sqrt(d_h)) V_h
        q_{m,h} = e_m W_h^Q,   K_h = H W_h^K,   V_h = H W_h^V

    over the keys l with allowed[m, l] only (FeatureEmbedding's hist_visible: real behaviours strictly
    before candidate m's time); a candidate with no allowed key gets zero attention weights, so c_m is
    the output bias alone (zero without biases). Candidates never read each other. This is the
    target-attention readout of the zoo's "Trans." and LLaMA baselines (ReST §3.1: the same query
    tokens read each sequence model's states) and the cross attention of STCA's stacked layers.

    Args:
        num_heads: H; the query width d must be divisible by H (d_h = d / H).
        use_bias: biases in the Q, K, V and output projections.
    Call:
        candidates [B, M, d], history [B, L, d_k], allowed [B, M, L] bool -> [B, M, d].
    """

    def __init__(self, num_heads, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1:
            raise ZooError(f"TargetCrossAttention num_heads is {num_heads!r}; it must be an integer >= 1")
        self.num_heads = num_heads
        self.use_bias = bool(use_bias)

    def build(self, candidates_shape, history_shape=None, allowed_shape=None):
        width, memory_width = int(candidates_shape[-1]), int(history_shape[-1])
        if width % self.num_heads:
            raise ZooError(f"TargetCrossAttention: the width {width} is not divisible by num_heads {self.num_heads}")
        H, K = self.num_heads, width // self.num_heads
        self.head_dim = K

        def weight(name, shape, initializer="glorot_uniform"):
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        self.query_kernel = weight("query_kernel", (width, H, K))
        self.key_kernel = weight("key_kernel", (memory_width, H, K))
        self.value_kernel = weight("value_kernel", (memory_width, H, K))
        self.output_kernel = weight("output_kernel", (H, K, width))
        if self.use_bias:
            self.query_bias = weight("query_bias", (H, K), "zeros")
            self.key_bias = weight("key_bias", (H, K), "zeros")
            self.value_bias = weight("value_bias", (H, K), "zeros")
            self.output_bias = weight("output_bias", (width,), "zeros")
        self.built = True

    def _project(self, x, kernel, bias_name):  # [B, n, w] x [w, H, K] -> [B, n, H, K]
        y = ops.einsum("bnw,whk->bnhk", x, kernel)
        return y + getattr(self, bias_name) if self.use_bias else y

    def call(self, candidates, history, allowed):
        q = self._project(candidates, self.query_kernel, "query_bias")  # [B, M, H, K]
        k = self._project(history, self.key_kernel, "key_bias")  # [B, L, H, K]
        v = self._project(history, self.value_kernel, "value_bias")
        logits = ops.einsum("bmhk,blhk->bhml", q, k) * (1.0 / math.sqrt(self.head_dim))
        weights = masked_softmax(logits, ops.cast(allowed, "bool")[:, None, :, :])  # [B, H, M, L]
        heads = ops.einsum("bhml,blhk->bmhk", weights, v)
        out = ops.einsum("bmhk,hkd->bmd", heads, self.output_kernel)
        return out + self.output_bias if self.use_bias else out

    def compute_output_shape(self, candidates_shape, history_shape=None, allowed_shape=None):
        return candidates_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "use_bias": self.use_bias})
        return config
