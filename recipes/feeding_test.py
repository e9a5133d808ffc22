"""The feeding path of `zoo.recipes.fit` (issue #19): Keras gets an endless pipeline and a fixed number of
steps per epoch, so no epoch ends on an exhausted iterator (which stalled Keras' torch loader for
seconds at the end of every epoch); and one run of benchmarks/backend_parity.py's smoke mode."""

import contextlib
import io
import warnings

import keras
import numpy as np
import tensorflow as tf

import zoo
from tests.testing import TestCase, benchmark_module, small_simulator


def generator_dataset(simulator, rows, batch_size):
    """A pipeline of unknown cardinality (as the zoo's readers build: tf.data from a Python generator)."""
    features, labels = simulator.sample(rows, seed=3)
    signature = (
        {key: tf.TensorSpec((None,) + value.shape[1:], value.dtype, name=key) for key, value in features.items()},
        tf.TensorSpec((None, 1), "float32"),
    )

    def generate():
        for begin in range(0, rows, batch_size):
            yield {k: v[begin : begin + batch_size] for k, v in features.items()}, labels[begin : begin + batch_size]

    return tf.data.Dataset.from_generator(generate, output_signature=signature)


class SpyFit:
    """Stands in for the model's own `fit`: records what `zoo.recipes.fit` hands Keras."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, **kwargs):
        self.calls.append(dict(kwargs, x=x))
        return keras.callbacks.History()


class FeedingTest(TestCase):
    def setUp(self):
        self.simulator = small_simulator()

    def fed(self, train, **overrides):
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(4,))
        spy = SpyFit()
        model.fit = spy
        zoo.recipes.fit(model, train, recipe="suan", verbose=0, **overrides)
        self.assertEqual(len(spy.calls), 1)
        return spy.calls[0]

    def test_an_endless_pipeline_with_the_steps_of_one_pass(self):
        # 100 rows in batches of 32: 4 batches per pass, the last one partial
        pipelines = {
            "known cardinality": self.simulator.dataset(100, batch_size=16, seed=1),
            "unknown cardinality (generator)": generator_dataset(self.simulator, 100, 16),
            "filtered": self.simulator.dataset(100, batch_size=16, seed=1).filter(lambda x, y: True),
        }
        for name, train in pipelines.items():
            with self.subTest(pipeline=name):
                call = self.fed(train, batch_size=32, epochs=3)
                self.assertEqual(int(call["x"].cardinality()), int(tf.data.INFINITE_CARDINALITY))
                self.assertEqual(call["steps_per_epoch"], 4)
                self.assertEqual(call["epochs"], 3)

    def test_given_steps_per_epoch_are_kept(self):
        call = self.fed(generator_dataset(self.simulator, 100, 16), batch_size=32, epochs=2, steps_per_epoch=2)
        self.assertEqual(int(call["x"].cardinality()), int(tf.data.INFINITE_CARDINALITY))
        self.assertEqual(call["steps_per_epoch"], 2)

    def test_every_epoch_trains_on_one_whole_pass(self):
        rows, batch_size, epochs = 100, 32, 3
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(4,))
        seen = []

        class Count(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                seen.append(0)

            def on_train_batch_end(self, batch, logs=None):
                seen[-1] += 1

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = zoo.recipes.fit(
                model, generator_dataset(self.simulator, rows, 16), recipe="suan", batch_size=batch_size,
                epochs=epochs, callbacks=[Count()], verbose=0,
                jit_compile=keras.backend.backend() == "jax",  # eager JAX takes a minute here, XLA seconds
            )
        self.assertEqual(seen, [int(np.ceil(rows / batch_size))] * epochs)
        self.assertEqual(len(history.history["loss"]), epochs)
        self.assertFalse([w for w in caught if "ran out of data" in str(w.message)])


def load_backend_parity():
    return benchmark_module("backend_parity")


class BackendParitySmokeTest(TestCase):
    def test_smoke_run_measures_and_prints_a_row(self):
        """One run of benchmarks/backend_parity.py --smoke (DIN, 2 epochs; XLA under JAX only), in this process
        and under this backend (the benchmark itself starts one process per backend)."""
        parity = load_backend_parity()
        jit = "auto" if keras.backend.backend() == "jax" else "off"
        result = parity.worker(dict(parity.run_spec(epochs=2, jit=jit, smoke=True), model="din"))
        self.assertEqual(result["backend"], keras.backend.backend())
        self.assertEqual(result["rows"], 512)
        self.assertGreater(result["samples_per_second"], 0)
        self.assertGreaterEqual(result["overhead_s"], 0)
        # fit's time splits into its set-up, the epochs and its end
        self.assertTrue(0 <= result["setup_s"] and 0 <= result["teardown_s"], result)
        self.assertLess(result["setup_s"] + result["teardown_s"] + sum(result["epoch_s"]), result["fit_s"] + 1e-6)
        self.assertTrue(0.0 <= result["auc"] <= 1.0 and result["logloss"] > 0, result)
        self.assertGreater(result["peak_mb"], 0)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            parity.print_table({("din", result["backend"]): result}, ["din"], [result["backend"]])
        self.assertRegex(printed.getvalue(), rf"\ndin\s+{result['backend']}\s+[\d,]+\s+[\d,]+\s+(-|1\.00)\s")
