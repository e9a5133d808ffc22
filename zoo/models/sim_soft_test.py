import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.sim_soft import SIMSoft

SMALL = {"k": 4, "num_heads": 2, "attention_dim": 4, "time_embedding_dim": 4, "mlp_units": (8,)}


class SIMSoftTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_output_is_pctr_per_candidate(self):
        features, _ = self.simulator.sample(8)
        model = zoo.get("sim_soft", schema=self.simulator.schema, **SMALL)
        self.assertIsInstance(model, SIMSoft)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))

    def test_no_leakage(self):
        self.run_leakage_test("sim_soft", **SMALL)

    def test_bad_hyperparameters_name_the_parameter(self):
        schema = self.simulator.schema  # L = 8
        for bad, message in (
            ({"k": 9}, "sim_soft: k is 9 but the history holds only L = 8"),
            ({"k": 0}, "sim_soft: k is 0"),
            ({"num_heads": 0}, "sim_soft: num_heads is 0"),
            ({"attention_dim": -4}, "sim_soft: attention_dim is -4"),
            ({"time_embedding_dim": 0}, "sim_soft: time_embedding_dim is 0"),
            ({"mlp_units": (0,)}, "sim_soft: mlp_units is 0"),
        ):
            with self.subTest(**bad), self.assertRaisesRegex(ZooError, message):
                SIMSoft(schema, **dict(SMALL, **bad))
