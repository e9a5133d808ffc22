import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class PrefixValidMask(keras.layers.Layer):
    """The prefix-valid causal mask of user-level shared-prefix training, ULT (ReST §2.4).

        allowed[b, m, i] = valid[b, i]  and  t_i < t_m

    Several samples m of one user (each with its own time t_m, `cand_time`) share one encoder pass over
    the union of the user's behaviours (`hist_*`); sample m may read only the behaviours strictly before
    its own time. With the causal encoder, the memory H_i depends only on behaviours 1..i, so sample m
    sees exactly what a pass over its own history would produce. In ordinary rows (history strictly
    before the candidate's time) the mask equals `valid`. Times must be sorted oldest first (see
    `zoo.Schema.validate`).

    Call:
        valid [B, L] bool, history_time [B, L] int seconds, sample_time [B, M] int seconds
        -> allowed [B, M, L] bool.
    """

    def call(self, valid, history_time, sample_time):
        before = ops.less(history_time[:, None, :], sample_time[:, :, None])  # [B, M, L]
        return ops.logical_and(valid[:, None, :], before)

    def compute_output_spec(self, valid, history_time, sample_time):
        return keras.KerasTensor((valid.shape[0], sample_time.shape[1], valid.shape[1]), dtype="bool")
