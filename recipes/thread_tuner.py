"""torch's intra-op thread count chosen during `fit` from the measured step times (issue #39).

`zoo.threads` starts torch's OpenMP pool at one thread fewer than the CPUs the process may use: beside
busy processes a full pool stalls at every one of an eager step's thousands of small ops (a DeepFM step
took 11.5x its idle time with 2 threads, 2.4x with one, on this project's 2-core machine). On an idle
machine that costs the models whose steps are matrix products: DCN-v2's three 624 x 624 cross layers at
batch 1024 took 116 ms a step on one thread against 76-80 ms on two. No fixed number suits both, and the
load changes during a run, so `fit` measures instead.
"""

import collections
import statistics
import time

import keras


class ThreadTuner(keras.callbacks.Callback):
    """Picks torch's intra-op thread count from the training steps' wall time, as tf.data's autotuning
    picks its parallelism: each probe runs `probe_steps` steps at every candidate count and keeps the
    fewest threads whose median step is within `margin` of the shortest (more threads must pay for the
    risk they carry when the load rises); the next probe comes `period` steps later, twice as late
    (up to `max_period`) when the probe kept the count the probe before it kept, `period` again when it
    changed it, and sooner (at least `period` / 4 steps after the last probe) when the median of the last
    `probe_steps` steps grows past (1 + `drift`) times the kept count's median in its probe (other
    processes took the CPUs: beside 3 busy processes on the 2-core machine, a step on 2 threads took
    8-11x its idle time).

    A step's time is the wall time between two consecutive `on_train_batch_end` calls of one epoch, so
    that waiting for the input pipeline (whose threads share the CPUs with torch's) counts; the first
    step of each epoch (after a validation pass) and the first step after each change of the count (the
    pool starts its threads) are not used. The count chosen last stays set after `fit` (the scoring
    that follows uses it); a fit that ends inside a probe gets the count the probe before kept, or the
    count it started with.

    torch's `set_num_threads` sizes the OpenMP pool of the thread that calls it, so this callback must
    run on fit's own thread: it is not `async_safe`, and Keras then calls the batch callbacks in step.

    Args:
        candidates: the thread counts to try, e.g. (1, 2).
        probe_steps: the steps timed per candidate and probe (their median decides).
        warmup_steps: the steps before the first probe (allocation and first-call costs).
        margin: a larger count is kept only when its median step is more than this fraction shorter.
        drift: how much slower the recent steps may grow before a probe comes early.
        period: the steps between two probes, doubling while probes keep the count.
        max_period: the longest wait between probes.
        set_threads: sets the count (default `torch.set_num_threads`).
        get_threads: reads the count in force at the start (default `torch.get_num_threads`).
        clock: the wall clock in seconds (default `time.perf_counter`).

    Attributes:
        threads: the count in force.
        probes: one record per finished probe: {"step": the step it ended at, "ms": {count: median
            step ms}, "threads": the count kept}.
    """

    def __init__(self, candidates, probe_steps=8, warmup_steps=5, margin=0.05, drift=0.5, period=200, max_period=3200, set_threads=None,
                 get_threads=None, clock=time.perf_counter):
        super().__init__()
        self.candidates = tuple(sorted(set(int(c) for c in candidates)))
        if not self.candidates or self.candidates[0] < 1:
            raise ValueError(f"ThreadTuner: candidates must be thread counts >= 1, got {candidates!r}")
        self.probe_steps, self.warmup_steps, self.margin, self.drift = probe_steps, warmup_steps, margin, drift
        self.base_period, self.max_period = period, max_period
        self._set, self._get, self._clock = set_threads, get_threads, clock
        self.threads = None
        self.probes = []
        self._step = 0
        self._last_end = None
        self._plan = []  # the counts of the steps still to time in the running probe
        self._timed = {}  # count -> [seconds] of the running probe
        self._next_probe = warmup_steps
        self._period = period
        self._skip = False
        self._recent = collections.deque(maxlen=probe_steps)  # the last steps' seconds outside probes
        self._reference = None  # the kept count's median step in the last probe
        self._started_with = None
        self._last_probe_end = 0

    def _apply(self, count):
        if count != self.threads:
            self._set(count)
            self.threads = count
            self._skip = True  # the pool's first step at a new size starts its threads

    def on_train_begin(self, logs=None):
        if self._set is None or self._get is None:
            import torch

            self._set, self._get = self._set or torch.set_num_threads, self._get or torch.get_num_threads
        self.threads = self._started_with = self._get()

    def on_train_end(self, logs=None):
        if self._plan:  # ended inside a probe: not a count measured as the better one
            self._plan, self._timed = [], {}
            self._apply(self.probes[-1]["threads"] if self.probes else self._started_with)

    def on_epoch_begin(self, epoch, logs=None):
        self._last_end = None

    def on_train_batch_end(self, batch, logs=None):
        now = self._clock()
        last, self._last_end = self._last_end, now
        self._step += 1
        measured = last is not None and not self._skip
        self._skip = False
        if self._plan:
            if measured:
                count = self._plan.pop(0)
                self._timed.setdefault(count, []).append(now - last)
            if not self._plan:
                self._finish_probe()
            else:
                self._apply(self._plan[0])
            return
        if measured:
            self._recent.append(now - last)
        drifted = (self._reference is not None and len(self._recent) == self._recent.maxlen
                   and self._step - self._last_probe_end >= self.base_period // 4
                   and statistics.median(self._recent) > (1 + self.drift) * self._reference)
        if (self._step >= self._next_probe or drifted) and len(self.candidates) > 1:
            self._plan = [c for c in self.candidates for _ in range(self.probe_steps)]
            self._timed = {}
            self._apply(self._plan[0])

    def _finish_probe(self):
        medians = {count: statistics.median(times) for count, times in self._timed.items()}
        shortest = min(medians.values())
        best = min(count for count, median in medians.items() if median * (1 - self.margin) <= shortest)
        kept = best == (self.probes[-1]["threads"] if self.probes else None)
        self._period = min(2 * self._period, self.max_period) if kept else self.base_period
        self._next_probe = self._step + self._period
        self._last_probe_end = self._step
        self.probes.append({"step": self._step, "ms": {c: round(1e3 * m, 3) for c, m in medians.items()},
                            "threads": best})
        self._reference = medians[best]
        self._recent.clear()
        self._apply(best)
