import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.models.deres_s import DeResS


class DeResSTest(TestCase):
    def test_softmax_weights_over_available_blocks(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = DeResS(simulator.schema, num_layers=2, width=16, num_heads=2, num_blocks=1)
        self.assertEqual(model.get_config()["weighting"], "softmax")
        self.assertEqual(tuple(model(features).shape), (8, 1))
        alpha = model.introspect(features)["alpha"]  # L = 2, B = 1: layer 1 sees B_0 and a partial B_1
        self.assertEqual(alpha.shape, (2, 2))
        self.assertTrue(np.all(alpha >= 0))
        self.assertAllClose(alpha.sum(axis=1), np.ones(2), atol=1e-5)
