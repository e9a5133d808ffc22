import numpy as np

import zoo
import zoo.models.fm  # noqa: F401  (registers "fm")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema


class FMTest(TestCase):
    def test_output_is_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8)
        model = zoo.get("fm", schema=simulator.schema)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))

    def test_no_leakage(self):
        self.run_leakage_test("fm")

    def test_bad_schema(self):
        schema = Schema(features=(Feature("item_id", "cand", 10, 4), Feature("age", "user", 6, 8)))
        with self.assertRaisesRegex(ZooError, "embedding_dim"):
            zoo.get("fm", schema=schema)
        with self.assertRaisesRegex(ZooError, "fm needs at least one cand_ feature"):
            zoo.get("fm", schema=Schema(features=(Feature("age", "user", 6, 8),)))
