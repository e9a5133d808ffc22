import numpy as np

from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.layers.bilinear_interaction import BilinearInteraction


class BilinearInteractionTest(TestCase):
    def test_layer_basics(self):
        fields = np.random.RandomState(0).rand(2, 3, 4, 5).astype("float32")
        for bilinear_type, kernel in (("field-all", (5, 5)), ("field-each", (3, 5, 5)), ("field-interaction", (6, 5, 5))):
            with self.subTest(bilinear_type=bilinear_type):
                layer, _ = self.run_layer_test(
                    BilinearInteraction, {"bilinear_type": bilinear_type}, fields, (2, 3, 6, 5),
                    expected_num_trainable_weights=1,
                )
                self.assertEqual(tuple(layer.kernel.shape), kernel)

    def test_matches_fibinet_equations_7_to_9(self):
        rng = np.random.RandomState(1)
        f, k = 4, 3
        v = rng.normal(size=(2, f, k)).astype("float32")
        pairs = [(i, j) for i in range(f) for j in range(i + 1, f)]
        w_all = rng.normal(size=(k, k)).astype("float32")
        w_each = rng.normal(size=(f - 1, k, k)).astype("float32")
        w_pair = rng.normal(size=(len(pairs), k, k)).astype("float32")
        for bilinear_type, weight, matrix in (
            ("field-all", w_all, lambda i, j, n: w_all),
            ("field-each", w_each, lambda i, j, n: w_each[i]),
            ("field-interaction", w_pair, lambda i, j, n: w_pair[n]),
        ):
            with self.subTest(bilinear_type=bilinear_type):
                layer = BilinearInteraction(bilinear_type)
                layer(v)
                layer.set_weights([weight])
                expected = np.stack(
                    [np.stack([(v[b, i] @ matrix(i, j, n)) * v[b, j] for n, (i, j) in enumerate(pairs)]) for b in range(2)]
                )
                self.assertAllClose(layer(v), expected, atol=1e-4)

    def test_unknown_type(self):
        with self.assertRaisesRegex(ZooError, "bilinear_type is 'field-pair'; it must be one of"):
            BilinearInteraction("field-pair")
