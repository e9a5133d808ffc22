import keras
from keras import ops

from zoo.errors import ZooError


@keras.saving.register_keras_serializable(package="zoo")
class TokenMixing(keras.layers.Layer):
    """RankMixer's parameter-free multi-head token mixing and its inverse (TokenMixer-Large's "revert").

    RankMixer (Zhu et al., ByteDance, CIKM 2025, §3.3.1): each of the T tokens x_t in R^D is cut into
    H heads, x_t = [x_t^(1) || ... || x_t^(H)] with x_t^(h) in R^{D/H}, and head h of every token is
    gathered into one new token

        s^h = Concat(x_1^(h), ..., x_T^(h)) in R^{T D / H},    h = 1..H

    (RankMixer takes H = T, so the mixed tokens are again D wide). It is a reshape and a transpose,
    no attention and no weights. TokenMixer-Large (Jiang et al., 2026, §3.3.1) mixes with any H and
    reverts the mixed tokens to the original T x D layout with the exact inverse permutation,
    `revert`, so the residual stream keeps each token's own coordinates.

    Args:
        num_heads: H (must divide D).
    Call:
        x [B, T, D] -> s [B, H, T D / H].  `revert(s, num_tokens=T)`: [B, H, T D / H] -> [B, T, D].
    """

    def __init__(self, num_heads, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1:
            raise ZooError(f"TokenMixing num_heads is {num_heads!r}; it must be an integer >= 1")
        self.num_heads = num_heads

    def _check(self, d):
        if d is not None and d % self.num_heads:
            raise ZooError(f"TokenMixing token width D = {d} is not divisible by num_heads H = {self.num_heads}")

    def call(self, x):
        t, d = x.shape[1], x.shape[2]
        self._check(d)
        heads = ops.reshape(x, (-1, t, self.num_heads, d // self.num_heads))  # x_t^(h): [B, T, H, D/H]
        return ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (-1, self.num_heads, t * d // self.num_heads))

    def revert(self, s, num_tokens):
        """The inverse of `call`: s [B, H, T D / H] -> x [B, T, D]."""
        width = s.shape[2] // num_tokens  # D / H
        heads = ops.reshape(s, (-1, self.num_heads, num_tokens, width))  # [B, H, T, D/H]
        return ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (-1, num_tokens, self.num_heads * width))

    def compute_output_shape(self, x_shape):
        self._check(x_shape[2])
        return (x_shape[0], self.num_heads, x_shape[1] * x_shape[2] // self.num_heads)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
