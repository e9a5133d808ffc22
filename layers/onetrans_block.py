import math

import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_softmax


@keras.saving.register_keras_serializable(package="zoo")
class OneTransBlock(keras.layers.Layer):
    """One OneTrans block: mixed causal attention and mixed FFN over the unified token sequence.

    OneTrans (Zhang et al., ByteDance, WWW 2026, "OneTrans: Unified Feature Interaction and Sequence
    Modeling with One Transformer in Industrial Recommender", §3.3) stacks blocks over
    X = [S-tokens; NS-tokens]: L_S sequential (behaviour) tokens first, L_NS non-sequential (feature)
    tokens last. Pre-Norm with RMSNorm:

        Z  = MixedMHA(RMSNorm(X)) + X
        X' = MixedFFN(RMSNorm(Z)) + Z

    Mixed parameterisation: token i uses W_i = W_S (one set shared by every S-token) if i <= L_S,
    and W_i = W_{NS,i} (its own set) otherwise:
        (q_i, k_i, v_i) = (W^Q_i x_i, W^K_i x_i, W^V_i x_i),
        MixedFFN(x_i) = W^2_i phi(W^1_i x_i + b^1_i) + b^2_i.
    Causal attention: an S-token attends to the S-tokens up to itself; an NS-token attends to all
    S-tokens and to the NS-tokens up to itself.

    The zoo scores M candidates per row, each with its own NS-tokens, and every candidate may only
    read the behaviours before its exposure time. Because the S-tokens come first and attention is
    causal, the S-tokens' outputs do not depend on any candidate (OneTrans' KV-cache argument): they
    are computed once per row, and each candidate's NS-tokens attend to them through that candidate's
    visibility mask (FeatureEmbedding's hist_visible) plus their own causal NS part. This equals M
    separate passes over [S; NS_m] in which NS_m sees only the S-tokens visible to candidate m.

    Decisions where the paper is silent:
    - "Every parameter of a block" is mixed: the RMSNorm scales, Q/K/V, the output projection W^O
      and the FFN are shared by the S-tokens and token-specific for the NS-tokens (the paper names
      Q/K/V and the FFN; the rest follows its rule "token-specific parameters for NS-tokens").
    - phi is GELU (exact) and the FFN hidden width is 4d, the backbone of DeRes' baselines;
      projections carry biases; RMSNorm epsilon 1e-6; heads have d / num_heads channels.
    - A padding S-token attends to nothing (all-zero attention weights) and is never attended to.
    - sequence_queries=False is the last block of a stack whose S-tokens nobody reads any more
      (as in the pyramid's last layer, the queries are the NS-tokens only): the S-tokens still give
      keys and values, but get no query, output projection or FFN, and come back unchanged.

    Args:
        num_heads: H.
        ffn_units: the FFN hidden width (None: 4d).
        sequence_queries: whether the S-tokens are queries (and get an FFN) in this block.
        epsilon: RMSNorm epsilon.
    Call:
        s [B, L, d] S-tokens, ns [B, M, N, d] each candidate's NS-tokens, s_valid [B, L] bool (False
        on padding), visible [B, M, L] bool (behaviour l is visible to candidate m)
        -> (s' [B, L, d], ns' [B, M, N, d]).
    """

    def __init__(self, num_heads=4, ffn_units=None, sequence_queries=True, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1:
            raise ZooError(f"OneTransBlock num_heads is {num_heads!r}; it must be an integer >= 1")
        if ffn_units is not None and (not isinstance(ffn_units, int) or isinstance(ffn_units, bool) or ffn_units < 1):
            raise ZooError(f"OneTransBlock ffn_units is {ffn_units!r}; it must be an integer >= 1 or None")
        self.num_heads = num_heads
        self.ffn_units = ffn_units
        self.sequence_queries = bool(sequence_queries)
        self.epsilon = float(epsilon)

    def build(self, s_shape, ns_shape=None, s_valid_shape=None, visible_shape=None):
        d, n = s_shape[-1], ns_shape[-2]
        if ns_shape[-1] != d:
            raise ZooError(f"OneTransBlock S-tokens are {d} wide but NS-tokens {ns_shape[-1]}")
        if d % self.num_heads:
            raise ZooError(f"OneTransBlock width d = {d} is not divisible by num_heads = {self.num_heads}")
        h, k, f = self.num_heads, d // self.num_heads, self.ffn_units or 4 * d
        self.key_dim = k

        # Each NS-token's kernels start glorot-uniform like the shared ones (Keras' glorot would count
        # the leading N axis into the fans: scale N undoes that).
        per_token = keras.initializers.VarianceScaling(scale=n, mode="fan_avg", distribution="uniform")

        def weight(name, shape, initializer=None):
            if initializer is None:
                initializer = per_token if name.startswith("ns_") else "glorot_uniform"
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        # (shared S-token parameters, token-specific NS-token parameters with a leading N axis)
        for prefix, lead in (("s", ()), ("ns", (n,))):
            queries = prefix == "ns" or self.sequence_queries
            setattr(self, f"{prefix}_attention_scale", weight(f"{prefix}_attention_scale", lead + (d,), "ones"))
            for name in ("query", "key", "value") if queries else ("key", "value"):
                setattr(self, f"{prefix}_{name}_kernel", weight(f"{prefix}_{name}_kernel", lead + (d, h, k)))
                setattr(self, f"{prefix}_{name}_bias", weight(f"{prefix}_{name}_bias", lead + (h, k), "zeros"))
            if not queries:
                continue
            setattr(self, f"{prefix}_output_kernel", weight(f"{prefix}_output_kernel", lead + (h, k, d)))
            setattr(self, f"{prefix}_output_bias", weight(f"{prefix}_output_bias", lead + (d,), "zeros"))
            setattr(self, f"{prefix}_ffn_scale", weight(f"{prefix}_ffn_scale", lead + (d,), "ones"))
            setattr(self, f"{prefix}_ffn_hidden_kernel", weight(f"{prefix}_ffn_hidden_kernel", lead + (d, f)))
            setattr(self, f"{prefix}_ffn_hidden_bias", weight(f"{prefix}_ffn_hidden_bias", lead + (f,), "zeros"))
            setattr(self, f"{prefix}_ffn_output_kernel", weight(f"{prefix}_ffn_output_kernel", lead + (f, d)))
            setattr(self, f"{prefix}_ffn_output_bias", weight(f"{prefix}_ffn_output_bias", lead + (d,), "zeros"))
        self.built = True

    def _rms_norm(self, x, scale):
        return x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon) * scale

    def _s_project(self, x, name):  # shared W_S: [B, L, d] -> [B, L, H, K]
        return ops.einsum("bld,dhk->blhk", x, getattr(self, f"s_{name}_kernel")) + getattr(self, f"s_{name}_bias")

    def _ns_project(self, x, name):  # token-specific W_{NS,i}: [B, M, N, d] -> [B, M, N, H, K]
        return ops.einsum("bmnd,ndhk->bmnhk", x, getattr(self, f"ns_{name}_kernel")) + getattr(self, f"ns_{name}_bias")

    def call(self, s, ns, s_valid, visible):
        length, n = ops.shape(s)[1], ops.shape(ns)[2]
        scale = 1.0 / math.sqrt(self.key_dim)
        s_valid = ops.cast(s_valid, "bool")
        visible = ops.cast(visible, "bool")

        # Mixed causal attention, NS side: candidate m's NS-tokens read the S-tokens visible to m and
        # their own NS-tokens up to themselves.
        hs = self._rms_norm(s, self.s_attention_scale)
        hn = self._rms_norm(ns, self.ns_attention_scale)
        ks, vs = self._s_project(hs, "key"), self._s_project(hs, "value")
        qn, kn, vn = (self._ns_project(hn, name) for name in ("query", "key", "value"))

        causal_ns = ops.greater_equal(ops.arange(n)[:, None], ops.arange(n)[None, :])  # [N, N]
        to_s = ops.einsum("bmnhk,blhk->bmhnl", qn, ks)  # NS queries, S keys [B, M, H, N, L]
        to_ns = ops.einsum("bmnhk,bmjhk->bmhnj", qn, kn)  # NS queries, NS keys [B, M, H, N, N]
        allowed = ops.concatenate(
            [
                ops.repeat(visible[:, :, None, None, :], n, axis=3),  # [B, M, 1, N, L]
                ops.logical_and(ops.ones_like(visible[:, :, :1], dtype="bool")[:, :, :, None, None], causal_ns),
            ],
            axis=-1,
        )  # allowed [B, M, 1, N, L + N]
        ns_weights = masked_softmax(ops.concatenate([to_s, to_ns], axis=-1) * scale, allowed)
        ns_heads = ops.einsum("bmhnl,blhk->bmnhk", ns_weights[..., :length], vs) + ops.einsum(
            "bmhnj,bmjhk->bmnhk", ns_weights[..., length:], vn
        )
        ns_attended = ops.einsum("bmnhk,nhkd->bmnd", ns_heads, self.ns_output_kernel) + self.ns_output_bias
        zn = ns + ns_attended
        hn = self._rms_norm(zn, self.ns_ffn_scale)  # mixed FFN, NS side
        hn = ops.einsum("bmnd,ndf->bmnf", hn, self.ns_ffn_hidden_kernel) + self.ns_ffn_hidden_bias
        hn = ops.gelu(hn, approximate=False)
        ns_out = zn + ops.einsum("bmnf,nfd->bmnd", hn, self.ns_ffn_output_kernel) + self.ns_ffn_output_bias
        if not self.sequence_queries:
            return s, ns_out

        # S side: causal self-attention over the behaviours, then the shared FFN.
        causal_s = ops.greater_equal(ops.arange(length)[:, None], ops.arange(length)[None, :])  # [L, L]
        s_allowed = ops.logical_and(causal_s[None, None], s_valid[:, None, None, :])  # [B, 1, L, L]
        qs = self._s_project(hs, "query")
        s_weights = masked_softmax(ops.einsum("bqhk,bshk->bhqs", qs, ks) * scale, s_allowed)
        s_heads = ops.einsum("bhqs,bshk->bqhk", s_weights, vs)
        zs = s + ops.einsum("blhk,hkd->bld", s_heads, self.s_output_kernel) + self.s_output_bias
        hs = self._rms_norm(zs, self.s_ffn_scale)
        hs = ops.gelu(ops.matmul(hs, self.s_ffn_hidden_kernel) + self.s_ffn_hidden_bias, approximate=False)
        return zs + ops.matmul(hs, self.s_ffn_output_kernel) + self.s_ffn_output_bias, ns_out

    def compute_output_shape(self, s_shape, ns_shape=None, s_valid_shape=None, visible_shape=None):
        return tuple(s_shape), tuple(ns_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "ffn_units": self.ffn_units,
                "sequence_queries": self.sequence_queries,
                "epsilon": self.epsilon,
            }
        )
        return config
