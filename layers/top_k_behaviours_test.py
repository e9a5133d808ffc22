import numpy as np

from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.top_k_behaviours import TopKBehaviours


def top_k_reference(scores, allowed, k):
    """The allowed slots of one candidate, highest score first, at most k of them."""
    slots = [j for j in np.argsort(-scores, kind="stable") if allowed[j]]
    return slots[:k]


class TopKBehavioursTest(TestCase):
    def make_inputs(self, seed=0, m=3, length=6, d=4):
        rng = np.random.RandomState(seed)
        scores = rng.normal(size=(2, m, length)).astype("float32")
        allowed = rng.rand(2, m, length) > 0.35
        allowed[1, 2] = False  # a candidate that sees nothing
        allowed[0, 0] = True  # one that sees everything
        behaviours = rng.normal(size=(2, length, d)).astype("float32")
        return scores, allowed, behaviours

    def test_layer_basics(self):
        self.run_layer_test(TopKBehaviours, {"k": 3}, self.make_inputs(), (2, 3, 3, 4))

    def test_picks_the_k_best_allowed_behaviours(self):
        k = 3
        scores, allowed, behaviours = self.make_inputs(seed=1)
        picked, picked_allowed, indices = LayerRunner(TopKBehaviours(k), scores, allowed, behaviours)(
            scores, allowed, behaviours
        )
        for b in range(2):
            for m in range(3):
                want = top_k_reference(scores[b, m], allowed[b, m], k)
                n = len(want)
                self.assertEqual(list(picked_allowed[b, m]), [True] * n + [False] * (k - n))
                self.assertEqual(list(indices[b, m, :n]), want)
                self.assertAllClose(picked[b, m, :n], behaviours[b, want])

    def test_hidden_behaviours_are_never_picked(self):
        scores, allowed, behaviours = self.make_inputs(seed=2)
        scores = np.where(allowed, scores, 100.0).astype("float32")  # the hidden ones score highest
        _, picked_allowed, indices = TopKBehaviours(2)(scores, allowed, behaviours)
        for b in range(2):
            for m in range(3):
                for slot, ok in zip(np.asarray(indices[b, m]), np.asarray(picked_allowed[b, m])):
                    if ok:
                        self.assertTrue(allowed[b, m, slot])

    def test_k_must_be_positive(self):
        with self.assertRaisesRegex(ZooError, "TopKBehaviours k is 0"):
            TopKBehaviours(0)
