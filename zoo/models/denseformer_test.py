import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.models.denseformer import DenseFormer


class DenseFormerTest(TestCase):
    def test_depth_weighted_backbone(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = DenseFormer(simulator.schema, num_layers=2, width=16, num_heads=2)
        self.assertEqual(tuple(model(features).shape), (8, 1))
        self.assertEqual([w.shape for w in model.get_layer("connector").dwa_weights], [(2,), (3,)])
