import numpy as np

import zoo
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.deres_p import DeResP
from zoo.schema import Schema

SMALL = dict(num_layers=2, width=16, num_heads=2, num_blocks=2)


class DeResPTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.features, self.labels = self.simulator.sample(8, seed=0)

    def test_round_trips(self):
        model = DeResP(self.simulator.schema, **SMALL)
        self.assertEqual(model.get_config()["weighting"], "silu")
        self.run_model_saving_test(model, self.features, self.get_temp_dir())

    def test_introspection(self):
        model = DeResP(self.simulator.schema, **SMALL)
        pctr = to_numpy(model(self.features))
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        stats = model.introspect(self.features)
        # B = L = 2: layer 1 sees B_0, B_1; layer 2 sees B_0, B_1, B_2.
        np.testing.assert_array_equal(np.isnan(stats["alpha"]), [[False, False, True], [False, False, False]])
        self.assertEqual(stats["gamma_mean"].shape, (2,))
        self.assertTrue(np.all((stats["gamma_mean"] > 0) & (stats["gamma_mean"] < 1)))
        self.assertTrue(np.all(stats["gamma_std"] >= 0))

    def test_each_candidate_scored_by_its_own_pass(self):
        model = DeResP(self.simulator.schema.with_candidates(2), **SMALL)
        features = dict(self.features)
        for key in ("cand_item_id", "cand_category", "cand_time"):
            features[key] = np.concatenate([features[key], features[key][::-1]], axis=1)
        changed = {k: v.copy() for k, v in features.items()}
        changed["cand_item_id"][:, 1], changed["cand_category"][:, 1] = 1, 1  # candidate 1 only
        pctr, pctr_changed = to_numpy(model(features)), to_numpy(model(changed))
        self.assertAllClose(pctr_changed[:, 0], pctr[:, 0], atol=1e-6)  # candidate 0 never sees candidate 1
        self.assertFalse(np.allclose(pctr_changed[:, 1], pctr[:, 1]))

    def test_needs_a_candidate(self):
        schema = Schema(features=(Feature("age", "user", 4),))
        with self.assertRaisesRegex(ZooError, "cand_"):
            zoo.get("deres_p", schema=schema, **SMALL)
