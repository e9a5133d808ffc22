import numpy as np

from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.layers.co_action_unit import CoActionUnit


def co_action_reference(induction, feed, visible, units, orders):
    """CAN eq 1-3 for one candidate: the induction vector as the micro-MLP's weights, the feed through it
    for every order, every layer's output concatenated, summed over the visible behaviours."""
    widths = [feed.shape[-1]] + list(units)
    weights, start = [], 0
    for a, b in zip(widths[:-1], widths[1:]):
        weights.append(induction[start : start + a * b].reshape(a, b))
        start += a * b
    total = 0.0
    for j in range(len(feed)):
        if not visible[j]:
            continue
        pieces = []
        for c in range(1, orders + 1):
            h = feed[j] ** c
            for k, w in enumerate(weights):
                h = h @ w
                if k < len(weights) - 1:
                    h = np.tanh(h)
                pieces.append(h)
        total = total + np.concatenate(pieces)
    return total


class CoActionUnitTest(TestCase):
    def make_inputs(self, seed=0, m=2, length=5, feed_dim=4, units=(3, 2)):
        rng = np.random.RandomState(seed)
        size = CoActionUnit.induction_size(feed_dim, units)
        induction = rng.normal(size=(2, m, size)).astype("float32")
        feed = rng.normal(size=(2, length, feed_dim)).astype("float32")
        visible = rng.rand(2, m, length) > 0.4
        return induction, feed, visible

    def test_layer_basics(self):
        self.run_layer_test(
            CoActionUnit, {"units": (3, 2), "orders": 2}, self.make_inputs(), (2, 2, 10),
            expected_num_trainable_weights=0,
        )

    def test_matches_can_equations(self):
        units, orders = (3, 2), 3
        induction, feed, visible = self.make_inputs(seed=1)
        out = CoActionUnit(units, orders)(induction, feed, visible)
        self.assertEqual(tuple(out.shape), (2, 2, orders * sum(units)))
        for b in range(2):
            for m in range(2):
                want = co_action_reference(induction[b, m], feed[b], visible[b, m], units, orders)
                self.assertAllClose(out[b, m], want, atol=1e-4, rtol=1e-4)

    def test_invisible_behaviours_never_contribute(self):
        induction, feed, visible = self.make_inputs(seed=2)
        layer = CoActionUnit((3, 2), 2)
        before = layer(induction, feed, visible)
        feed[:, 1] += 7.0
        visible[:, :, 1] = False
        moved = layer(induction, feed, visible)
        feed[:, 1] -= 20.0
        self.assertAllClose(layer(induction, feed, visible), moved)
        self.assertFalse(np.allclose(before, moved))

    def test_induction_size_must_fit(self):
        induction, feed, visible = self.make_inputs()
        with self.assertRaisesRegex(ZooError, "needs an induction embedding of 18, got 17"):
            CoActionUnit((3, 2))(induction[..., :17], feed, visible)
        with self.assertRaisesRegex(ZooError, "orders >= 1"):
            CoActionUnit((3, 2), orders=0)
