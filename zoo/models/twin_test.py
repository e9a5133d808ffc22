import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.twin import TWIN
from zoo.schema import Schema

SMALL = {"k": 4, "num_heads": 2, "head_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)}


class TWINTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("twin", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, TWIN)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        # K_h: item_id + category (2 x 8); K_c: time gap (4) + behaviour type (8), one bias per head
        self.assertEqual(tuple(model.get_layer("twin_attention").key_kernel.shape), (16, 2, 4))
        self.assertEqual(tuple(model.get_layer("twin_attention").cross_kernel.shape), (12, 2))

    def test_no_leakage(self):
        self.run_leakage_test("twin", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema  # L = 8
        for bad, message in (
            ({"k": 100}, "twin: k is 100 but the history holds only L = 8"),
            ({"k": 0}, "twin: k is 0"),
            ({"num_heads": 0}, "twin: num_heads is 0"),
            ({"head_dim": -8}, "twin: head_dim is -8"),
            ({"time_embedding_dim": 0}, "twin: time_embedding_dim is 0"),
            ({"dice_momentum": "fast"}, "twin: dice_momentum is 'fast'"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                TWIN(schema, **dict(SMALL, **bad))

    def test_needs_inherent_features(self):
        schema = Schema(
            features=(Feature("item_id", "hist", 9), Feature("category", "cand", 5)), sequence_length=4, time=True
        )
        with self.assertRaisesRegex(ZooError, "twin needs a field in both hist_ and cand_"):
            TWIN(schema, **dict(SMALL, k=2))
