import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.eta import ETA, candidate_field_mask

SMALL = {"k": 4, "num_bits": 8, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)}


class ETATest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("eta", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, ETA)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        hyperplanes = model.get_layer("sim_hash").hyperplanes
        self.assertFalse(hyperplanes.trainable)
        self.assertAllClose(hyperplanes, np.random.default_rng(0).standard_normal((24, 8)))

    def test_hashes_the_fields_candidates_carry(self):
        # item_id, category (the candidate's fields), then behavior (behaviour-only), 8 dims each
        mask = candidate_field_mask(self.simulator.schema)
        self.assertEqual(mask.tolist(), [1.0] * 16 + [0.0] * 8)

    def test_no_leakage(self):
        self.run_leakage_test("eta", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema  # L = 8
        for bad, message in (
            ({"k": 9}, "eta: k is 9 but the history holds only L = 8"),
            ({"num_bits": 0}, "eta: num_bits is 0"),
            ({"num_heads": -2}, "eta: num_heads is -2"),
            ({"attention_dim": 0}, "eta: attention_dim is 0"),
            ({"time_embedding_dim": -1}, "eta: time_embedding_dim is -1"),
            ({"mlp_units": 16}, "eta: mlp_units is 16"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                ETA(schema, **dict(SMALL, **bad))
