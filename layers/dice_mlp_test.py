import numpy as np

from tests.testing import TestCase
from zoo.layers.dice_mlp import DiceMLP


class DiceMLPTest(TestCase):
    def test_layer_basics(self):
        x = np.random.RandomState(0).rand(6, 2, 5).astype("float32")
        self.run_layer_test(DiceMLP, {"units": (4, 3), "dropout": 0.1}, x, (6, 2, 1))

    def test_matches_dense_batchnorm_dice_reference(self):
        rng = np.random.RandomState(3)
        x = rng.normal(size=(5, 4)).astype("float32")
        layer = DiceMLP(units=(3,), dice_momentum=0.9)
        layer(x)
        w, b = rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=3).astype("float32")
        wo, bo = rng.normal(size=(3, 1)).astype("float32"), rng.normal(size=1).astype("float32")
        gamma, beta = rng.rand(3).astype("float32") + 0.5, rng.normal(size=3).astype("float32")
        mean, var = rng.normal(size=3).astype("float32"), rng.rand(3).astype("float32") + 0.5
        d_mean, d_var = rng.normal(size=3).astype("float32"), rng.rand(3).astype("float32") + 0.5
        alpha = rng.normal(size=3).astype("float32")
        dense, norm, dice = layer.hidden[0]
        dense.set_weights([w, b])
        norm.set_weights([gamma, beta, mean, var])
        dice.set_weights([alpha, d_mean, d_var])
        layer.logit.set_weights([wo, bo])
        h = x @ w + b
        h = gamma * (h - mean) / np.sqrt(var + 1e-3) + beta  # BatchNormalization at inference
        p = 1.0 / (1.0 + np.exp(-(h - d_mean) / np.sqrt(d_var + 1e-8)))
        h = p * h + (1 - p) * alpha * h
        self.assertAllClose(layer(x, training=False), h @ wo + bo, atol=1e-4)
