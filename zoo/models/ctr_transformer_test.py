import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.models.ctr_transformer import CTRTransformer


class CTRTransformerTest(TestCase):
    def test_residual_only_backbone(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8, seed=0)
        model = CTRTransformer(simulator.schema, num_layers=2, width=16, num_heads=2)
        self.assertEqual(tuple(model(features).shape), (8, 1))
        connector = model.get_layer("connector")
        self.assertEqual((connector.paths, connector.attnres_layers, connector.gates), ("residual-only", [], []))
        learnable = CTRTransformer(simulator.schema, num_layers=2, width=16, num_heads=2, residual_matrix="learnable")
        self.assertEqual(learnable.count_params() - model.count_params(), 2 * 16 * 16)  # one H_l in R^{d x d} per layer
        self.assertEqual(learnable.get_config()["residual_matrix"], "learnable")

    def test_no_leakage(self):
        self.run_leakage_test("ctr_transformer", num_layers=1, width=8, num_heads=2)
