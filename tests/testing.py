"""Shared test helpers, in the spirit of keras-hub's TestCase.

Every test in the suite runs under the backend named by KERAS_BACKEND; `scripts/test.sh` runs the
suite once per backend (tensorflow, jax, torch).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import keras
import numpy as np

import zoo
from zoo.datasets import BehaviourSimulator

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
BACKENDS = ("tensorflow", "jax", "torch")


def small_simulator(**overrides):
    """A tiny simulator (fast to build) whose schema most tests use."""
    config = dict(num_users=40, num_items=60, num_categories=6, sequence_length=8, timeline_length=20)
    config.update(overrides)
    return BehaviourSimulator(**config)


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def run_python(code, backend, timeout=600):
    """Runs `code` in a fresh interpreter under `backend`; returns stdout, raises on failure."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess under {backend} failed:\n{result.stderr[-4000:]}")
    return result.stdout


class TestCase(unittest.TestCase):
    """Base class of the zoo's tests: assertions on arrays and the layer/model round-trip helpers."""

    def setUp(self):
        keras.utils.set_random_seed(1234)

    def get_temp_dir(self):
        """A fresh directory removed after the test."""
        directory = tempfile.mkdtemp(prefix="zoo-test-")
        self.addCleanup(shutil.rmtree, directory, True)
        return directory

    def assertAllClose(self, actual, expected, atol=1e-5, rtol=1e-5, msg=None):
        np.testing.assert_allclose(to_numpy(actual), to_numpy(expected), atol=atol, rtol=rtol, err_msg=msg or "")

    def run_layer_test(self, layer_cls, init_kwargs, inputs, expected_output_shape, call_kwargs=None):
        """Builds and calls the layer, checks the output shape, and checks that a layer rebuilt from
        `get_config` (directly and through Keras serialization) computes the same output with the
        same weights. `inputs` is one array, a tuple of positional arrays, or a dict."""
        call_kwargs = call_kwargs or {}
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        layer = layer_cls(**init_kwargs)
        output = layer(*args, **call_kwargs)
        self.assertEqual(tuple(keras.ops.shape(output)), tuple(expected_output_shape))
        config = layer.get_config()
        json.dumps(config)  # config.json material: plain JSON
        for clone in (
            layer_cls.from_config(config),
            keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)),
        ):
            self.assertIsInstance(clone, layer_cls)
            clone(*args, **call_kwargs)
            clone.set_weights(layer.get_weights())
            self.assertAllClose(clone(*args, **call_kwargs), output)
        return layer, output

    def run_model_saving_test(self, model, features, directory):
        """A model survives the .keras format (safe_mode) and a preset round trip with equal predictions."""
        expected = model.predict(features, verbose=0)
        path = Path(directory) / "model.keras"
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True, compile=False)
        self.assertAllClose(restored.predict(features, verbose=0), expected)
        zoo.save(model, Path(directory) / "preset")
        restored = zoo.load(Path(directory) / "preset")
        self.assertIs(type(restored), type(model))
        self.assertAllClose(restored.predict(features, verbose=0), expected)
        return restored
