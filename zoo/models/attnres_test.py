import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.models.attnres import AttnRes


class AttnResTest(TestCase):
    def test_attention_residual_only_backbone(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = AttnRes(simulator.schema, num_layers=2, width=16, num_heads=2, num_blocks=2, weighting="silu")
        self.assertEqual(tuple(model(features).shape), (8, 1))
        connector = model.get_layer("connector")
        self.assertEqual((connector.paths, connector.residual_layers), ("attnres-only", []))
        stats = model.introspect(features)
        self.assertEqual(stats["alpha"].shape, (2, 3))
        self.assertIsNone(stats["gamma_mean"])
