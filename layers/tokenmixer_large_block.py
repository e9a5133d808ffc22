import keras

from zoo.errors import ZooError
from zoo.layers.per_token_swiglu import PerTokenSwiGLU
from zoo.layers.token_mixing import TokenMixing


@keras.saving.register_keras_serializable(package="zoo")
class TokenMixerLargeBlock(keras.layers.Layer):
    """One TokenMixer-Large block: mix, per-token SwiGLU, revert, per-token SwiGLU.

    TokenMixer-Large (Jiang et al., ByteDance, 2026, "TokenMixer-Large: Scaling Up Large Ranking
    Models in Industrial Recommenders", §3.3, eq 12 and 16), Pre-Norm with RMSNorm and no biases:

        H      = Mix(X)                              X [T, D] -> H [H, T D / H]
        H'     = pSwiGLU_mix(Norm(H)) + H            (eq 12, the residual inside the mixed space)
        X_rev  = Revert(H')                          back to [T, D]
        X'     = pSwiGLU_rev(Norm(X_rev)) + X        (eq 16, the residual to the block input)

    Mix / Revert are RankMixer's head-wise reshape-transpose and its inverse (layers/token_mixing.py),
    so both residuals add tensors in the same layout (RankMixer added the mixed tokens to the unmixed
    ones: "dimension-mismatch residuals"), and H need not equal T. pSwiGLU is the per-token SwiGLU
    (layers/per_token_swiglu.py): H position-specific networks in the mixed space, T in the token
    space.

    Decisions where the sources are silent: RMSNorm has a learned scale shared by the tokens of a
    space and epsilon 1e-6; both pSwiGLUs have hidden width k times their token width (k =
    expansion). The dense form: the paper's Sparse-Pertoken MoE (which replaces each pSwiGLU by
    routed experts to reach billions of parameters) is not part of this block.

    Args:
        num_heads: H (must divide D).
        expansion: k, the pSwiGLU hidden width as a multiple of its token width.
        epsilon: RMSNorm epsilon.
    Call:
        x [B, T, D] -> [B, T, D].
    """

    def __init__(self, num_heads, expansion=4, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("expansion", expansion)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ZooError(f"TokenMixerLargeBlock {name} is {value!r}; it must be an integer >= 1")
        self.num_heads = num_heads
        self.expansion = expansion
        self.epsilon = float(epsilon)
        policy = self.dtype_policy
        self.mixing = TokenMixing(num_heads, name="mixing", dtype=policy)
        self.mix_norm = keras.layers.RMSNormalization(epsilon=self.epsilon, name="mix_norm", dtype=policy)
        self.mix_ffn = PerTokenSwiGLU(expansion, name="mix_ffn", dtype=policy)
        self.revert_norm = keras.layers.RMSNormalization(epsilon=self.epsilon, name="revert_norm", dtype=policy)
        self.revert_ffn = PerTokenSwiGLU(expansion, name="revert_ffn", dtype=policy)

    def build(self, x_shape):
        t, d = x_shape[1], x_shape[2]
        if d % self.num_heads:
            raise ZooError(
                f"TokenMixerLargeBlock token width D = {d} is not divisible by num_heads H = {self.num_heads}"
            )
        mixed_shape = (x_shape[0], self.num_heads, t * d // self.num_heads)
        self.mix_norm.build(mixed_shape)
        self.mix_ffn.build(mixed_shape)
        self.revert_norm.build(x_shape)
        self.revert_ffn.build(x_shape)
        self.built = True

    def call(self, x):
        h = self.mixing(x)
        h = self.mix_ffn(self.mix_norm(h)) + h  # eq 12
        reverted = self.mixing.revert(h, num_tokens=x.shape[1])
        return self.revert_ffn(self.revert_norm(reverted)) + x  # eq 16

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "expansion": self.expansion, "epsilon": self.epsilon})
        return config
