"""Every registered model survives the .keras format and a preset round trip under this backend.

(The cross-backend matrix, tests/cross_backend_test.py, runs one representative per family.)
"""

from tests.cross_backend_test import build_small
from tests.model_configs import SMALL
from tests.testing import TestCase


class ModelSavingTest(TestCase):
    def test_every_registered_model_round_trips(self):
        for name in sorted(SMALL):
            with self.subTest(model=name):
                model, simulator = build_small(name)
                features, _ = simulator.sample(4, seed=3)
                restored = self.run_model_saving_test(model, features, self.get_temp_dir())
                self.assertEqual(restored.registered_name, name)
