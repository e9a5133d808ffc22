import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.din import DIN
from zoo.schema import Schema


class DINTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.features, self.labels = self.simulator.sample(16)

    def test_output_is_pctr_per_candidate(self):
        model = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        pctr = model.predict(self.features, verbose=0)
        self.assertEqual(pctr.shape, (16, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["mlp_units"], [16])

    def test_several_candidates_score_independently(self):
        schema = self.simulator.schema.with_candidates(3)
        model = DIN(schema, attention_units=(8,), mlp_units=(16,))
        features = dict(self.features)
        for key in ("cand_item_id", "cand_category", "cand_time"):
            features[key] = np.repeat(features[key], 3, axis=1)
        features["cand_item_id"][:, 1] = 1  # change the middle candidate only
        pctr = model.predict(features, verbose=0)
        self.assertAllClose(pctr[:, 0], pctr[:, 2])

    def test_trains_and_round_trips(self):
        model = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        history = model.fit(self.features, self.labels, epochs=2, batch_size=8, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][-1]))
        self.run_model_saving_test(model, self.features, self.get_temp_dir())

    def test_needs_a_history_and_a_candidate(self):
        schema = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "din needs at least one hist_ feature"):
            DIN(schema)

    def test_score_validates_the_batch(self):
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        bad = dict(self.features, hist_item_id=-self.features["hist_item_id"] - 1)
        with self.assertRaisesRegex(ZooError, "hist_item_id has a negative value"):
            model.score(bad)
        many = {k: (np.repeat(v, 2, axis=1) if k.startswith("cand") else v) for k, v in self.features.items()}
        with self.assertRaisesRegex(ZooError, "built for 1 candidate"):
            model.score(many)
        self.assertEqual(model.score(self.features).shape, (16, 1))

    def test_no_leakage(self):
        self.run_leakage_test("din", attention_units=(8,), mlp_units=(16,))
