import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.can import CAN
from zoo.schema import Schema

SMALL = {"attention_units": (8,), "micro_mlp_units": (4, 2), "feed_dim": 4, "orders": 2, "mlp_units": (8,)}


class CANTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("can", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, CAN)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        # one induction (4 * 4 + 4 * 2 = 24 per id) and one feed table per shared field
        self.assertEqual(tuple(model.get_layer("induction_item_id").embeddings.shape), (62, 24))
        self.assertEqual(tuple(model.get_layer("feed_category").embeddings.shape), (8, 4))

    def test_no_leakage(self):
        self.run_leakage_test("can", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema
        for bad, message in (
            ({"micro_mlp_units": ()}, "can: micro_mlp_units is empty"),
            ({"micro_mlp_units": (4, -2)}, "can: micro_mlp_units is -2"),
            ({"feed_dim": 0}, "can: feed_dim is 0"),
            ({"orders": 0}, "can: orders is 0"),
            ({"attention_units": "wide"}, "can: attention_units is 'wide'"),
            ({"dice_momentum": -0.5}, "can: dice_momentum is -0.5"),
        ):
            with self.subTest(**{k: str(v) for k, v in bad.items()}), self.assertRaisesRegex(ZooError, message):
                CAN(schema, **dict(SMALL, **bad))

    def test_needs_a_field_shared_by_history_and_candidate(self):
        schema = Schema(
            features=(Feature("item_id", "hist", 9), Feature("category", "cand", 5)), sequence_length=4
        )
        with self.assertRaisesRegex(ZooError, "can needs a field in both hist_ and cand_"):
            CAN(schema, **SMALL)
