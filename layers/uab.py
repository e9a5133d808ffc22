import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.afnet import AFNet
from zoo.layers.suan_self_attention import SuanSelfAttention
from zoo.layers.swiglu import SwiGLU


@keras.saving.register_keras_serializable(package="zoo")
class UAB(keras.layers.Layer):
    """SUAN §3.2 unified attention block, in the order of the authors' code:

        x = RMSNorm(E_s)                         (eq 2, pre-norm)
        x = RMSNorm(SelfAttn(x) + x)             (eq 3-6, `SuanSelfAttention`)
        x = RMSNorm(AFNet(x, E_p) + x)           (eq 7-15, `AFNet`)
        out = SwiGLU(x) + x                      (eq 16, `SwiGLU`)

    RMSNorm is keras.layers.RMSNormalization with eps 1e-6. The block runs on the history [B, L, d]
    and the candidates [B, M, d] of the target-aware sequence; candidate m reads the behaviours
    `history_visible[m]` allows (real and before its exposure time) in the self-attention and, with
    alignment_pool="causal", in AFNet's pool. With alignment_pool="causal" the block is causal and
    candidates never reach history positions, so `encode_history` (run once per request, for all
    candidates) and `encode_candidates` (run per parallel pass on its state, with each candidate's
    visibility) compute exactly what `call` does: a history token's output depends only on the
    behaviours up to it (the history is chronological), so the ones a candidate may read carry
    nothing from its future.

    Args:
        num_heads: h (self- and cross-attention).
        sequence_length: L.
        window_size, dilation: k and r of LightSUAN's sparse attention (None, 1: full attention).
        alignment_pool: "causal" or "global" (see AFNet).
        relative_bias: a shared `RelativeAttentionBias` for the self-attention (see SuanSelfAttention;
            SuanEncoder passes one to every block); None: the block owns its eq 4 tables.
    """

    def __init__(self, num_heads, sequence_length, window_size=None, dilation=1, alignment_pool="causal",
                 relative_bias=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.sequence_length = int(sequence_length)
        self.window_size = window_size
        self.dilation = int(dilation)
        self.alignment_pool = alignment_pool
        policy = self.dtype_policy
        self.input_norm = keras.layers.RMSNormalization(epsilon=1e-6, dtype=policy, name="input_norm")
        self.attention = SuanSelfAttention(
            num_heads, sequence_length, window_size, dilation, relative_bias=relative_bias, dtype=policy,
            name="self_attention",
        )
        self.attention_norm = keras.layers.RMSNormalization(epsilon=1e-6, dtype=policy, name="attention_norm")
        self.afnet = AFNet(num_heads, alignment_pool, dtype=policy, name="afnet")
        self.afnet_norm = keras.layers.RMSNormalization(epsilon=1e-6, dtype=policy, name="afnet_norm")
        self.ffn = SwiGLU(dtype=policy, name="ffn")

    def build(self, history_shape, candidates_shape=None, profile_shape=None, history_valid_shape=None,
              history_visible_shape=None, history_times_shape=None, candidate_times_shape=None):
        for norm in (self.input_norm, self.attention_norm, self.afnet_norm):
            norm.build(history_shape)
        self.attention.build(history_shape)
        self.afnet.build(history_shape, profile_shape=profile_shape)
        self.ffn.build(history_shape)
        self.built = True

    def encode_history(self, history, profile, history_valid, history_times, history_output=True):
        """History part: (block output [B, L, d], state the candidate passes read). NumPy arrays are
        accepted (a public entry point, also run outside __call__). `history_output=False` returns (None,
        state): the state needs the self-attention and AFNet's cross-attention terms, not the history's
        alignment, norm and SwiGLU, which an eager backend (torch) would otherwise run for nothing on the
        last block."""
        history, profile, history_valid, history_times = (
            ops.convert_to_tensor(x) for x in (history, profile, history_valid, history_times)
        )
        x = self.input_norm(history)
        e_self, keys, values = self.attention.attend_history(x, history_valid, history_times)
        x = self.attention_norm(e_self + x)
        keys, values, _, times = self.attention.candidate_context(keys, values, history_valid, history_times)
        if not history_output:
            return None, (keys, values, times, self.afnet.history_terms(x, profile, history_valid))
        afn, terms = self.afnet.encode_history(x, profile, history_valid)
        x = self.afnet_norm(afn + x)
        return self.ffn(x) + x, (keys, values, times, terms)

    def encode_candidates(self, candidates, profile, state, history_visible, candidate_times):
        """Candidate part on the history state, history_visible [B, M, L]: block output [B, M, d]. NumPy
        arrays are accepted."""
        if self.alignment_pool != "causal":
            raise ZooError("the history cache needs alignment_pool='causal' (the global mean mixes candidates)")
        candidates, profile, history_visible, candidate_times = (
            ops.convert_to_tensor(x) for x in (candidates, profile, history_visible, candidate_times)
        )
        keys, values, times, terms = keras.tree.map_structure(ops.convert_to_tensor, state)
        context = (keys, values, self.attention.candidate_mask(history_visible), times)
        x = self.input_norm(candidates)
        x = self.attention_norm(self.attention.attend_candidates(x, context, candidate_times) + x)
        x = self.afnet_norm(self.afnet.encode_candidates(x, profile, terms, history_visible) + x)
        return self.ffn(x) + x

    def call(self, history, candidates, profile, history_valid, history_visible, history_times, candidate_times):
        """Returns (history output [B, L, d], candidate output [B, M, d])."""
        history_valid = ops.cast(history_valid, "bool")
        if self.alignment_pool == "causal":
            history_out, state = self.encode_history(history, profile, history_valid, history_times)
            return history_out, self.encode_candidates(candidates, profile, state, history_visible, candidate_times)
        x_h, x_c = self.input_norm(history), self.input_norm(candidates)
        s_h, s_c = self.attention(x_h, x_c, history_valid, history_visible, history_times, candidate_times)
        x_h, x_c = self.attention_norm(s_h + x_h), self.attention_norm(s_c + x_c)
        a_h, a_c = self.afnet(x_h, x_c, profile, history_valid, history_visible)
        x_h, x_c = self.afnet_norm(a_h + x_h), self.afnet_norm(a_c + x_c)
        return self.ffn(x_h) + x_h, self.ffn(x_c) + x_c

    def compute_output_spec(self, history, candidates, *args):
        return (
            keras.KerasTensor(history.shape, dtype=self.compute_dtype),
            keras.KerasTensor(candidates.shape, dtype=self.compute_dtype),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "sequence_length": self.sequence_length,
                "window_size": self.window_size,
                "dilation": self.dilation,
                "alignment_pool": self.alignment_pool,
            }
        )
        return config
