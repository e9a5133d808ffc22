import math

import keras
from keras import ops

from zoo.errors import ZooError


def sinkhorn_knopp(logits, iterations):
    """mHC eq 8's projection onto the doubly-stochastic matrices: M_0 = exp(logits) and
    M_t = T_r(T_c(M_{t-1})) for t = 1..t_max (T_c divides by the column sums, T_r by the row sums).

    logits [..., n, n] -> [..., n, n] in float32. Subtracting each matrix's maximum first changes
    nothing (a common factor cancels in the first normalisation) and keeps exp finite.
    """
    logits = ops.cast(logits, "float32")
    m = ops.exp(logits - ops.max(logits, axis=(-2, -1), keepdims=True))
    for _ in range(iterations):
        m = m / ops.sum(m, axis=-2, keepdims=True)  # T_c: every column sums to 1
        m = m / ops.sum(m, axis=-1, keepdims=True)  # T_r: every row sums to 1
    return m


@keras.saving.register_keras_serializable(package="zoo")
class ManifoldHyperConnection(keras.layers.Layer):
    """The three mappings of one manifold-constrained hyper-connection.

    mHC (Xie et al., DeepSeek 2025, "mHC: Manifold-Constrained Hyper-Connections", §4) on top of
    Hyper-Connections (Zhu et al., 2024): the residual stream of width C is widened into n streams,
    x_l in R^{n x C} per token, and a sublayer F_l is wired in by (mHC eq 3)

        x_{l+1} = H^res_l x_l + H^post_l^T F_l(H^pre_l x_l)

    with the mappings computed from the token's own streams (eq 7)

        x'      = RMSNorm(vec(x_l))                       vec(x_l) in R^{1 x nC}
        H~pre   = a^pre  (x' phi^pre)       + b^pre       phi^pre  in R^{nC x n},   b^pre  in R^{1 x n}
        H~post  = a^post (x' phi^post)      + b^post      phi^post in R^{nC x n},   b^post in R^{1 x n}
        H~res   = a^res  mat(x' phi^res)    + b^res       phi^res  in R^{nC x n^2}, b^res  in R^{n x n}

    and constrained (eq 8)

        H^pre = sigmoid(H~pre),   H^post = 2 sigmoid(H~post),   H^res = Sinkhorn-Knopp(H~res)

    with t_max Sinkhorn iterations, so H^res is (to the last column normalisation) doubly stochastic:
    non-negative, rows and columns summing to 1. This layer returns the three mappings; the caller
    reads H^pre x_l into the sublayer and writes H^res x_l + H^post^T F back (layers/mhc_stack.py).

    Decisions where the paper is silent (it gives a^* = 0.01 at init, t_max = 20 and n = 4):
    - RMSNorm has no learned scale here: a scale in front of phi^* would only rescale phi^*.
      Its epsilon is 1e-6.
    - phi^* are stored as [n, C, ...] (vec and mat are reshapes) and start glorot-uniform, so the
      streams' permutation symmetry is broken from the first step (with phi^* = 0 and equal biases
      every stream would receive the same gradient forever).
    - b^pre starts at logit(1/n): each stream weighs 1/n, the sublayer reads the streams' mean.
      b^post starts at 0: H^post = 1, every stream receives the whole sublayer output (HC's
      beta = 1). b^res starts at 0 on the diagonal and -4 off it, so H^res starts near the identity
      (HC's static start, 0.95 on the diagonal for n = 4) with gradient reaching the off-diagonal
      entries. The streams start as n copies of the input, and then every stream is the ordinary
      residual stream up to the small dynamic terms a^* (x' phi^*).
    - The Sinkhorn iterations run in float32 under mixed precision (exp overflows float16).

    Args:
        expansion_rate: n, the number of residual streams (>= 2).
        sinkhorn_iterations: t_max.
        gating_init: the initial a^pre, a^post, a^res.
        epsilon: the RMSNorm epsilon.
    Call:
        streams [B, T, n, C] -> (h_pre [B, T, n], h_post [B, T, n], h_res [B, T, n, n]).
    """

    def __init__(self, expansion_rate=4, sinkhorn_iterations=20, gating_init=0.01, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        for name, value, low in (
            ("expansion_rate", expansion_rate, 2),
            ("sinkhorn_iterations", sinkhorn_iterations, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ZooError(f"ManifoldHyperConnection {name} is {value!r}; it must be an integer >= {low}")
        self.expansion_rate = expansion_rate
        self.sinkhorn_iterations = sinkhorn_iterations
        self.gating_init = float(gating_init)
        self.epsilon = float(epsilon)

    def build(self, streams_shape):
        n, c = self.expansion_rate, streams_shape[-1]
        if streams_shape[-2] is not None and streams_shape[-2] != n:
            raise ZooError(f"ManifoldHyperConnection has n = {n} streams but its input has {streams_shape[-2]}")

        def weight(name, shape, initializer):
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        gate = keras.initializers.Constant(self.gating_init)
        self.phi_pre = weight("phi_pre", (n, c, n), "glorot_uniform")
        self.phi_post = weight("phi_post", (n, c, n), "glorot_uniform")
        self.phi_res = weight("phi_res", (n, c, n, n), "glorot_uniform")
        self.alpha_pre = weight("alpha_pre", (), gate)
        self.alpha_post = weight("alpha_post", (), gate)
        self.alpha_res = weight("alpha_res", (), gate)
        self.bias_pre = weight("bias_pre", (n,), keras.initializers.Constant(-math.log(n - 1)))
        self.bias_post = weight("bias_post", (n,), "zeros")
        off_diagonal = [[0.0 if i == j else -4.0 for j in range(n)] for i in range(n)]
        self.bias_res = weight("bias_res", (n, n), keras.initializers.Constant(off_diagonal))
        self.built = True

    def call(self, streams):
        normed = streams * ops.rsqrt(ops.mean(ops.square(streams), axis=(-2, -1), keepdims=True) + self.epsilon)
        pre = self.alpha_pre * ops.einsum("btnc,nck->btk", normed, self.phi_pre) + self.bias_pre
        post = self.alpha_post * ops.einsum("btnc,nck->btk", normed, self.phi_post) + self.bias_post
        res = self.alpha_res * ops.einsum("btnc,ncij->btij", normed, self.phi_res) + self.bias_res
        h_res = ops.cast(sinkhorn_knopp(res, self.sinkhorn_iterations), streams.dtype)
        return ops.sigmoid(pre), 2.0 * ops.sigmoid(post), h_res

    def compute_output_shape(self, streams_shape):
        n = self.expansion_rate
        return tuple(streams_shape[:-2]) + (n,), tuple(streams_shape[:-2]) + (n,), tuple(streams_shape[:-2]) + (n, n)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "expansion_rate": self.expansion_rate,
                "sinkhorn_iterations": self.sinkhorn_iterations,
                "gating_init": self.gating_init,
                "epsilon": self.epsilon,
            }
        )
        return config
