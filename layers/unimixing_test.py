import numpy as np

from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.token_mixing_test import mixing_reference
from zoo.layers.unimixing import UniMixing


def sinkhorn_reference(logits, temperature, iterations):
    """Symmetrise, divide by tau, exponentiate, then alternate row and column normalisations."""
    m = np.exp(0.5 * (logits + np.swapaxes(logits, -1, -2)) / temperature)
    for _ in range(iterations):
        m = m / m.sum(axis=-1, keepdims=True)
        m = m / m.sum(axis=-2, keepdims=True)
    return m


def unimixing_reference(x, local_logits, global_logits, block, temperature, iterations):
    """h_i = x_i W_B^i over the B-wide blocks of vec(X), o_j = sum_i W_G[j, i] h_i, back to [T, D]."""
    batch, tokens, d = x.shape
    w_b = sinkhorn_reference(local_logits, temperature, iterations)
    w_g = sinkhorn_reference(global_logits, temperature, iterations)
    blocks = x.reshape(batch, tokens * d // block, block)
    h = np.stack([blocks[:, i] @ w_b[i] for i in range(blocks.shape[1])], axis=1)
    o = np.stack([sum(w_g[j, i] * h[:, i] for i in range(h.shape[1])) for j in range(h.shape[1])], axis=1)
    return o.reshape(batch, tokens, d)


class UniMixingTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
        self.run_layer_test(UniMixing, {"block_size": 2}, x, (2, 3, 4), expected_num_trainable_weights=2)

    def test_matches_the_block_mixing_equation(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, 3, 4)).astype("float32")
        layer = UniMixing(block_size=2, sinkhorn_iterations=4, temperature=0.5)
        runner = LayerRunner(layer, x)
        local, global_ = rng.normal(size=(6, 2, 2)), rng.normal(size=(6, 6))
        layer.set_weights([local.astype("float32"), global_.astype("float32")])
        expected = unimixing_reference(x.astype("float64"), local, global_, 2, 0.5, 4)
        self.assertAllClose(runner(x), expected, atol=1e-5, rtol=1e-4)
        converged = UniMixing(block_size=2, sinkhorn_iterations=30, temperature=0.5)
        converged(x)
        converged.set_weights(layer.get_weights())
        for w in (to_numpy(w) for w in converged.mixing_matrices()):  # symmetric and doubly stochastic
            self.assertAllClose(w.sum(axis=-1), np.ones(w.shape[:-1]), atol=5e-3)
            self.assertAllClose(w.sum(axis=-2), np.ones(w.shape[:-1]), atol=1e-5)
            self.assertAllClose(w, np.swapaxes(w, -1, -2), atol=5e-3)

    def test_tokenmixer_is_a_corner(self):
        # W_B = I and W_G = RankMixer's block permutation (t, h) -> (h, t) with B = D / H, T = H: at a low
        # temperature the Sinkhorn matrices reach these corners and UniMixing is RankMixer's mixing.
        tokens = heads = 3
        d = 6
        block = d // heads
        x = np.random.default_rng(2).normal(size=(2, tokens, d)).astype("float32")
        layer = UniMixing(block_size=block, sinkhorn_iterations=20, temperature=0.05)
        runner = LayerRunner(layer, x)
        n = tokens * heads
        local = np.where(np.eye(block, dtype=bool), 1.0, -1.0) * np.ones((n, 1, 1))
        permutation = np.zeros((n, n))
        for t in range(tokens):
            for h in range(heads):
                permutation[h * tokens + t, t * heads + h] = 1.0
        layer.set_weights([local.astype("float32"), (2.0 * permutation - 1.0).astype("float32")])
        self.assertAllClose(runner(x), mixing_reference(x, heads), atol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "block_size is 0"):
            UniMixing(block_size=0)
        with self.assertRaisesRegex(ZooError, "temperature is 0"):
            UniMixing(block_size=2, temperature=0)
        with self.assertRaisesRegex(ZooError, "does not divide"):
            UniMixing(block_size=5)(np.zeros((1, 3, 4), "float32"))
