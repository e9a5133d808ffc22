import numpy as np

from tests.references import sigmoid
from tests.testing import TestCase
from zoo.layers.target_attention import TargetAttention


class TargetAttentionTest(TestCase):
    def test_layer_basics(self):
        rng = np.random.RandomState(0)
        inputs = (
            rng.rand(2, 3, 4).astype("float32"),
            rng.rand(2, 5, 4).astype("float32"),
            np.array([[0, 1, 1, 1, 1], [0, 0, 0, 1, 1]], bool),
        )
        self.run_layer_test(TargetAttention, {"units": (6,)}, inputs, (2, 3, 4))

    def test_matches_din_equation_3(self):
        rng = np.random.RandomState(1)
        cand = rng.normal(size=(2, 2, 3)).astype("float32")
        hist = rng.normal(size=(2, 4, 3)).astype("float32")
        valid = np.array([[False, True, True, True], [False, False, True, True]])
        layer = TargetAttention(units=(5,))
        layer(cand, hist, valid)
        w1, b1 = rng.normal(size=(12, 5)).astype("float32"), rng.normal(size=5).astype("float32")
        w2, b2 = rng.normal(size=(5, 1)).astype("float32"), rng.normal(size=1).astype("float32")
        layer.set_weights([w1, b1, w2, b2])
        expected = np.zeros_like(cand)
        for b in range(2):
            for m in range(2):
                for j in range(4):
                    if not valid[b, j]:
                        continue
                    e, v = hist[b, j], cand[b, m]
                    w = (sigmoid(np.concatenate([e, v, e - v, e * v]) @ w1 + b1) @ w2 + b2)[0]
                    expected[b, m] += w * e
        self.assertAllClose(layer(cand, hist, valid), expected, atol=1e-4)

    def test_padding_never_contributes(self):
        rng = np.random.RandomState(2)
        cand = rng.rand(1, 1, 3).astype("float32")
        hist = rng.rand(1, 3, 3).astype("float32")
        valid = np.array([[False, True, True]])
        layer = TargetAttention(units=(4,))
        before = layer(cand, hist, valid)
        hist[0, 0] += 10.0
        self.assertAllClose(layer(cand, hist, valid), before)
