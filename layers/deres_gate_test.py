import numpy as np

from tests.testing import TestCase
from zoo.layers.deres_gate import DeResGate


class DeResGateTest(TestCase):
    def test_layer_basics(self):
        r = np.random.rand(2, 3, 4).astype("float32")
        self.run_layer_test(DeResGate, {}, (r, r + 1.0), (2, 3, 4))

    def test_matches_eq_6(self):
        rng = np.random.default_rng(0)
        r = rng.normal(size=(2, 3, 4)).astype("float32")
        d = rng.normal(size=(2, 3, 4)).astype("float32")
        w_g = rng.normal(size=(4, 8)).astype("float32")  # W_g in R^{(d/2) x d}
        b_g = rng.normal(size=4).astype("float32")
        gate = DeResGate()
        gate(r, d)
        gate.set_weights([w_g.T, b_g])
        expected = 1.0 / (1.0 + np.exp(-(np.einsum("ij,bnj->bni", w_g, np.concatenate([r, d], -1)) + b_g)))
        self.assertAllClose(gate(r, d), expected, atol=1e-5)
