import numpy as np

from tests.testing import TestCase
from zoo.layers.factorization_machine import FactorizationMachine


class FactorizationMachineTest(TestCase):
    def test_layer_basics(self):
        rng = np.random.RandomState(0)
        inputs = (rng.rand(2, 3, 5, 4).astype("float32"), rng.rand(2, 3, 5).astype("float32"))
        self.run_layer_test(FactorizationMachine, {}, inputs, (2, 3, 1), expected_num_trainable_weights=1)

    def test_matches_rendle_equation_1(self):
        rng = np.random.RandomState(1)
        factors = rng.normal(size=(2, 3, 5, 4)).astype("float32")  # v_i x_i per field
        linear = rng.normal(size=(2, 3, 5)).astype("float32")  # w_i x_i per field
        layer = FactorizationMachine()
        layer(factors, linear)
        w0 = rng.normal(size=(1,)).astype("float32")
        layer.set_weights([w0])
        expected = np.zeros((2, 3, 1), "float32")
        for b in range(2):
            for m in range(3):
                y = w0[0] + linear[b, m].sum()
                for i in range(5):
                    for j in range(i + 1, 5):
                        y += np.dot(factors[b, m, i], factors[b, m, j])
                expected[b, m, 0] = y
        self.assertAllClose(layer(factors, linear), expected, atol=1e-4)
