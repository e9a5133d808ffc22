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


def jax_compile_messages(function):
    """(function's result, [JAX's log messages while it ran under jax.log_compiles]): what JAX compiled."""
    import logging

    import jax

    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logging.getLogger("jax").addHandler(handler)
    try:
        with jax.log_compiles(True):
            result = function()
    finally:
        logging.getLogger("jax").removeHandler(handler)
    return result, messages


def fresh_output(code, backend, cleared=(), args=(), **env):
    """(stdout, stderr) of `code` run in a fresh interpreter under `backend` (with `args`), the variables in
    `cleared` taken out of this process's environment and `env` added; a failure raises with its stderr."""
    environment = {k: v for k, v in os.environ.items() if k not in cleared}
    environment.update(KERAS_BACKEND=backend, PYTHONPATH=str(ROOT), **env)
    done = subprocess.run([sys.executable, "-c", code, *args], env=environment, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def fresh_report(code, backend, cleared=(), **env):
    """The JSON last line `code` prints in a fresh interpreter under `backend`, the variables in `cleared`
    taken out of this process's environment and `env` added (what the code sets is then its own)."""
    out, _ = fresh_output(code, backend, cleared, **dict({"TF_CPP_MIN_LOG_LEVEL": "3"}, **env))
    return json.loads(out.strip().splitlines()[-1])


def run_python(code, backend, timeout=600):
    """Runs `code` in a fresh interpreter under `backend`; returns stdout, raises on failure."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess under {backend} failed:\n{result.stderr[-4000:]}")
    return result.stdout


def _symbolic(tree):
    """`tree` with every NumPy array replaced by a keras.Input of its shape and dtype (batch included);
    returns (the new tree, its inputs in keras.tree.flatten order: the order of `_arrays(tree)`)."""

    def to_input(value):
        if not isinstance(value, np.ndarray):
            return value
        return keras.Input(shape=value.shape[1:], batch_size=value.shape[0], dtype=str(value.dtype))

    symbolic = keras.tree.map_structure(to_input, tree)
    return symbolic, [x for x in keras.tree.flatten(symbolic) if isinstance(x, keras.KerasTensor)]


def _arrays(tree):
    return [x for x in keras.tree.flatten(tree) if isinstance(x, np.ndarray)]


class LayerRunner:
    """Builds `layer` on the arrays' shapes and runs it: eagerly under TensorFlow and torch, as one
    compiled functional model under JAX (which would compile every eager op separately)."""

    def __init__(self, layer, *arrays):
        self.layer = layer
        if keras.backend.backend() == "jax":
            inputs = [keras.Input(shape=a.shape[1:], batch_size=a.shape[0], dtype=str(a.dtype)) for a in arrays]
            self.model = keras.Model(inputs, layer(*inputs))
        else:
            self.model = None
            layer(*arrays)

    def __call__(self, *arrays):
        if self.model is not None:
            return self.model.predict_on_batch(list(arrays))
        return keras.tree.map_structure(keras.ops.convert_to_numpy, self.layer(*arrays))


class TestCase(unittest.TestCase):
    """Base class of the zoo's tests: assertions on arrays and the layer/model round-trip helpers."""

    def setUp(self):
        keras.utils.set_random_seed(1234)

    def get_temp_dir(self):
        """A fresh directory removed after the test."""
        directory = tempfile.mkdtemp(prefix="zoo-test-")
        self.addCleanup(shutil.rmtree, directory, True)
        return directory

    def assertLen(self, container, length):
        self.assertEqual(len(container), length)

    def assertAllClose(self, actual, expected, atol=1e-5, rtol=1e-5, msg=None):
        np.testing.assert_allclose(to_numpy(actual), to_numpy(expected), atol=atol, rtol=rtol, err_msg=msg or "")

    def run_layer_test(
        self,
        layer_cls,
        init_kwargs,
        inputs,
        expected_output_shape,
        call_kwargs=None,
        expected_num_trainable_weights=None,
        expected_num_non_trainable_weights=None,
        run_training_check=True,
        run_mixed_precision_check=True,
    ):
        """keras-hub's layer test: builds and calls the layer, checks the output shape and the weight
        counts; a symbolic call (keras.Input) gives the same shape; a layer rebuilt from `get_config`
        (directly and through Keras serialization) computes the same output with the same weights; one
        training step moves its trainable weights; under "mixed_float16" it computes in float16 and
        stays close to float32. `inputs` is one array, a tuple of positional arrays, or a dict; array
        values of `call_kwargs` are model inputs too."""
        call_kwargs = call_kwargs or {}
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        layer = layer_cls(**init_kwargs)
        output = layer(*args, **call_kwargs)
        first = keras.tree.flatten(output)[0]
        self.assertEqual(tuple(keras.ops.shape(first)), tuple(expected_output_shape))
        if expected_num_trainable_weights is not None:
            self.assertLen(layer.trainable_weights, expected_num_trainable_weights)
        if expected_num_non_trainable_weights is not None:
            self.assertLen(layer.non_trainable_weights, expected_num_non_trainable_weights)
        config = layer.get_config()
        json.dumps(config)  # config.json material: plain JSON
        for clone in (
            layer_cls.from_config(config),
            keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)),
        ):
            self.assertIsInstance(clone, layer_cls)
            clone(*args, **call_kwargs)
            clone.set_weights(layer.get_weights())
            for got, want in zip(keras.tree.flatten(clone(*args, **call_kwargs)), keras.tree.flatten(output)):
                self.assertAllClose(got, want)
        symbolic = layer_cls.from_config(config)
        inputs_tree, _ = _symbolic((args, call_kwargs))
        symbolic_output = keras.tree.flatten(symbolic(*inputs_tree[0], **inputs_tree[1]))[0]
        self.assertEqual(tuple(symbolic_output.shape), tuple(expected_output_shape))
        if run_training_check and layer.trainable_weights:
            self._check_training_step(layer_cls, config, args, call_kwargs)
        if run_mixed_precision_check:
            mixed = layer_cls.from_config({**config, "dtype": "mixed_float16"})
            mixed(*args, **call_kwargs)
            mixed.set_weights(layer.get_weights())
            mixed_output = keras.tree.flatten(mixed(*args, **call_kwargs))[0]
            if keras.backend.is_float_dtype(first.dtype):
                self.assertEqual(keras.backend.standardize_dtype(mixed_output.dtype), "float16")
                self.assertAllClose(keras.ops.cast(mixed_output, "float32"), first, atol=5e-2, rtol=5e-2)
        return layer, output

    def _check_training_step(self, layer_cls, config, args, call_kwargs):
        """One SGD step of a model around a fresh layer (towards outputs of ones) changes its weights."""
        inputs_tree, model_inputs = _symbolic((args, call_kwargs))
        layer = layer_cls.from_config(config)
        output = keras.tree.flatten(layer(*inputs_tree[0], **inputs_tree[1]))[0]
        model = keras.Model(model_inputs, output)
        before = [to_numpy(w) for w in layer.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        arrays = _arrays((args, call_kwargs))
        target = np.ones(tuple(output.shape), "float32")
        model.fit(arrays, target, batch_size=len(target), epochs=1, verbose=0, shuffle=False)
        moved = [not np.allclose(b, to_numpy(w)) for b, w in zip(before, layer.trainable_weights)]
        self.assertTrue(any(moved), f"{layer_cls.__name__}: one training step changed no weight")

    def run_model_saving_test(self, model, features, directory):
        """A model survives the .keras format (safe_mode) and a preset round trip with equal predictions
        (the models called on the batch, as `predict`'s step calls them: no predict function traced and
        compiled for each of the three, which took most of this check's time under TensorFlow)."""
        def scores(m):
            return to_numpy(m(m.checked(features), training=False))

        expected = scores(model)
        path = Path(directory) / "model.keras"
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True, compile=False)
        self.assertAllClose(scores(restored), expected)
        zoo.save(model, Path(directory) / "preset")
        restored = zoo.load(Path(directory) / "preset")
        self.assertIs(type(restored), type(model))
        self.assertAllClose(scores(restored), expected)
        return restored

    def run_leakage_test(self, name, simulator=None, **hyperparameters):
        """Nothing from a label's future reaches its score: the registered model `name`, built for three
        candidates, gives candidate 0 the same score when (a) the behaviours at or after its exposure
        time change (ids and times, still chronological) or (b) the other candidates change.
        Candidate 0 is exposed at the time of the 5th-newest behaviour; candidates 1 and 2 after the
        history (so the behaviours hidden from candidate 0 are visible to them)."""
        simulator = simulator or small_simulator()
        schema = simulator.schema.with_candidates(3)
        keras.utils.set_random_seed(11)
        model = zoo.get(name, schema=schema, **hyperparameters)
        for weight in model.weights:  # tables from N(0, 1e-4) (DIN, DeepFM) move an untrained score by < 1e-6:
            values = to_numpy(weight)  # give them U(-0.05, 0.05), so that what a candidate reads moves its score
            if "embedding" in weight.path and values.ndim == 2 and 0 < values.std() < 1e-3:
                weight.assign(np.random.default_rng(11).uniform(-0.05, 0.05, values.shape).astype(values.dtype))
        features, _ = simulator.sample(6, seed=4)
        length = schema.sequence_length
        cut = length - 4  # behaviours cut.. are at or after candidate 0's time
        features = {k: (np.repeat(v, 3, axis=1) if k.startswith("cand") else v.copy()) for k, v in features.items()}
        rng = np.random.default_rng(0)
        features["cand_time"][:, 0] = features["hist_time"][:, cut]
        features["cand_time"][:, 1:] = features["hist_time"][:, -1:] + 100
        for key in ("cand_item_id", "cand_category"):
            if key in features:
                features[key][:, 1:] = rng.integers(1, schema.feature(key).vocabulary_size - 1, size=(6, 2))
        before = to_numpy(model.predict(features, verbose=0))

        future = {k: v.copy() for k, v in features.items()}
        for feature in schema.group("hist"):
            future[feature.key][:, cut:] = rng.integers(1, feature.vocabulary_size - 1, size=(6, length - cut))
        future["hist_time"][:, cut:] = future["hist_time"][:, cut:] + rng.integers(0, 50, size=(6, 1))
        after = to_numpy(model.predict(future, verbose=0))
        self.assertAllClose(after[:, 0], before[:, 0], atol=1e-5, msg=f"{name}: a future behaviour changed a score")
        self.assertFalse(
            np.allclose(after[:, 1:], before[:, 1:], atol=1e-6), f"{name}: the later candidates ignore their history"
        )

        others = {k: v.copy() for k, v in features.items()}
        for key in ("cand_item_id", "cand_category"):
            if key in others:
                others[key][:, 1:] = rng.integers(1, schema.feature(key).vocabulary_size - 1, size=(6, 2))
        changed = to_numpy(model.predict(others, verbose=0))
        self.assertAllClose(changed[:, 0], before[:, 0], atol=1e-5, msg=f"{name}: another candidate changed a score")


def benchmark_module(name):
    """benchmarks/<name>.py as a module (benchmarks/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_cli(*argv):
    """(exit status, stdout, stderr) of one `python -m zoo ...` command, run in this process."""
    import contextlib
    import io

    from zoo.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = exit_.code
    return status, out.getvalue(), err.getvalue()


def in_process_group(size, function):
    """[function(group) for each rank], each run in its own thread as one process of a
    zoo.datasets.ProcessGroup of `size` (allgather through a barrier); the first error is raised."""
    import threading

    from zoo.datasets import ProcessGroup

    barrier = threading.Barrier(size, timeout=120)
    slots, results, errors = [None] * size, [None] * size, [None] * size

    def allgather_of(rank):
        def allgather(value):
            slots[rank] = value
            barrier.wait()
            gathered = list(slots)
            barrier.wait()
            return gathered

        return allgather

    def run(rank):
        try:
            results[rank] = function(ProcessGroup(rank, size, allgather_of(rank)))
        except BaseException as error:  # noqa: BLE001 - given back below
            errors[rank] = error
            barrier.abort()  # the other ranks stop waiting

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)), None)
    if first is not None or any(errors):
        raise first or next(e for e in errors if e is not None)
    return results
