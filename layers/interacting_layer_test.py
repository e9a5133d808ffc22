import numpy as np

from tests.references import softmax
from tests.testing import TestCase
from zoo.layers.interacting_layer import InteractingLayer


class InteractingLayerTest(TestCase):
    def test_layer_basics(self):
        fields = np.random.RandomState(0).rand(3, 5, 4).astype("float32")
        self.run_layer_test(
            InteractingLayer, {"num_heads": 2, "head_dim": 3}, fields, (3, 5, 6), expected_num_trainable_weights=4
        )

    def test_matches_autoint_equations_5_to_8(self):
        rng = np.random.RandomState(1)
        n, f, d, h, e = 2, 4, 3, 2, 5
        fields = rng.normal(size=(n, f, d)).astype("float32")
        layer = InteractingLayer(num_heads=h, head_dim=e)
        layer(fields)
        w_query, w_key, w_value = (rng.normal(size=(h, e, d)).astype("float32") for _ in range(3))  # W^(h) in R^{d' x d}
        w_res = rng.normal(size=(h * e, d)).astype("float32")
        layer.set_weights([w.transpose(2, 0, 1) for w in (w_query, w_key, w_value)] + [w_res.T])
        expected = np.zeros((n, f, h * e), "float32")
        for b in range(n):
            for m in range(f):
                heads = []
                for head in range(h):
                    psi = np.array([(w_query[head] @ fields[b, m]) @ (w_key[head] @ fields[b, k]) for k in range(f)])
                    alpha = softmax(psi)
                    heads.append(sum(alpha[k] * (w_value[head] @ fields[b, k]) for k in range(f)))
                expected[b, m] = np.maximum(np.concatenate(heads) + w_res @ fields[b, m], 0.0)
        self.assertAllClose(layer(fields), expected, atol=1e-4)
