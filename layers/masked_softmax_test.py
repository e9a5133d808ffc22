import numpy as np

from tests.references import softmax
from tests.testing import TestCase
from zoo.layers.masked_softmax import masked_softmax


class MaskedSoftmaxTest(TestCase):
    def test_matches_softmax_over_allowed_keys(self):
        rng = np.random.RandomState(0)
        logits = rng.normal(size=(2, 3, 4, 5)).astype("float32")  # [B, H, Lq, Lk]
        allowed = rng.rand(2, 1, 4, 5) > 0.4  # broadcast over heads
        allowed[0, 0, 1] = False  # a query with no allowed key
        expected = np.zeros_like(logits)
        for b, h, q in np.ndindex(2, 3, 4):
            keys = allowed[b, 0, q]
            if keys.any():
                expected[b, h, q, keys] = softmax(logits[b, h, q, keys])
        out = masked_softmax(logits, allowed)
        self.assertAllClose(out, expected, atol=1e-6)
        self.assertAllClose(np.asarray(out)[0, :, 1], np.zeros((3, 5)))
