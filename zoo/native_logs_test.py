import unittest

import keras

from tests.testing import TestCase, fresh_output
from zoo import native_logs

# A fresh interpreter that loads a spec log's training split and builds a model from Python (TF_CPP_MIN_LOG_LEVEL
# unset, as in a notebook): under any backend the data path imports TensorFlow.
CODE = """
import json, os, sys
from tests.impression_logs import impression_spec, write_impression_log
folder = sys.argv[1]
write_impression_log(os.path.join(folder, "log.csv"), rows=80)
json.dump(impression_spec(sequence_length=4), open(os.path.join(folder, "spec.json"), "w"))
import zoo
zoo.configure_process()
train, schema = zoo.datasets.load(os.path.join(folder, "spec.json"), os.path.join(folder, "log.csv"), split="train")
next(iter(train))
zoo.get("din", schema=schema)
import warnings, tensorflow
print("python's stderr still works", file=sys.stderr)
print("finder left:", zoo.native_logs._FINDER in sys.meta_path)
"""


@unittest.skipUnless(keras.backend.backend() == "tensorflow", "each backend runs in its own interpreter here, once")
class NativeLogsTest(TestCase):
    """No TensorFlow start-up line reaches the terminal from the Python API; everything else does."""

    def run_api(self, backend, **env):
        return fresh_output(CODE, backend, ("TF_CPP_MIN_LOG_LEVEL", "ZOO_NATIVE_LOGS"), args=(self.get_temp_dir(),),
                            ZOO_DATA_CACHE=self.get_temp_dir(), **env)

    def test_the_start_up_lines_are_dropped_under_jax_and_torch(self):
        # (under TensorFlow, `import zoo` imports it as Keras' backend, before configure_process can run)
        for backend in ("jax", "torch"):
            with self.subTest(backend=backend):
                out, err = self.run_api(backend)
                self.assertNotIn("oneDNN custom operations", err)
                self.assertNotIn("absl::InitializeLog", err)
                self.assertIn("python's stderr still works", err)
                self.assertIn("finder left: False", out)

    def test_opting_out_shows_them(self):
        """ZOO_NATIVE_LOGS=1 leaves TensorFlow's output alone: the lines the filter drops are there then."""
        _, err = self.run_api("jax", ZOO_NATIVE_LOGS="1")
        self.assertIn("absl::InitializeLog", err)
        noise = [line for line in err.splitlines() if native_logs.is_noise(line)]
        self.assertGreaterEqual(len(noise), 2, err)

    def test_the_pattern_is_matched_whole(self):
        self.assertTrue(native_logs.is_noise(
            "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"))
        self.assertFalse(native_logs.is_noise("E0000 something failed: WARNING: All log messages before"))
        self.assertFalse(native_logs.is_noise("Traceback (most recent call last):"))
