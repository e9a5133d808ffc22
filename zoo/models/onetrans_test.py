import numpy as np

import zoo
import zoo.models.onetrans  # noqa: F401  (registers "onetrans")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema

SMALL = {"num_layers": 2, "width": 8, "num_heads": 2, "num_ns_tokens": 2, "mlp_units": (8,)}


class OneTransTest(TestCase):
    def test_pctr_per_candidate(self):
        simulator = small_simulator()
        schema = simulator.schema.with_candidates(2)
        features, _ = simulator.sample(8, seed=0)
        features = {k: (np.repeat(v, 2, axis=1) if k.startswith("cand") else v) for k, v in features.items()}
        model = zoo.get("onetrans", schema=schema, **SMALL)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 2))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertAllClose(pctr[:, 0], pctr[:, 1], atol=1e-6)  # the same candidate twice
        blocks = [model.get_layer(f"block_{l}") for l in range(2)]
        self.assertEqual([b.sequence_queries for b in blocks], [True, False])  # nothing reads the last S-tokens

    def test_no_leakage(self):
        self.run_leakage_test("onetrans", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"width": 10, "num_heads": 4}, "width 10 is not divisible by num_heads 4"),
            ({"num_ns_tokens": 0}, "num_ns_tokens is 0"),
            ({"num_layers": -1}, "num_layers is -1"),
            ({"mlp_units": (8, 0)}, r"onetrans hyperparameters: mlp_units is 0 \(in \(8, 0\)\)"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                zoo.get("onetrans", schema=schema, **{**SMALL, **kwargs})
        no_history = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "onetrans needs at least one hist_ feature"):
            zoo.get("onetrans", schema=no_history, **SMALL)
