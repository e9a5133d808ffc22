import keras
import numpy as np
from keras import ops

from zoo.errors import ZooError
from zoo.layers.deres_block_attention import WEIGHTINGS, DeResBlockAttention
from zoo.layers.deres_gate import DeResGate
from zoo.layers.deres_transformer_layer import DeResTransformerLayer

PATHS = ("dual", "residual-only", "attnres-only")
FUSIONS = ("gated", "additive")
FEEDS = ("fused", "paths")
RESIDUAL_MATRICES = ("identity", "learnable")


def path_sublayer(d, num_heads, dual):
    """(stream width, DeResTransformerLayer kwargs) of one path's layer (see DeRes, "Budget").

    Dual paths: d/2 wide, num_heads/2 heads of d/num_heads channels, FFN 5d. One path: d wide,
    num_heads heads, FFN 4d.
    """
    if dual:
        if num_heads % 2 or d % num_heads:
            raise ZooError(
                f"DeRes with dual paths splits the heads between the paths: num_heads = {num_heads} must "
                f"be even and divide the width d = {d}"
            )
        return d // 2, dict(num_heads=num_heads // 2, key_dim=d // num_heads, ffn_units=5 * d)
    if d % num_heads:
        raise ZooError(f"DeRes width d = {d} is not divisible by num_heads = {num_heads}")
    return d, dict(num_heads=num_heads, key_dim=d // num_heads, ffn_units=4 * d)


@keras.saving.register_keras_serializable(package="zoo")
class DeRes(keras.layers.Layer):
    """DeRes, the dual-path inter-layer connector, with its L Transformer layers (DeRes Algorithm 1).

    X^(0) in R^{n x d} splits into r_0 = X[:, :d/2] (identity path) and d_0 = X[:, d/2:]
    (attention-residual path). For l = 1..L, with f^res_l, g_l the layers' residual branches
    (layers/deres_transformer_layer.py):

        Path 1 (eq 2):  r_l = r_{l-1} + f^res_l(r_{l-1})
        Path 2 (eq 3):  acc <- acc + g_l(d_{l-1});  every L/B layers the block buffer takes acc and
                        acc resets; block B_0 is d_0
                        (eq 4/8) alpha_{l,b} = softmax_b | SiLU | ReLU (w_l . RMSNorm(B_b))
                        (eq 5)   d_l = sum_b alpha_{l,b} B_b
        Gate (eq 6-7):  gamma_l = sigmoid(W_g [r_l; d_l] + b_g),  x_l = gamma_l * r_l + (1 - gamma_l) * d_l
        Output:         [x_L] projected back to d (a Dense d/2 -> d).

    Decisions where the paper is silent or ambiguous:
    - Eq 3 writes g_l(d_l), Algorithm 1 (line 9) g_l(d_{l-1}); d_l depends on the block g_l writes,
      so only Algorithm 1 can be computed: the code follows it.
    - Partial block: between two block boundaries the running sum acc is a further source of
      d_l (after the completed blocks), as in the Attention Residuals reference, where a layer
      attends to the completed blocks and to the partial sum of its own block. Without it a layer's
      own output would not reach d_l until its block completes. At a boundary acc has just been
      written and reset, so there is no partial source; with B = L (the default B = L = 8) every
      layer is a boundary and the two readings coincide. The partial block is reported as the block
      it will become (column b(l) + 1 of the alpha matrix). `attend_partial_block=False` follows
      Algorithm 1 literally instead: K (line 14) holds only BlockBuf, the completed blocks and B_0.
    - feed: read literally, Algorithm 1 never feeds x_l (l < L) onward, so only the last gate
      matters ("paths"). With "fused" (default) the identity path continues from the fused state,
      r_l = x_{l-1} + f^res_l(x_{l-1}) with x_0 = r_0 (eq 11 writes the identity Jacobian over
      x_{l-1}, and Figure 3(c) shows trained gates at every depth); Path 2 is unchanged.
    - fusion="additive" (Table 3 ablation) replaces eq 6-7 by x_l = r_l + d_l.
    - residual_matrix="learnable" (Proposition 2 ablation) replaces the identity of eq 2 by a
      learnable H_l (initialised to I): r_l = H_l r_{l-1} + f^res_l(r_{l-1}).
    - paths="residual-only" and "attnres-only" run one path over the full width d: the standard
      Pre-Norm residual Transformer (x_l = x_{l-1} + f_l(x_{l-1}); OneTrans-style) or block
      AttnRes alone (B_0 = X^(0)); they have no gate and no output projection.
    - Budget: the full-width layer (paths="residual-only") has num_heads heads of d / num_heads
      channels and an FFN of 4d hidden units: 12 d^2 weights, 12 n d^2 + 2 n^2 d multiply-adds.
      The dual paths split the heads: each half-width path layer has num_heads / 2 heads of the same
      d / num_heads channels and an FFN of 5d hidden units, so the two paths together hold exactly
      the kernel weights and matrix multiply-adds of one full-width layer (Proposition 1: "same
      parameter budget"; §complexity: "total parameters comparable to the baseline"; their biases
      and LayerNorms add 6d parameters per layer) and DeRes' overhead is the connector's own: W_g,
      w_l, the block weights and the output projection (benchmarks/deres_cost.py counts it).
    - The block weights need RMSNorm(B_b) only through w_l . RMSNorm(B_b) = (w_l . B_b) / RMS(B_b):
      each block's per-token RMS is computed once, when the block is written, not once per layer.

    Args:
        num_layers: L.
        num_heads: attention heads of every layer (dual paths: num_heads / 2 per path; must be even).
        num_blocks: B, the number of blocks (a divisor of L; B = L makes every layer a block).
        weighting: "silu" (DeRes-P, eq 8), "softmax" (DeRes-S, eq 4) or "relu".
        fusion: "gated" (eq 6-7) or "additive".
        paths: "dual", "residual-only" or "attnres-only".
        feed: "fused" or "paths" (see above).
        residual_matrix: "identity" (eq 2) or "learnable".
        attend_partial_block: whether d_l also attends to the running partial block (see above).
        dropout: residual dropout inside every Transformer layer while training (DeRes §4: 0.1).
    Call:
        x [B, n, d], valid [B, n] bool (False = padding token) -> [B, n, d].
    """

    def __init__(
        self,
        num_layers=8,
        num_heads=4,
        num_blocks=8,
        weighting="silu",
        fusion="gated",
        paths="dual",
        feed="fused",
        residual_matrix="identity",
        attend_partial_block=True,
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value, allowed in (
            ("weighting", weighting, WEIGHTINGS),
            ("fusion", fusion, FUSIONS),
            ("paths", paths, PATHS),
            ("feed", feed, FEEDS),
            ("residual_matrix", residual_matrix, RESIDUAL_MATRICES),
        ):
            if value not in allowed:
                raise ZooError(f"DeRes {name} is {value!r}; it must be one of {', '.join(allowed)}")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ZooError(f"DeRes num_layers is {num_layers!r}; it must be an integer >= 1")
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ZooError(f"DeRes num_heads is {num_heads!r}; it must be an integer >= 1")
        if not isinstance(num_blocks, int) or num_blocks < 1 or num_layers % num_blocks:
            raise ZooError(
                f"DeRes num_blocks is {num_blocks!r}; it must divide num_layers ({num_layers})"
            )
        if paths == "attnres-only" and residual_matrix == "learnable":
            raise ZooError("DeRes residual_matrix='learnable' needs an identity path; paths='attnres-only' has none")
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.num_blocks = num_blocks
        self.weighting = weighting
        self.fusion = fusion
        self.paths = paths
        self.feed = feed
        self.residual_matrix = residual_matrix
        self.attend_partial_block = bool(attend_partial_block)
        self.dropout = float(dropout)
        self.residual_layers = []
        self.attnres_layers = []
        self.block_attentions = []
        self.gates = []
        self.residual_matrices = []
        self.output_projection = None

    @property
    def has_identity_path(self):
        return self.paths in ("dual", "residual-only")

    @property
    def has_attnres_path(self):
        return self.paths in ("dual", "attnres-only")

    def build(self, x_shape, valid_shape=None):
        d = x_shape[-1]
        L = self.num_layers
        width, sublayer = path_sublayer(d, self.num_heads, dual=self.paths == "dual")
        sublayer.update(dropout=self.dropout, dtype=self.dtype_policy)
        path_shape = tuple(x_shape[:-1]) + (width,)
        if self.has_identity_path:
            self.residual_layers = [DeResTransformerLayer(**sublayer, name=f"residual_layer_{l}") for l in range(1, L + 1)]
        if self.has_attnres_path:
            self.attnres_layers = [DeResTransformerLayer(**sublayer, name=f"attnres_layer_{l}") for l in range(1, L + 1)]
        for layer in self.residual_layers + self.attnres_layers:
            layer.build(path_shape)
        if self.residual_matrix == "learnable":
            self.residual_matrices = [
                self.add_weight(shape=(width, width), initializer="identity", name=f"residual_matrix_{l}")
                for l in range(1, L + 1)
            ]
        if self.has_attnres_path:
            self.block_attentions = [
                DeResBlockAttention(self.weighting, name=f"block_attention_{l}", dtype=self.dtype_policy) for l in range(1, L + 1)
            ]
            for attention in self.block_attentions:
                attention.build((None, None, None, width))
        if self.paths == "dual":
            if self.fusion == "gated":
                self.gates = [DeResGate(name=f"gate_{l}", dtype=self.dtype_policy) for l in range(1, L + 1)]
                for gate in self.gates:
                    gate.build(path_shape, path_shape)
            self.output_projection = keras.layers.Dense(d, name="output_projection", dtype=self.dtype_policy)
            self.output_projection.build(path_shape)
        self.built = True

    # ------------------------------------------------------------------ the two paths
    def _carry(self, l, r):
        """Eq 2's carried term: r_{l-1}, or H_l r_{l-1} when residual_matrix='learnable'."""
        return r if not self.residual_matrices else ops.matmul(r, ops.transpose(self.residual_matrices[l]))

    def _attnres_step(self, l, branch, state):
        """Eq 3-5 for layer l (0-based), given g_l(d_{l-1}): updates the block buffer, returns (d_l, alpha_l).

        `state` holds the completed blocks, their per-token 1/RMS (computed once per block, since
        w . RMSNorm(B_b) = (w . B_b) / RMS(B_b)) and the running sum acc of the current block.
        """
        attention = self.block_attentions[l]
        acc = branch if state["acc"] is None else state["acc"] + branch
        if (l + 1) % (self.num_layers // self.num_blocks) == 0:
            state["blocks"].append(acc)
            state["scales"].append(attention.inverse_rms(acc))
            acc = None
        state["acc"] = acc
        blocks, scales = state["blocks"], state["scales"]
        if acc is not None and self.attend_partial_block:
            blocks, scales = blocks + [acc], scales + [attention.inverse_rms(acc)]
        alpha = attention(blocks, scales)  # [B, n, S]
        # d_l = sum_b alpha_{l,b} B_b over the list of blocks: one fused loop that reads each block
        # once, with no [B, n, S, w] stack copied every layer.
        d = alpha[..., 0:1] * blocks[0]
        for b in range(1, len(blocks)):
            d = d + alpha[..., b : b + 1] * blocks[b]
        return d, alpha

    def _forward(self, x, valid):
        """Returns (output [B, n, d], alphas: L x [B, n, S_l], gammas: L x [B, n, d/2])."""
        alphas, gammas = [], []
        if self.paths == "residual-only":
            r = x
            for l in range(self.num_layers):
                r = self._carry(l, r) + self.residual_layers[l](r, valid=valid)
            return r, alphas, gammas
        attention = self.block_attentions[0]
        if self.paths == "attnres-only":
            d, state = x, {"blocks": [x], "scales": [attention.inverse_rms(x)], "acc": None}
            for l in range(self.num_layers):
                d, alpha = self._attnres_step(l, self.attnres_layers[l](d, valid=valid), state)
                alphas.append(alpha)
            return d, alphas, gammas
        width = ops.shape(x)[-1] // 2
        r, d = x[..., :width], x[..., width:]
        fused, state = r, {"blocks": [d], "scales": [attention.inverse_rms(d)], "acc": None}
        for l in range(self.num_layers):
            source = fused if self.feed == "fused" else r
            r = self._carry(l, source) + self.residual_layers[l](source, valid=valid)
            d, alpha = self._attnres_step(l, self.attnres_layers[l](d, valid=valid), state)
            alphas.append(alpha)
            if self.fusion == "gated":
                gamma = self.gates[l](r, d)
                gammas.append(gamma)
                fused = gamma * r + (1.0 - gamma) * d
            else:
                fused = r + d
        return self.output_projection(fused), alphas, gammas

    def call(self, x, valid=None):
        return self._forward(x, valid)[0]

    def introspect(self, x, valid=None):
        """The paper's Figure 3 material for one batch.

        Returns a dict: "alpha" [B, n, L, B+1] (alpha_{l,b} per token; column b is block B_b, a
        partial block counted as the block it becomes; 0 where block b is not yet available),
        "alpha_available" NumPy bool [L, B+1], and "gamma" [B, n, L, d/2] (gated dual paths only,
        else None). "alpha" is None when there is no attention-residual path.
        """
        x = ops.convert_to_tensor(x, dtype=self.compute_dtype)
        valid = None if valid is None else ops.convert_to_tensor(valid, dtype="bool")
        _, alphas, gammas = self._forward(x, valid)
        columns = self.num_blocks + 1
        available = np.zeros((self.num_layers, columns), bool)
        padded = []
        for l, alpha in enumerate(alphas):
            sources = alpha.shape[-1]
            available[l, :sources] = True
            padded.append(ops.pad(alpha, [[0, 0], [0, 0], [0, columns - sources]]))
        return {
            "alpha": ops.stack(padded, axis=2) if padded else None,
            "alpha_available": available,
            "gamma": ops.stack(gammas, axis=2) if gammas else None,
        }

    def compute_output_shape(self, x_shape, valid_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "num_blocks": self.num_blocks,
                "weighting": self.weighting,
                "fusion": self.fusion,
                "paths": self.paths,
                "feed": self.feed,
                "residual_matrix": self.residual_matrix,
                "attend_partial_block": self.attend_partial_block,
                "dropout": self.dropout,
            }
        )
        return config
