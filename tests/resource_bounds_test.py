"""Resource bounds: a config is refused before it allocates beyond zoo.presets.MAX_PARAMETERS, and a request
the backend cannot hold in memory is one ZooError line saying what to shrink, after which the model scores
as before.

(A preset whose config.json set mlp_units = [10**9], its checksum recomputed, made `zoo.load` allocate
without limit: 9.2 GB and growing, no error. A fresh lightsuan asked for a history too long for memory
raised a 31-line RESOURCE_EXHAUSTED traceback, and under JAX every later call failed: "Array has been
deleted", the weights having been donated to the failed call.)
"""

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras

import zoo
from tests.model_configs import SMALL
from tests.testing import ROOT, TestCase, small_simulator
from zoo.errors import ZooError


def peak_memory_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


OUT_OF_MEMORY = """
import os, resource, numpy as np, zoo
from tests.model_configs import SMALL
from tests.testing import small_simulator
from zoo.errors import ZooError

simulator = small_simulator(sequence_length=1024, timeline_length=1040)
model = zoo.get("lightsuan", schema=simulator.schema, **SMALL["lightsuan"])
import keras
if keras.backend.backend() == "tensorflow":
    model.jit_compile = False  # XLA compiles the capped request's new shapes with allocations outside TF's allocator
features, _ = simulator.sample(1024, seed=0)
one = {k: v[:1] for k, v in features.items()}
before = model.score(one)
candidates = model.score_candidates(one)


def address_space():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))


soft, hard = resource.getrlimit(resource.RLIMIT_AS)
# the request needs far more than the headroom above what the process holds now
resource.setrlimit(resource.RLIMIT_AS, (address_space() + (int(os.environ["HEADROOM_MB"]) << 20), hard))
for call in (lambda: model.score(features, batch_size=1024), lambda: model.score_candidates(features)):
    try:
        call()
        print("SCORED")
    except ZooError as error:
        print("ZOOERROR", str(error).replace(chr(10), " | "))
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
print("SAME", bool(np.allclose(model.score(one), before, atol=1e-6)),
      bool(np.allclose(model.score_candidates(one), candidates, atol=1e-6)))
"""


class ResourceBoundsTest(TestCase):
    def test_a_config_beyond_the_parameter_bound_is_refused_before_it_allocates(self):
        simulator = small_simulator()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "preset"
            zoo.save(zoo.get("din", schema=simulator.schema, **SMALL["din"]), folder)
            config = json.loads((folder / "config.json").read_text())
            config["config"]["mlp_units"] = [10**9]
            (folder / "config.json").write_text(json.dumps(config))
            metadata = json.loads((folder / "metadata.json").read_text())
            metadata["config_sha256"] = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
            (folder / "metadata.json").write_text(json.dumps(metadata))
            peak, start = peak_memory_mb(), time.perf_counter()
            with self.assertRaises(ZooError) as caught:
                zoo.load(folder)
            message = str(caught.exception)
        self.assertEqual(len(message.splitlines()), 1, message)
        self.assertIn("'din' would have more than 1,000,000,000 parameters (zoo.presets.MAX_PARAMETERS)", message)
        self.assertIn("weight 'mlp/dense_0/kernel' of shape [89, 1000000000]", message)
        self.assertLess(time.perf_counter() - start, 60)
        self.assertLess(peak_memory_mb() - peak, 512, "the refused config allocated its weights")

    def test_the_bound_applies_to_fresh_models_and_can_be_raised(self):
        schema = small_simulator().schema
        with self.assertRaisesRegex(ZooError, r"^din hyperparameters: 'din' would have more than 1,000,000,000"):
            zoo.get("din", schema=schema, mlp_units=(100_000, 100_000))
        bound = zoo.presets.MAX_PARAMETERS
        small = zoo.get("din", schema=schema, **SMALL["din"])
        try:
            zoo.presets.MAX_PARAMETERS = small.count_params() - 1
            with self.assertRaisesRegex(ZooError, f"more than {small.count_params() - 1:,} parameters"):
                zoo.get("din", schema=schema, **SMALL["din"])
            zoo.presets.MAX_PARAMETERS = small.count_params()
            self.assertEqual(zoo.get("din", schema=schema, **SMALL["din"]).count_params(), small.count_params())
        finally:
            zoo.presets.MAX_PARAMETERS = bound

    def test_running_out_of_memory_is_one_line_and_the_model_stays_usable(self):
        """A fresh lightsuan (L = 1024) in a process whose address space is capped 1 GB (TensorFlow: 2 GB) above what it holds
        after a first small request: 1024 rows at once need several GB. (On the CPU: the cap is the
        process's. TensorFlow ends the process (std::terminate) when an allocation outside its own
        allocator fails: its oneDNN kernels, with ops running in parallel another op's buffers, and XLA's
        compiler, which compiles the capped request's new shapes under the cap; so oneDNN and XLA are off
        and TensorFlow runs one op at a time here: its allocator raises. Even so, Eigen's matrix product
        inside TensorFlow's BatchMatMul kernel allocates its own work space with `new`: where the cap
        falls just after a tensor TensorFlow's allocator did get, that `new` fails and the process aborts
        (gdb: std::bad_alloc thrown from SingleBatchParallelMatMulKernel). Where the cap falls is fixed
        by the headroom (the same headroom aborts every time on one machine: 1,792 MB and 1,024 MB here,
        2,048 MB on another, of 8 tried), so TensorFlow's run is tried again at other headrooms.)"""
        env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0",
                   TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1", JAX_PLATFORMS="cpu",
                   CUDA_VISIBLE_DEVICES="")
        headrooms = (2048, 1536, 2560, 768) if keras.backend.backend() == "tensorflow" else (1024,)
        for headroom in headrooms:
            result = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY], env=dict(env, HEADROOM_MB=str(headroom)),
                                    capture_output=True, text=True, timeout=600, cwd=ROOT)
            if not (result.returncode == -6 and "std::bad_alloc" in result.stderr):
                break
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        lines = [line for line in result.stdout.splitlines() if line.split(" ")[0] in ("ZOOERROR", "SCORED", "SAME")]
        self.assertEqual(lines[-1], "SAME True True", result.stdout)
        self.assertEqual(len(lines), 3, result.stdout)
        for line in lines[:2]:
            self.assertRegex(line, r"^ZOOERROR lightsuan ran out of memory on this request( \(an allocation of "
                                   r"[\d.]+ [GM]B failed\))?: send fewer rows or candidates per call \(batch_size, "
                                   r"rows_per_call\), or use a model built for a shorter history than L = 1024$")
