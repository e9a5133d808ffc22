import numpy as np

from tests.testing import TestCase
from zoo.layers.senet import SENET


class SENETTest(TestCase):
    def test_layer_basics(self):
        fields = np.random.RandomState(0).rand(2, 3, 7, 4).astype("float32")
        layer, _ = self.run_layer_test(
            SENET, {"reduction_ratio": 3}, fields, (2, 3, 7, 4), expected_num_trainable_weights=2
        )
        self.assertEqual(tuple(layer.squeeze_kernel.shape), (7, 2))

    def test_matches_fibinet_equations_3_to_6(self):
        rng = np.random.RandomState(1)
        fields = rng.normal(size=(2, 6, 5)).astype("float32")  # E: f = 6 fields of k = 5
        layer = SENET(reduction_ratio=2)
        layer(fields)
        w1 = rng.normal(size=(6, 3)).astype("float32")
        w2 = rng.normal(size=(3, 6)).astype("float32")
        layer.set_weights([w1, w2])
        relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
        expected = np.zeros_like(fields)
        for b in range(2):
            z = np.array([fields[b, i].sum() / 5 for i in range(6)])  # squeeze
            a = relu(relu(z @ w1) @ w2)  # excitation
            for i in range(6):
                expected[b, i] = a[i] * fields[b, i]  # re-weight
        self.assertAllClose(layer(fields), expected, atol=1e-4)
