import keras
from keras import ops

from zoo.errors import ZooError

SECOND, MINUTE, HOUR, DAY, WEEK = 1, 60, 3600, 86400, 7 * 86400
YEAR = 365 * DAY
QUARTER = YEAR // 4  # 91.25 days (7,884,000 s): a quarter of a 365-day year
# ReST §2.1: one RoPE head, the others seconds, minutes, hours, days, weeks, quarters, years.
TIME_GRANULARITIES = (SECOND, MINUTE, HOUR, DAY, WEEK, QUARTER, YEAR)


def default_granularities(num_heads):
    """τ_h per head: 0 (RoPE, the sequence index) for head 0, then s/min/h/day/week/quarter/year, cycling.

    The paper names the granularities only; here a year is 365 days and a quarter a fourth of it,
    91.25 days (7,884,000 s)."""
    return [0] + [TIME_GRANULARITIES[h % len(TIME_GRANULARITIES)] for h in range(num_heads - 1)]


@keras.saving.register_keras_serializable(package="zoo")
class RotaryPositionTime(keras.layers.Layer):
    """RoPE + RoTE (ReST §2.1): each attention head rotates its queries and keys by its own position.

        RoPE heads (τ_h = 0):  position n = the sequence index
        RoTE heads (τ_h > 0):  position b_i = floor((t_i - t_1) / τ_h)

    with t_1 the time of the user's first real (non-padding) behaviour (`default_granularities`: one
    RoPE head, then second, minute, hour, day, week, quarter = 91.25 days, year = 365 days), and
    R_Θ(x) the block-diagonal rotation of RoFormer: the pair (x_j, x_{j + d_h/2}) turns by x·θ_j,
    θ_j = max_wavelength^(-2j/d_h) (the half-split layout of keras-hub's RotaryEmbedding). Since
    R_Θ(b_n)^T R_Θ(b_m) = R_Θ(b_m - b_n), the score q^T k after rotation depends on bucket differences
    only, so shifting every timestamp by the same amount leaves it unchanged (exactly: b_i is computed
    from t_i - t_1).

    Precision: t_i - t_1 and the floor division are integer operations (exact; int32 holds 68 years of
    seconds, and JAX without x64 hands the model int32 times anyway). The bucket is then cast to
    float32: exact while b_i < 2^24 (194 days in a seconds head; always in the minute and coarser
    heads for any real history), beyond that rounded by up to b_i·2^-24 (2 s at two years). Every
    angle b_i·θ_j then carries an absolute error of about b_i·θ_j·2^-24 rad: below 1e-3 rad in all but
    the fastest frequencies of the seconds and minutes heads, whose angles over gaps of months are
    anyway far beyond one turn (θ_0 = 1 rad/bucket) and carry up to about one radian of error there.

    Args:
        time_granularities: τ_h in seconds per head; 0 marks a RoPE head.
        max_wavelength: the base of θ_j (10000 as in RoFormer).
    Call:
        x [B, L, H, d_h] (queries or keys), time [B, L] int seconds, valid [B, L] bool -> [B, L, H, d_h].
    """

    def __init__(self, time_granularities, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.time_granularities = [int(tau) for tau in time_granularities]
        if any(tau < 0 for tau in self.time_granularities):
            raise ZooError(
                f"RotaryPositionTime: time_granularities must be >= 0 seconds, got {self.time_granularities}"
            )
        self.max_wavelength = max_wavelength

    def positions(self, time, valid):
        """The rotation position of every behaviour in every head: [B, L, H] float32 (0 on padding)."""
        time, valid = ops.convert_to_tensor(time), ops.convert_to_tensor(valid)
        length = ops.shape(time)[1]
        first = ops.argmax(ops.cast(valid, "int32"), axis=1)[:, None]  # index of t_1, [B, 1]
        t_1 = ops.take_along_axis(time, ops.cast(first, "int32"), axis=1)  # [B, 1]
        elapsed = ops.cast(ops.where(valid, time - t_1, 0), "int32")  # t_i - t_1, exact, [B, L]
        index = ops.broadcast_to(ops.arange(length, dtype="int32")[None, :], ops.shape(elapsed))
        per_head = []
        for tau in self.time_granularities:
            per_head.append(index if tau == 0 else ops.floor_divide(elapsed, tau))
        return ops.cast(ops.stack(per_head, axis=-1), "float32")  # [B, L, H]

    def call(self, x, time, valid):
        head_dim = x.shape[-1]  # static
        half = head_dim // 2
        inverse_frequency = 1.0 / ops.power(
            float(self.max_wavelength), ops.arange(0, half, dtype="float32") * 2.0 / float(head_dim)
        )  # θ_j, [d_h/2]
        angle = self.positions(time, valid)[..., None] * inverse_frequency  # [B, L, H, d_h/2]
        cos = ops.cast(ops.cos(angle), x.dtype)
        sin = ops.cast(ops.sin(angle), x.dtype)
        x_1, x_2 = x[..., :half], x[..., half:]
        return ops.concatenate([x_1 * cos - x_2 * sin, x_2 * cos + x_1 * sin], axis=-1)

    def compute_output_shape(self, x_shape, time_shape=None, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"time_granularities": list(self.time_granularities), "max_wavelength": self.max_wavelength})
        return config
