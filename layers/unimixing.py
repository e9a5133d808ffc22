import keras
from keras import ops

from zoo.errors import ZooError


def symmetric_sinkhorn(logits, temperature, iterations):
    """A symmetric doubly-stochastic relaxation of a permutation: the logits are symmetrised,
    (W + W^T) / 2, divided by the temperature tau, exponentiated, and normalised alternately over
    rows and columns `iterations` times (Sinkhorn-Knopp). logits [..., n, n] -> [..., n, n] float32."""
    logits = ops.cast(logits, "float32")
    logits = 0.5 * (logits + ops.swapaxes(logits, -1, -2)) / temperature
    m = ops.exp(logits - ops.max(logits, axis=(-2, -1), keepdims=True))
    for _ in range(iterations):
        m = m / ops.sum(m, axis=-1, keepdims=True)  # rows sum to 1
        m = m / ops.sum(m, axis=-2, keepdims=True)  # columns sum to 1
    return m


@keras.saving.register_keras_serializable(package="zoo")
class UniMixing(keras.layers.Layer):
    """UniMixer's parameterised token mixing (UniMixing; Ha et al., Kuaishou 2026, "UniMixer: A
    Unified Architecture for Scaling Laws in Recommendation Systems", §4.3).

    RankMixer's token mixing (layers/token_mixing.py) permutes the coordinates of the flattened
    tokens x = vec(X) in R^{T D}: it moves D/H-wide blocks. UniMixer writes that permutation as a
    block (Kronecker-like) product and learns it: x is cut into N = T D / B blocks x_1..x_N of width
    B, each block is mixed inside by its own B x B matrix and the blocks are mixed by one N x N matrix,

        h_i = x_i W_B^i,      o_j = sum_i W_G[j, i] h_i,      UniMixing(X) = reshape(o, [T, D]),

    with W_B^i and W_G constrained to symmetric doubly-stochastic matrices (the Birkhoff polytope
    holds the permutations as its corners): W = Sinkhorn(exp(((W~ + W~^T) / 2) / tau)). With
    B = D / H, W_B^i = I and W_G the block permutation (t, h) -> (h, t), this is RankMixer's mixing
    exactly (T = H makes that permutation symmetric); the number of heads no longer has to equal
    the number of tokens.

    Where the paper's text was not available, this follows its public re-implementations, and
    decides: the logits start N(0, 1); tau is a fixed hyperparameter (the re-implementations anneal
    it during training); 5 Sinkhorn iterations, rows then columns; Sinkhorn in float32.
    UniMixing-Lite (a basis-combined W_B and a low-rank W_G) is not implemented.

    Args:
        block_size: B (must divide T D).
        sinkhorn_iterations: the Sinkhorn-Knopp iterations.
        temperature: tau.
    Call:
        x [B, T, D] -> [B, T, D] (T and D fixed when built).
    """

    def __init__(self, block_size, sinkhorn_iterations=5, temperature=1.0, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("block_size", block_size), ("sinkhorn_iterations", sinkhorn_iterations)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ZooError(f"UniMixing {name} is {value!r}; it must be an integer >= 1")
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature <= 0:
            raise ZooError(f"UniMixing temperature is {temperature!r}; it must be a number > 0")
        self.block_size = block_size
        self.sinkhorn_iterations = sinkhorn_iterations
        self.temperature = float(temperature)

    def build(self, x_shape):
        t, d = x_shape[-2], x_shape[-1]
        if (t * d) % self.block_size:
            raise ZooError(
                f"UniMixing block_size B = {self.block_size} does not divide T x D = {t} x {d} = {t * d}"
            )
        n, b = t * d // self.block_size, self.block_size
        self.local_logits = self.add_weight(
            shape=(n, b, b), initializer=keras.initializers.RandomNormal(stddev=1.0), name="local_logits"
        )
        self.global_logits = self.add_weight(
            shape=(n, n), initializer=keras.initializers.RandomNormal(stddev=1.0), name="global_logits"
        )
        self.built = True

    def mixing_matrices(self):
        """(W_B [N, B, B], W_G [N, N]), both symmetric and doubly stochastic, float32."""
        return (
            symmetric_sinkhorn(self.local_logits, self.temperature, self.sinkhorn_iterations),
            symmetric_sinkhorn(self.global_logits, self.temperature, self.sinkhorn_iterations),
        )

    def call(self, x):
        t, d = x.shape[-2], x.shape[-1]
        local, global_ = (ops.cast(w, x.dtype) for w in self.mixing_matrices())
        blocks = ops.reshape(x, (-1, t * d // self.block_size, self.block_size))  # x_i [B, N, B]
        mixed = ops.einsum("mn,bnj->bmj", global_, ops.einsum("bni,nij->bnj", blocks, local))
        return ops.reshape(mixed, (-1, t, d))

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "block_size": self.block_size,
                "sinkhorn_iterations": self.sinkhorn_iterations,
                "temperature": self.temperature,
            }
        )
        return config
