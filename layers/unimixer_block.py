import keras

from zoo.errors import ZooError
from zoo.layers.per_token_swiglu import PerTokenSwiGLU
from zoo.layers.unimixing import UniMixing


@keras.saving.register_keras_serializable(package="zoo")
class UniMixerBlock(keras.layers.Layer):
    """One UniMixer block: UniMixing, a per-token SwiGLU, and SiameseNorm's two residual streams.

    UniMixer (Ha et al., Kuaishou 2026, §4): the block's function is the parameterised token mixing
    followed by the per-token SwiGLU with a residual around it,

        M = UniMixing(U),        O = pSwiGLU(M) + M,

    and the block carries two streams, a bounded X (Post-Norm-like) and an unbounded Y (Pre-Norm-like):

        U = X + Norm_Y(Y),       X' = Norm_X(X + O),       Y' = Y + O.

    UniMixing: layers/unimixing.py; pSwiGLU: layers/per_token_swiglu.py. The model starts both
    streams at the tokens and reads X_L + Norm(Y_L) after the last block.

    Where the paper's text was not available, this follows its public re-implementations, which
    agree on the two-stream update above but differ in where the SwiGLU sits; the block here takes
    the one whose O wraps UniMixing and the SwiGLU together. Norms are RMSNorm with a learned scale
    (epsilon 1e-6), shared by the T tokens.

    Args:
        block_size: B of UniMixing.  sinkhorn_iterations, temperature: UniMixing's.
        expansion: the pSwiGLU hidden width as a multiple of D.
        epsilon: RMSNorm epsilon.
    Call:
        x [B, T, D], y [B, T, D] -> (x' [B, T, D], y' [B, T, D]).
    """

    def __init__(self, block_size, expansion=4, sinkhorn_iterations=5, temperature=1.0, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(expansion, int) or isinstance(expansion, bool) or expansion < 1:
            raise ZooError(f"UniMixerBlock expansion is {expansion!r}; it must be an integer >= 1")
        self.block_size = block_size
        self.expansion = expansion
        self.sinkhorn_iterations = sinkhorn_iterations
        self.temperature = temperature
        self.epsilon = float(epsilon)
        policy = self.dtype_policy
        self.mixing = UniMixing(block_size, sinkhorn_iterations, temperature, name="mixing", dtype=policy)
        self.ffn = PerTokenSwiGLU(expansion, name="ffn", dtype=policy)
        self.norm_y = keras.layers.RMSNormalization(epsilon=self.epsilon, name="norm_y", dtype=policy)
        self.norm_x = keras.layers.RMSNormalization(epsilon=self.epsilon, name="norm_x", dtype=policy)

    def build(self, x_shape, y_shape=None):
        for layer in (self.mixing, self.ffn, self.norm_y, self.norm_x):
            layer.build(x_shape)
        self.built = True

    def call(self, x, y):
        mixed = self.mixing(x + self.norm_y(y))
        update = self.ffn(mixed) + mixed
        return self.norm_x(x + update), y + update

    def compute_output_shape(self, x_shape, y_shape=None):
        return tuple(x_shape), tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "block_size": self.block_size,
                "expansion": self.expansion,
                "sinkhorn_iterations": self.sinkhorn_iterations,
                "temperature": self.temperature,
                "epsilon": self.epsilon,
            }
        )
        return config
