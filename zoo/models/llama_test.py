import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.llama import LLaMA
from zoo.schema import Schema

SMALL = {"width": 8, "num_heads": 2, "num_layers": 1, "ffn_dim": 8, "mlp_units": (8,)}


class LLaMATest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("llama", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, LLaMA)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["ffn_dim"], 8)

    def test_backbone_and_readout_have_no_biases(self):
        model = LLaMA(self.simulator.schema, **SMALL)
        paths = [w.path for w in model.weights]
        backbone = [p for p in paths if p.startswith(("block_", "target_attention", "token_projection"))]
        self.assertTrue(backbone)
        self.assertEqual([p for p in backbone if "bias" in p], [])

    def test_no_leakage(self):
        self.run_leakage_test("llama", **dict(SMALL, num_layers=2))

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"width": 0}, "llama: width is 0"),
            ({"num_heads": -1}, "llama: num_heads is -1"),
            ({"num_layers": 1.5}, "llama: num_layers is 1.5"),
            ({"ffn_dim": 0}, "llama: ffn_dim is 0"),
            ({"width": 10, "num_heads": 4}, "llama: width 10 is not divisible by num_heads 4"),
            ({"width": 6, "num_heads": 2}, "llama: width / num_heads = 3 must be even for RoPE"),
            ({"dropout": 1.0}, "llama: dropout is 1.0"),
            ({"mlp_units": (8, 0)}, "llama: mlp_units is 0"),
            ({"dice_momentum": -0.1}, "llama: dice_momentum is -0.1"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                LLaMA(schema, **dict(SMALL, **bad))

    def test_needs_a_history(self):
        schema = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "llama needs at least one hist_ feature"):
            LLaMA(schema, **SMALL)
