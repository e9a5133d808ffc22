import numpy as np

from tests.references import sigmoid
from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.manifold_hyper_connection import ManifoldHyperConnection


def sinkhorn_reference(logits, iterations):
    """mHC eq 8: M_0 = exp(H~res), then t_max times a column and a row normalisation."""
    m = np.exp(logits)
    for _ in range(iterations):
        m = m / m.sum(axis=-2, keepdims=True)
        m = m / m.sum(axis=-1, keepdims=True)
    return m


def mappings_reference(x, phi_pre, phi_post, phi_res, a_pre, a_post, a_res, b_pre, b_post, b_res, iterations, eps=1e-6):
    """mHC eq 7-8 for streams x [B, T, n, C], written with vec(x) in R^{1 x nC} and phi in R^{nC x ...}."""
    batch, tokens, n, c = x.shape
    vec = x.reshape(batch, tokens, n * c)
    normed = vec / np.sqrt(np.mean(vec**2, axis=-1, keepdims=True) + eps)
    h_pre = sigmoid(a_pre * normed @ phi_pre.reshape(n * c, n) + b_pre)
    h_post = 2.0 * sigmoid(a_post * normed @ phi_post.reshape(n * c, n) + b_post)
    res = a_res * (normed @ phi_res.reshape(n * c, n * n)).reshape(batch, tokens, n, n) + b_res
    return h_pre, h_post, sinkhorn_reference(res, iterations)


class ManifoldHyperConnectionTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype("float32")
        self.run_layer_test(ManifoldHyperConnection, {"expansion_rate": 4, "sinkhorn_iterations": 5}, x, (2, 3, 4))

    def test_matches_equations_7_and_8(self):
        rng = np.random.default_rng(1)
        n, c, iterations = 3, 4, 6
        x = rng.normal(size=(2, 5, n, c)).astype("float32")
        layer = ManifoldHyperConnection(expansion_rate=n, sinkhorn_iterations=iterations)
        runner = LayerRunner(layer, x)
        weights = [
            rng.normal(size=(n, c, n)), rng.normal(size=(n, c, n)), rng.normal(size=(n, c, n, n)),
            np.array(0.7), np.array(-0.4), np.array(1.3),
            rng.normal(size=n), rng.normal(size=n), rng.normal(size=(n, n)),
        ]
        layer.set_weights([w.astype("float32") for w in weights])
        expected = mappings_reference(x.astype("float64"), *weights, iterations)
        for got, want in zip(runner(x), expected):
            self.assertAllClose(got, want, atol=1e-5, rtol=1e-4)

    def test_residual_mapping_is_doubly_stochastic(self):
        x = np.random.default_rng(2).normal(size=(2, 3, 4, 6)).astype("float32")
        layer = ManifoldHyperConnection(expansion_rate=4, sinkhorn_iterations=20)
        layer(x)
        layer.alpha_res.assign(1.0)  # away from the near-identity start
        h_pre, h_post, h_res = (np.asarray(t) for t in LayerRunner(layer, x)(x))
        self.assertTrue(np.all(h_res >= 0) and np.all(h_pre > 0) and np.all((h_post > 0) & (h_post < 2)))
        self.assertAllClose(h_res.sum(axis=-1), np.ones((2, 3, 4)), atol=1e-5)
        self.assertAllClose(h_res.sum(axis=-2), np.ones((2, 3, 4)), atol=1e-2)  # t_max iterations: close, not exact

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "expansion_rate is 1"):
            ManifoldHyperConnection(expansion_rate=1)
        with self.assertRaisesRegex(ZooError, "sinkhorn_iterations is 0"):
            ManifoldHyperConnection(sinkhorn_iterations=0)
