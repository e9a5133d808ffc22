"""The host allocator's settings for training: glibc malloc keeps the step's freed buffers for the next step.

An eager training step (torch, and the host side of JAX and TensorFlow) allocates and frees the same large
buffers every step: a [1024, 50, 64] float32 activation is 13 MB. glibc serves such a request from fresh
pages (`mmap`, or heap growth trimmed again at the free), so every step pays a page fault per 4 KiB of each
output: measured here, a [1024, 50, 64] multiply took 4-5 ms (3,201 faults) instead of 0.5-0.7 ms (0 faults)
once a tf.data pipeline had run in the process, and LightSUAN's torch step 830 -> 690 ms
(`benchmarks/backend_parity.py`). `tune()` sets three of glibc's documented `mallopt` parameters so that
these buffers are reused instead:

- M_MMAP_THRESHOLD = 32 MiB: requests up to 32 MiB come from the heap, not from fresh mappings;
- M_TOP_PAD = 64 MiB: the heap grows in steps of at least 64 MiB;
- M_TRIM_THRESHOLD = 256 MiB: up to 256 MiB of free memory at the heap's top stays mapped.

TensorFlow 2.21 sets M_MMAP_THRESHOLD back to 128 KiB the first time a process builds a `from_generator`
dataset's kernel (`tensorflow::data::ApplyPython311MemoryPatch` in GeneratorDatasetOp's constructor, once
per process; found with a gdb breakpoint on `mallopt`). Every zoo pipeline is one (a generator of row
indices) and is first iterated inside Keras' fit, after `tune()`: the settings were lost for the whole
run, every training step and the scoring after it (the paired bootstrap of 100,000 rows after a fit on
1M Criteo rows: 2.4 s and 790,000 page faults, 0.9 s and 4,000 once tuned again). So when TensorFlow is
loaded, `tune()` first builds and runs an empty generator dataset, then sets its values, which stay.

The cost: a training process keeps up to about 256 MiB of freed memory instead of returning it to the
system. `zoo.recipes.fit` calls `tune()`; `ZOO_HOST_ALLOCATOR=default` leaves glibc's settings alone. On a
system without glibc (macOS, Windows, musl) it does nothing. PyTorch's CPU performance guide suggests
preloading jemalloc or tcmalloc for the same reason; that needs a package and an LD_PRELOAD before the
process starts, which this does not.
"""

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h
SETTINGS = {M_MMAP_THRESHOLD: 32 << 20, M_TOP_PAD: 64 << 20, M_TRIM_THRESHOLD: 256 << 20}

_tuned = False


def _glibc():
    """glibc's handle, or None where the C library is another one."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018  (only glibc has it)
        return libc
    except (OSError, AttributeError):
        return None


def tune():
    """Applies SETTINGS once per process. Returns True when glibc holds them (now or from an earlier
    call), False where they do not apply (`ZOO_HOST_ALLOCATOR=default`, or no glibc)."""
    global _tuned
    if _tuned:
        return True
    if os.environ.get("ZOO_HOST_ALLOCATOR", "tuned") == "default":
        return False
    libc = _glibc()
    if libc is None:
        return False
    _run_tensorflows_patch()
    _tuned = all(libc.mallopt(option, value) == 1 for option, value in SETTINGS.items())
    return _tuned


def _run_tensorflows_patch():
    """Builds and runs an empty `from_generator` dataset when TensorFlow is loaded, so that its one-time
    M_MMAP_THRESHOLD of 128 KiB (see the module docstring) comes before the settings, not after them."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "data") or not tf.executing_eagerly():
        return  # (graph mode, e.g. after disable_eager_execution: no dataset runs here; the settings may not last)
    try:
        for _ in tf.data.Dataset.from_generator(lambda: iter(()), output_signature=tf.TensorSpec((), tf.int64)):
            pass
    except Exception:  # a speed-up only: never a reason for fit to fail
        return
