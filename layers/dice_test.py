import numpy as np

from tests.testing import TestCase
from zoo.layers.dice import Dice


def dice_reference(s, mean, var, alpha, eps):
    """DIN eq 9 in NumPy."""
    p = 1.0 / (1.0 + np.exp(-(s - mean) / np.sqrt(var + eps)))
    return p * s + (1.0 - p) * alpha * s


class DiceTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(Dice, {"momentum": 0.9}, np.random.rand(4, 3, 5).astype("float32"), (4, 3, 5))

    def test_training_uses_batch_statistics(self):
        s = np.random.RandomState(0).normal(2.0, 3.0, (64, 5)).astype("float32")
        layer = Dice(epsilon=1e-8)
        layer.build(s.shape)
        alpha = np.linspace(-0.5, 0.5, 5).astype("float32")
        layer.alpha.assign(alpha)
        expected = dice_reference(s, s.mean(0), s.var(0), alpha, 1e-8)
        self.assertAllClose(layer(s, training=True), expected, atol=1e-4)

    def test_inference_uses_moving_averages(self):
        s = np.random.RandomState(1).normal(0.0, 1.0, (8, 5)).astype("float32")
        layer = Dice(momentum=0.5, epsilon=1e-3)
        layer.build(s.shape)
        layer.alpha.assign(np.full(5, 0.25, "float32"))
        layer(s, training=True)  # one update: moving = 0.5 * init + 0.5 * batch
        mean = 0.5 * s.mean(0)
        var = 0.5 * 1.0 + 0.5 * s.var(0, ddof=0)
        out = layer(s, training=False)
        # Keras' BatchNormalization updates the moving variance with the biased batch variance.
        self.assertAllClose(out, dice_reference(s, mean, var, 0.25, 1e-3), atol=1e-4)

    def test_alpha_starts_at_zero(self):
        layer = Dice()
        layer.build((2, 3))
        self.assertAllClose(layer.alpha, np.zeros(3))
