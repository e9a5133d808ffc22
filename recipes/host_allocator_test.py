import json
import os
from unittest import mock

from tests.testing import TestCase, run_python, small_simulator
import zoo
from zoo.recipes import fit, host_allocator

# Page faults per allocation of a 13 MB buffer (a [1024, 50, 64] float32 activation), written in full and
# freed, 20 times, in a fresh process (NumPy's huge-page advice off, as torch's allocations have none); PIN=1 first pins glibc's mmap threshold at its 128 KiB default
# (what a tf.data pipeline's run left in a process, measured: every such buffer then came from fresh
# pages); TUNE=1 then calls host_allocator.tune().
FAULTS = """
import ctypes, importlib.util, json, os, resource
import numpy as np
from numpy._core.multiarray import _set_madvise_hugepage

spec = importlib.util.spec_from_file_location("host_allocator", os.environ["MODULE"])  # not zoo: no Keras import
host_allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_allocator)

_set_madvise_hugepage(False)  # NumPy's own huge pages would hide the 4 KiB faults; torch asks for none

if os.environ["PIN"] == "1":
    ctypes.CDLL("libc.so.6").mallopt(host_allocator.M_MMAP_THRESHOLD, 128 << 10)
tuned = host_allocator.tune() if os.environ["TUNE"] == "1" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    np.ones((1024, 50, 64), np.float32)
before = faults()
for _ in range(20):
    np.ones((1024, 50, 64), np.float32)
print(json.dumps({"tuned": tuned, "faults_per_buffer": (faults() - before) / 20}))
"""
PAGES = 1024 * 50 * 64 * 4 // 4096  # 3,200 pages of 4 KiB in one buffer


class HostAllocatorTest(TestCase):
    def faults(self, pin, tune, **env):
        with mock.patch.dict(os.environ, dict(PIN=pin, TUNE=tune, MODULE=host_allocator.__file__, **env)):
            return json.loads(run_python(FAULTS, "tensorflow", timeout=120).splitlines()[-1])

    def test_tuned_glibc_reuses_freed_buffers_instead_of_faulting_in_fresh_pages(self):
        if host_allocator._glibc() is None:
            self.skipTest("the C library is not glibc")
        pinned = self.faults("1", "0")
        self.assertGreaterEqual(pinned["faults_per_buffer"], 0.9 * PAGES)  # the measurement sees fresh pages
        tuned = self.faults("1", "1")
        self.assertTrue(tuned["tuned"])
        self.assertLess(tuned["faults_per_buffer"], 0.02 * PAGES)
        opted_out = self.faults("1", "1", ZOO_HOST_ALLOCATOR="default")
        self.assertFalse(opted_out["tuned"])
        self.assertGreaterEqual(opted_out["faults_per_buffer"], 0.9 * PAGES)

    def test_fit_tunes_the_host_allocator(self):
        simulator = small_simulator()
        model = zoo.get("fm", schema=simulator.schema)
        with mock.patch.object(host_allocator, "tune", wraps=host_allocator.tune) as tune:
            fit(model, simulator.dataset(32, batch_size=16, seed=1), recipe="suan", epochs=1, verbose=0)
        tune.assert_called_once_with()
