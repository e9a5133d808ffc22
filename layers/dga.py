import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.masked_softmax import masked_attention
from zoo.layers.rote import RotaryPositionTime


@keras.saving.register_keras_serializable(package="zoo")
class DualGatedAttention(keras.layers.Layer):
    """Dual-gated self-attention, DGA (ReST §2.1):

        H = Attention(X W_Q, X W_K, σ(X W_gv) ⊙ (X W_V))
        DualGatedAttn(X) = (H ⊙ σ(X W_go)) W_o

    Multi-head scaled dot-product attention (d_h = d / num_heads, no biases). The value gate σ(X W_gv)
    damps unreliable behaviours before aggregation; the output gate σ(X W_go) decides how much of the
    aggregated context updates each position. With `time_granularities`, queries and keys are rotated
    per head by RoPE/RoTE (`RotaryPositionTime`) before the scores.

    Query i may attend to key j when j is a real behaviour (`valid`) and, with `causal`, j <= i; a
    query with no allowed key (a padding position, an empty history) gets H = 0.

    Args:
        num_heads: number of heads.
        causal: apply the causal mask (the encoder T of ReST is causal).
        time_granularities: τ_h per head for RoPE (0) / RoTE (> 0) heads, or None for no rotation.
        max_wavelength: base of the rotary frequencies.
    Call:
        x [B, L, d], valid [B, L] bool, time [B, L] int seconds (needed with time_granularities)
        -> [B, L, d].
    """

    def __init__(self, num_heads, causal=True, time_granularities=None, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.causal = causal
        self.time_granularities = None if time_granularities is None else [int(t) for t in time_granularities]
        self.max_wavelength = max_wavelength
        if self.time_granularities is not None and len(self.time_granularities) != num_heads:
            raise ZooError(
                f"DualGatedAttention: time_granularities has {len(self.time_granularities)} entries "
                f"but num_heads is {num_heads}"
            )
        self.rotary = (
            None
            if self.time_granularities is None
            else RotaryPositionTime(self.time_granularities, max_wavelength, dtype=self.dtype_policy, name="rotary")
        )

    def build(self, x_shape, valid_shape=None, time_shape=None):
        d = x_shape[-1]
        if d % self.num_heads or (self.rotary is not None and (d // self.num_heads) % 2):
            rotated = " of even width (RoPE/RoTE rotate pairs)" if self.rotary is not None else ""
            raise ZooError(f"DualGatedAttention: width {d} does not split into {self.num_heads} heads{rotated}")
        self.head_dim = d // self.num_heads
        # W_Q, W_K, W_V, W_gv, W_go, W_o, each [d, d], in this order (get_weights order).
        for name in ("w_q", "w_k", "w_v", "w_gv", "w_go", "w_o"):
            setattr(self, name, self.add_weight(shape=(d, d), initializer="glorot_uniform", name=name))
        self.built = True

    def _heads(self, x):
        b, l = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (b, l, self.num_heads, self.head_dim))  # [B, L, H, d_h]

    def call(self, x, valid, time=None):
        q, k = self._heads(ops.matmul(x, self.w_q)), self._heads(ops.matmul(x, self.w_k))
        v = self._heads(ops.sigmoid(ops.matmul(x, self.w_gv)) * ops.matmul(x, self.w_v))
        if self.rotary is not None:
            q, k = self.rotary(q, time, valid), self.rotary(k, time, valid)
        length = ops.shape(x)[1]
        allowed = ops.repeat(valid[:, None, :], length, axis=1)  # [B, Lq, Lk]
        if self.causal:
            lower = ops.greater_equal(ops.arange(length)[:, None], ops.arange(length)[None, :])
            allowed = ops.logical_and(allowed, lower[None])
        h = masked_attention(q, k, v, allowed[:, None, :, :], 1.0 / self.head_dim**0.5)  # [B, Lq, H, d_h]
        h = ops.reshape(h, ops.shape(x))
        return ops.matmul(h * ops.sigmoid(ops.matmul(x, self.w_go)), self.w_o)

    def compute_output_shape(self, x_shape, valid_shape=None, time_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "causal": self.causal,
                "time_granularities": self.time_granularities,
                "max_wavelength": self.max_wavelength,
            }
        )
        return config
