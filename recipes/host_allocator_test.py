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
# How many of 200 live 1 MiB requests glibc serves from fresh mappings (mallinfo2's count of mmapped
# chunks) after tune() and then TensorFlow's first generator dataset: the heap's free top serves the first
# ones either way, the rest come from fresh mappings under a 128 KiB threshold and from the grown heap
# under 32 MiB. SKIP_PATCH=1 keeps tune() from running that dataset first.
MAPPED = """
import ctypes, importlib.util, json, os
import tensorflow as tf

spec = importlib.util.spec_from_file_location("host_allocator", os.environ["MODULE"])
host_allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_allocator)
if os.environ.get("SKIP_PATCH") == "1":
    host_allocator._run_tensorflows_patch = lambda: None
tuned = host_allocator.tune()
for _ in tf.data.Dataset.from_generator(lambda: iter(range(3)), output_signature=tf.TensorSpec((), tf.int64)):
    pass

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype = ctypes.c_void_p
before = libc.mallinfo2().hblks
buffers = [libc.malloc(1 << 20) for _ in range(200)]
mapped = libc.mallinfo2().hblks - before
for buffer in buffers:
    libc.free(ctypes.c_void_p(buffer))
print(json.dumps({"tuned": tuned, "mapped": mapped}))
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

    def test_the_settings_outlast_tensorflows_generator_dataset(self):
        # TensorFlow 2.21 sets M_MMAP_THRESHOLD to 128 KiB when a process builds its first generator dataset
        # (once): built after tune(), it undid the settings; tune() now runs it first.
        if host_allocator._glibc() is None:
            self.skipTest("the C library is not glibc")
        def mapped(**env):
            with mock.patch.dict(os.environ, dict(MODULE=host_allocator.__file__, **env)):
                return json.loads(run_python(MAPPED, "tensorflow", timeout=120).splitlines()[-1])

        import tensorflow as tf

        if tf.__version__.startswith("2.21."):  # the version pinned, whose generator dataset resets the threshold
            undone = mapped(SKIP_PATCH="1")
            self.assertGreater(undone["mapped"], 100)  # fresh mappings once the top is used: 128 KiB
        kept = mapped()
        self.assertTrue(kept["tuned"])
        self.assertEqual(kept["mapped"], 0)  # from the heap: the 32 MiB threshold stands

    def test_fit_tunes_the_host_allocator(self):
        simulator = small_simulator()
        model = zoo.get("fm", schema=simulator.schema)
        with mock.patch.object(host_allocator, "tune", wraps=host_allocator.tune) as tune:
            fit(model, simulator.dataset(32, batch_size=16, seed=1), recipe="suan", epochs=1, verbose=0)
        tune.assert_called_once_with()
