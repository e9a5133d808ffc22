import math

import keras
from keras import ops

from zoo.errors import ZooError

WEIGHTINGS = ("softmax", "silu", "relu")


@keras.saving.register_keras_serializable(package="zoo")
class DeResBlockAttention(keras.layers.Layer):
    """Layer l's weights over the block summaries B_b of the attention-residual path (DeRes Path 2).

        softmax (DeRes-S, eq 4):  alpha_{l,b} = exp(w_l . RMSNorm(B_b)) / sum_b' exp(w_l . RMSNorm(B_b'))
        silu    (DeRes-P, eq 8):  alpha_{l,b} = SiLU(w_l . RMSNorm(B_b))
        relu    (Table 3b ablation): alpha_{l,b} = ReLU(w_l . RMSNorm(B_b))

    w_l (R^{d/2}) is the layer's static trainable query. RMSNorm(v) = v / sqrt(mean(v^2) + eps) is
    taken per token and carries no scale of its own (a scale would only rescale w_l). The weights are
    per token: the blocks are [n, d/2] summaries and alpha_{l,b} is computed at every position.
    The layer returns alpha; the path output d_l = sum_b alpha_{l,b} B_b (eq 5) is the connector's.

    w_l starts at N(0, 1/(d/2)), so w_l . RMSNorm(B_b) starts near N(0, 1): a zero start would leave
    SiLU's weights at 0 and ReLU's weights dead.

    Args:
        weighting: "softmax", "silu" or "relu".
        epsilon: RMSNorm epsilon.
    Call:
        blocks [B, n, S, w] (the S blocks available to layer l) or a list of S blocks [B, n, w],
        optionally their per-token `inverse_rms` [B, n, S] (a list of S [B, n] with a list of
        blocks; from `inverse_rms`, so a connector computes it once per block) -> alpha [B, n, S].
        A connector passes the list: stacking the blocks would copy all of them at every layer.
    """

    def __init__(self, weighting="silu", epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if weighting not in WEIGHTINGS:
            raise ZooError(f"weighting is {weighting!r}; it must be one of {', '.join(WEIGHTINGS)}")
        self.weighting = weighting
        self.epsilon = epsilon

    def build(self, blocks_shape, inverse_rms_shape=None):
        width = blocks_shape[-1]
        self.query = self.add_weight(
            shape=(width,),
            initializer=keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(width)),
            name="query",
        )
        self.built = True

    def inverse_rms(self, block):
        """1 / sqrt(mean(v^2) + eps) per token of a block [B, n, w] -> [B, n]."""
        return ops.rsqrt(ops.mean(ops.square(block), axis=-1) + self.epsilon)

    def call(self, blocks, inverse_rms=None):
        if not isinstance(blocks, (list, tuple)):  # stacked [B, n, S, w]: the same S blocks
            blocks = ops.unstack(blocks, axis=2)
            inverse_rms = None if inverse_rms is None else ops.unstack(inverse_rms, axis=2)
        if inverse_rms is None:
            inverse_rms = [self.inverse_rms(block) for block in blocks]
        logits = ops.stack(  # w . RMSNorm(B_b) = (w . B_b) / RMS(B_b), block by block
            [ops.sum(block * self.query, axis=-1) * scale for block, scale in zip(blocks, inverse_rms)], axis=-1
        )
        if self.weighting == "softmax":
            return ops.softmax(logits, axis=-1)
        if self.weighting == "silu":
            return ops.silu(logits)
        return ops.relu(logits)

    def compute_output_shape(self, blocks_shape, inverse_rms_shape=None):
        return tuple(blocks_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config.update({"weighting": self.weighting, "epsilon": self.epsilon})
        return config
