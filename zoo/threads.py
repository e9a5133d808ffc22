"""Thread pools sized to the CPUs this process may use, and OpenMP threads that sleep when idle.

torch's CPU kernels run on an OpenMP pool of one thread per core, whose idle threads spin (libgomp's
default, active wait policy) before they sleep. Beside other busy processes, or in a container whose CPU
quota is below the host's core count, those spinning threads take the cores from the threads doing the
work: measured on this project's 2-core machine at load 6, a DeepFM step took 1,035-1,167 ms instead of
20-21 ms with `OMP_WAIT_POLICY=PASSIVE` or one thread (issue #39). TensorFlow and XLA size their pools
from the CPU affinity, which a cgroup quota does not narrow.

`configure()` runs in `zoo.configure_process()` (never at `import zoo`: the command line calls it before any
backend loads, `zoo.recipes.fit` when it starts) and sets (each only where the user has not set it
already, so an explicit choice always wins):

- `OMP_WAIT_POLICY=PASSIVE`: OpenMP's idle threads sleep at once (read when torch loads its OpenMP);
- `TF_NUM_INTRAOP_THREADS`, `TF_NUM_INTEROP_THREADS` = `usable_cpus()`: the CPUs in this process's
  affinity, capped by its cgroup CPU quota (rounded up). Without a quota this equals what TensorFlow
  takes by default; under one it is the quota;
- `OMP_NUM_THREADS` (torch's intra-op pool, and NumPy's BLAS) = `usable_cpus() - 1`, at least 1. An
  OpenMP parallel region waits for every thread of the pool, so one thread descheduled by another
  process stalls each of an eager step's thousands of small ops: beside 3 busy processes on this 2-core
  machine a DeepFM step took 11.5x its idle time with 2 passive threads and 2.4x with one
  (`benchmarks/busy_machine.py`; idle, one thread cost 28 ms against 24 ms). TensorFlow's and XLA's
  pools hand out tasks to whichever thread is free, and kept 2.2-2.5x there at their default size. The
  CPU left over also runs the tf.data pipeline that feeds torch;
- when torch was imported before `zoo` (too late for the environment), `torch.set_num_threads` to the
  same number when torch holds more threads than that (its wait policy is then already fixed); a count
  at or below it is taken for the user's own and kept, and `fit` does not tune it.

That one fewer thread is where torch starts; `zoo.recipes.fit` then measures (`tuned_counts()`, and the
`ThreadTuner` of recipes/thread_tuner.py): it times a few training steps at each of the counts and keeps
the faster, again and again as the run goes on, so an idle machine gets every CPU and a busy one keeps
the one fewer. `ZOO_THREADS=fixed` keeps the sizes above without that measuring.

JAX's XLA:CPU pool keeps its own size (from the affinity): no documented setting sizes it, and it did not
slow down beside busy processes in the issue's measurements. `ZOO_THREADS=default` leaves everything as
the libraries set it. `benchmarks/busy_machine.py` measures each backend's step on the idle machine and
beside busy processes, with and without these settings.
"""

import math
import os
import sys

CGROUP_V2_MAX = "/sys/fs/cgroup/cpu.max"
CGROUP_V1_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
CGROUP_V1_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"

SIZED = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

applied = {}  # what configure() set in this process: {name: value}


def _read(path):
    try:
        with open(path) as file:
            return file.read().split()
    except OSError:
        return None


def cgroup_quota(v2_max=CGROUP_V2_MAX, v1_quota=CGROUP_V1_QUOTA, v1_period=CGROUP_V1_PERIOD):
    """The CPUs this process's cgroup allows (quota / period, a float), or None without a quota."""
    fields = _read(v2_max)
    if fields and len(fields) == 2 and fields[0] != "max":
        quota, period = fields
    else:
        quota, period = (_read(v1_quota) or [None])[0], (_read(v1_period) or [None])[0]
    try:
        quota, period = int(quota), int(period)
    except (TypeError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(**quota_files):
    """The CPUs in this process's affinity, capped by its cgroup CPU quota rounded up (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (macOS, Windows)
        cpus = os.cpu_count() or 1
    quota = cgroup_quota(**quota_files)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(cpus, 1)


def configure():
    """Applies the settings above once (`ZOO_THREADS=default` opts out); returns what it set."""
    if applied or os.environ.get("ZOO_THREADS", "sized") == "default":
        return applied
    cpus = usable_cpus()
    openmp = max(cpus - 1, 1)
    wanted = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(openmp), "TF_NUM_INTRAOP_THREADS": str(cpus),
              "TF_NUM_INTEROP_THREADS": str(cpus)}
    for name, value in wanted.items():
        if name not in os.environ:
            os.environ[name] = applied[name] = value
    torch = sys.modules.get("torch")
    if torch is not None and "OMP_NUM_THREADS" in applied:
        if torch.get_num_threads() > openmp:
            torch.set_num_threads(openmp)
            applied["torch.set_num_threads"] = str(openmp)
        else:  # torch holds a count already (the user's own set_num_threads, or one CPU): left as it is
            applied["torch.kept"] = str(torch.get_num_threads())
    return applied


def tuned_counts():
    """The torch thread counts `fit` chooses between (one fewer than the usable CPUs, and all of them), or
    None where the count is not the zoo's to choose: the user set OMP_NUM_THREADS, torch was imported
    before `zoo` with no more threads than the one fewer (the user's own `torch.set_num_threads`),
    `ZOO_THREADS` is "default" or "fixed", or one CPU leaves no choice."""
    if os.environ.get("ZOO_THREADS", "sized") in ("default", "fixed"):
        return None
    if "OMP_NUM_THREADS" not in applied or "torch.kept" in applied:
        return None
    cpus = usable_cpus()
    return (cpus - 1, cpus) if cpus > 1 else None
