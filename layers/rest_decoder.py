import keras
from keras import ops

from zoo.errors import ZooError
from zoo.layers.pfkv import PFKVDecoderLayer
from zoo.layers.prefix_valid_mask import PrefixValidMask

TOKEN_TYPES = ("cls", "context", "user", "cand")  # the query token types of ReST §2.1, in token order


@keras.saving.register_keras_serializable(package="zoo")
class ReSTDecoder(keras.layers.Layer):
    """The light cross decoder C of ReST and its prediction head (§2.2, Figure 1 right), run per sample.

        Z = [z_cls, z_context, z_user, z_cand]       K query tokens per sample, each of width d
        allowed[m, i] = valid_i and t_i < t_m         the prefix-valid mask (§2.4)
        for l = 1..depth:  Z = PF-KV_l(Z, H, allowed)  (K = V = H, token-specific parameters)
        pctr = σ(MLP(concat of the K decoded tokens))

    z_cls is a learned vector; z_context = Dense_d([ctx, num]), z_user = Dense_d(user) and
    z_cand = Dense_d(a) project the sample's features (`token_types` says which of the context and user
    tokens the schema has; [CLS] and the candidate are always there). Sample m reads only the memory of
    the real behaviours strictly before its own time `cand_time[m]`, so M samples of one user over the
    union of their histories is shared-prefix training (ULT), and every candidate of a request whose
    history precedes it sees the whole history. The head's MLP (ReLU hidden layers, then one logit) is
    the paper's prediction head ([256, 128, 64] on the public data sets).

    Args:
        model_dim: d, the width of the query tokens (and of the memory H).
        num_heads: heads of the PF-KV cross-attention.
        depth: the number of PF-KV layers.
        ffn_dim: inner width of the token-specific SwiGLU FFNs.
        mlp_units: hidden widths of the prediction head.
        token_types: the query token types in order, a subsequence of ("cls", "context", "user",
            "cand") holding "cls" and "cand".
        epsilon: LayerNorm epsilon of the PF-KV layers.
    Call:
        memory H [B, L, d], memory_valid [B, L] bool, hist_time [B, L] int seconds,
        cand a [B, M, D_a], cand_time [B, M] int seconds, context [B, D_c] (with the "context" token),
        user [B, D_u] (with the "user" token), return_decoded=False
        -> pctr [B, M], or (pctr, Z [B, M, K, d]) with return_decoded (the decoded tokens the training
        losses of §2.3 read).
    """

    def __init__(
        self,
        model_dim,
        num_heads,
        depth,
        ffn_dim,
        mlp_units=(256, 128, 64),
        token_types=TOKEN_TYPES,
        epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        token_types = tuple(token_types)
        if token_types != tuple(t for t in TOKEN_TYPES if t in token_types) or not {"cls", "cand"} <= set(token_types):
            raise ZooError(
                f"ReSTDecoder: token_types is {list(token_types)}; it must keep the order {list(TOKEN_TYPES)} "
                "and hold 'cls' and 'cand'"
            )
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.depth = depth
        self.ffn_dim = ffn_dim
        self.mlp_units = tuple(mlp_units)
        self.token_types = token_types
        self.epsilon = epsilon
        policy = self.dtype_policy
        self.token_projections = {
            t: keras.layers.Dense(model_dim, dtype=policy, name=f"{t}_token") for t in token_types if t != "cls"
        }
        self.prefix_valid_mask = PrefixValidMask(dtype=policy, name="prefix_valid_mask")
        self.decoder_layers = [
            PFKVDecoderLayer(num_heads, len(token_types), ffn_dim, epsilon=epsilon, dtype=policy, name=f"layer_{l}")
            for l in range(1, depth + 1)
        ]
        self.head = [
            keras.layers.Dense(units, activation="relu", dtype=policy, name=f"head_{i}")
            for i, units in enumerate(self.mlp_units)
        ]
        self.head_logit = keras.layers.Dense(1, dtype=policy, name="head_logit")

    def build(
        self,
        memory_shape,
        memory_valid_shape=None,
        hist_time_shape=None,
        cand_shape=None,
        cand_time_shape=None,
        context_shape=None,
        user_shape=None,
    ):
        d = self.model_dim
        if memory_shape[-1] != d:
            raise ZooError(f"ReSTDecoder: the memory H has width {memory_shape[-1]} but model_dim is {d}")
        self.cls_token = self.add_weight(shape=(d,), initializer="uniform", name="cls_token")
        inputs = {"context": context_shape, "user": user_shape, "cand": cand_shape}
        for token, layer in self.token_projections.items():
            if inputs[token] is None:
                raise ZooError(f"ReSTDecoder: the {token} token needs the `{token}` input")
            layer.build(inputs[token])
        batch, m = cand_shape[0], cand_shape[1]
        tokens_shape = (batch, m, len(self.token_types), d)
        for layer in self.decoder_layers:
            layer.build(tokens_shape, memory_shape)
        width = len(self.token_types) * d
        for layer, units in zip(self.head, self.mlp_units):
            layer.build((batch, m, width))
            width = units
        self.head_logit.build((batch, m, width))
        self.built = True

    def query_tokens(self, cand, context=None, user=None):
        """Z [B, M, K, d]: the sample's [CLS], context, user and candidate tokens, in `token_types` order."""
        z_cand = self.token_projections["cand"](cand)  # [B, M, d]
        zeros = ops.zeros_like(z_cand)
        per_row = {"context": context, "user": user}  # one token per row, the same for its M samples
        tokens = {"cls": zeros + ops.cast(self.cls_token, zeros.dtype), "cand": z_cand}
        for token in ("context", "user"):
            if token in self.token_types:
                tokens[token] = zeros + self.token_projections[token](per_row[token])[:, None, :]
        return ops.stack([tokens[t] for t in self.token_types], axis=2)

    def call(self, memory, memory_valid, hist_time, cand, cand_time, context=None, user=None, return_decoded=False):
        allowed = self.prefix_valid_mask(memory_valid, hist_time, cand_time)  # [B, M, L]
        z = self.query_tokens(cand, context, user)
        for layer in self.decoder_layers:
            z = layer(z, memory, allowed)
        x = ops.concatenate([z[:, :, i] for i in range(len(self.token_types))], axis=-1)  # [B, M, K d]
        for layer in self.head:
            x = layer(x)
        pctr = ops.sigmoid(ops.squeeze(self.head_logit(x), axis=-1))
        return (pctr, z) if return_decoded else pctr

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "model_dim": self.model_dim,
                "num_heads": self.num_heads,
                "depth": self.depth,
                "ffn_dim": self.ffn_dim,
                "mlp_units": list(self.mlp_units),
                "token_types": list(self.token_types),
                "epsilon": self.epsilon,
            }
        )
        return config
