"""Presets saved under each backend load under each backend with equal predictions (all 9 pairs).

Each run of the suite (one per backend) saves one representative model per family (REPRESENTATIVES)
under all three backends (the other two in subprocesses) and loads the three in-process, so the three
runs cover the nine (save, load) pairs. Every other model's preset round trip is tested under each
backend by its own model test (`run_model_saving_test`); the families share their layers, so a
representative carries what can differ between backends (weight order, dtypes, Keras variable paths).
"""

from pathlib import Path

import keras
import numpy as np
import pytest

import zoo
from tests.model_configs import SMALL
from tests.testing import BACKENDS, run_python, small_simulator

REPRESENTATIVES = ("din", "rest", "lightsuan", "deres_p")  # DIN, ReST, the SUAN family, the DeRes family


def build_small(name):
    """The registered model `name` with its small test config; weights nudged off their init."""
    config = dict(SMALL[name])
    simulator = small_simulator(**config.pop("simulator", {}))
    keras.utils.set_random_seed(7)
    model = zoo.get(name, schema=simulator.schema, **config)
    rng = np.random.default_rng(7)
    # Positive nudges keep BatchNorm variances positive while making every statistic non-trivial.
    model.set_weights([w + 0.05 * np.abs(rng.normal(size=w.shape)).astype(w.dtype) for w in model.get_weights()])
    return model, simulator


def make_presets(directory):
    """Saves each representative as a preset under `directory` with its predictions on a fixed batch."""
    directory = Path(directory)
    for name in REPRESENTATIVES:
        model, simulator = build_small(name)
        features, _ = simulator.sample(8, seed=5)
        model.save_to_preset(directory / name)
        np.save(directory / name / "expected.npy", model.predict(features, verbose=0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross_backend")
    current = keras.backend.backend()
    for backend in BACKENDS:
        if backend == current:
            make_presets(root / backend)
        else:
            run_python(
                f"from tests.cross_backend_test import make_presets; make_presets({str(root / backend)!r})",
                backend,
            )
    return root


@pytest.mark.slow
@pytest.mark.parametrize("saved_under", BACKENDS)
@pytest.mark.parametrize("name", REPRESENTATIVES)
def test_preset_loads_under_this_backend(saved, name, saved_under):
    directory = saved / saved_under / name
    model = zoo.load(directory)
    config = dict(SMALL[name])
    features, _ = small_simulator(**config.pop("simulator", {})).sample(8, seed=5)
    np.testing.assert_allclose(
        model.predict(features, verbose=0), np.load(directory / "expected.npy"), atol=1e-5, rtol=1e-5
    )
