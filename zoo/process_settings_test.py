import json
import unittest

import keras

from tests.testing import TestCase, fresh_output

# A fresh interpreter: the backend loaded first (as Keras loads it), then `import zoo`; what changed between,
# and what zoo.configure_process() then sets.
CODE = """
import json, os, sys
import keras
backend = keras.backend.backend()
threads = lambda: __import__("torch").get_num_threads() if backend == "torch" else None
before = (dict(os.environ), list(sys.meta_path), threads())
import zoo
zoo.load  # the API is bound
after = (dict(os.environ), list(sys.meta_path), threads())
changed = sorted(k for k in set(before[0]) | set(after[0]) if before[0].get(k) != after[0].get(k))
applied = zoo.configure_process()
print(json.dumps({"changed": changed, "hooks": len(after[1]) - len(before[1]), "threads": [before[2], after[2]],
                  "applied": sorted(applied), "omp": os.environ.get("OMP_NUM_THREADS")}))
"""


@unittest.skipUnless(keras.backend.backend() == "torch", "each backend runs in its own interpreter here, once")
class ImportChangesNothingTest(TestCase):
    def run_code(self, backend):
        cleared = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                   "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "ZOO_THREADS",
                   "ZOO_JAX_CACHE", "ZOO_NATIVE_LOGS", "TF_CPP_MIN_LOG_LEVEL")
        return fresh_output(CODE, backend, cleared, XDG_CACHE_HOME=self.get_temp_dir())

    def test_import_zoo_prints_nothing_and_changes_no_setting_under_jax_and_torch(self):
        for backend in ("jax", "torch"):
            with self.subTest(backend=backend):
                out, err = self.run_code(backend)
                self.assertEqual(err, "")
                self.assertEqual(len(out.splitlines()), 1, out)  # the report alone
                report = json.loads(out)
                self.assertEqual((report["changed"], report["hooks"]), ([], 0))
                self.assertEqual(report["threads"][0], report["threads"][1])
                # the explicit call applies them
                self.assertIn("JAX_COMPILATION_CACHE_DIR", report["applied"])
                self.assertIn("OMP_NUM_THREADS", report["applied"])
                self.assertIsNotNone(report["omp"])
