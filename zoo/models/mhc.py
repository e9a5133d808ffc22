import keras

from zoo.errors import ZooError
from zoo.layers.mhc_stack import MHCStack
from zoo.models.deres_backbone import ctr_transformer_graph
from zoo.models.zoo_model import ZooModel
from zoo.registry import register


@register(
    "mhc",
    description="mHC: manifold-constrained hyper-connections (n residual streams, Sinkhorn-projected mixing) "
    "on DeRes' CTR Transformer backbone",
    paper="Xie et al., mHC: Manifold-Constrained Hyper-Connections (DeepSeek, 2025), as re-implemented for CTR in "
    "DeRes (Table 2 baseline)",
)
@keras.saving.register_keras_serializable(package="zoo")
class MHC(ZooModel):
    """mHC on DeRes' CTR Transformer backbone (zoo/models/deres_backbone.py): the same tokens, layers,
    [CLS] read-out and head as ctr_transformer, with the residual connection replaced by
    manifold-constrained hyper-connections (layers/mhc_stack.py).

    mHC (Xie et al., 2025, eq 3, 7-8): the residual stream becomes n streams x in R^{n x d} per
    token; every attention and FFN sublayer F reads H^pre x and writes
        x <- H^res x + H^post^T F(H^pre x),
    H^pre = sigmoid(.), H^post = 2 sigmoid(.), H^res = Sinkhorn-Knopp(.) (doubly stochastic, t_max
    iterations), each computed per token from RMSNorm(vec(x)) (dynamic) plus a learned bias
    (static), gated by scalars a^* that start at 0.01. The backbone's [CLS] token reads the sum of
    the n streams after the last layer.

    Sizes: DeRes' shared backbone (L = 8, d = 128, 4 heads) and mHC's n = 4 streams, t_max = 20.
    mHC adds per sublayer n^3 d + 2 n^2 d + n^2 + 2n + 3 weights (12,315 at d = 128, n = 4).
    Decisions where the papers are silent are listed in layers/manifold_hyper_connection.py and
    layers/mhc_stack.py (one hyper-connection per sublayer, 2L in all, as DeRes counts them; the
    biases start with the streams' mean as the sublayer input, H^post = 1 and H^res near I).

    Args:
        schema: the input contract (needs cand_ features).
        num_layers: L.  width: d.  num_heads: attention heads.
        expansion_rate: n, the number of residual streams (>= 2).
        sinkhorn_iterations: t_max.
        dropout: residual dropout on every sublayer output while training (DeRes §4: 0.1).
    """

    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Per row, head and layer (zoo.budget): each candidate's pass over [CLS], its F field tokens and L behaviour tokens."""
        return M * (1 + F + L) ** 2

    def __init__(
        self,
        schema,
        num_layers=8,
        width=128,
        num_heads=4,
        expansion_rate=4,
        sinkhorn_iterations=20,
        dropout=0.1,
        **kwargs,
    ):
        if width % num_heads:
            raise ZooError(f"mhc width {width} is not divisible by num_heads {num_heads}")
        connector = MHCStack(
            num_layers=num_layers,
            num_heads=num_heads,
            expansion_rate=expansion_rate,
            sinkhorn_iterations=sinkhorn_iterations,
            dropout=dropout,
            name="connector",
        )
        schema, inputs, pctr = ctr_transformer_graph(schema, connector, width)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)
