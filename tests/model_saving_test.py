"""Every registered model survives the .keras format and a preset round trip under this backend.

(The cross-backend matrix, tests/cross_backend_test.py, runs one representative per family.)
"""

import pytest

from tests.cross_backend_test import build_small
from tests.model_configs import SMALL
from tests.testing import TestCase


class ModelSavingTest(TestCase):
    pass


@pytest.mark.parametrize("name", sorted(SMALL))
def test_model_saving(name, tmp_path):
    model, simulator = build_small(name)
    features, _ = simulator.sample(4, seed=3)
    restored = ModelSavingTest().run_model_saving_test(model, features, tmp_path)
    assert restored.registered_name == name
