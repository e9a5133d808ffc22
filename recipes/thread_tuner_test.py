from unittest import mock

import keras

from tests.testing import TestCase, small_simulator
import zoo
from zoo.recipes import ThreadTuner, fit


class FakeRun:
    """Drives a ThreadTuner through training steps on a fake clock: `step_seconds(count, step)` is how long
    the step numbered `step` (from 1) takes at `count` threads; the first step after each change of the count
    takes `switch_seconds` more (the pool starting its threads)."""

    def __init__(self, step_seconds, switch_seconds=0.0, **options):
        self.now, self.count, self.calls = 0.0, 1, []
        self.step_seconds, self.switch_seconds, self.switched = step_seconds, switch_seconds, False
        self.tuner = ThreadTuner((2, 1), set_threads=self._set, get_threads=lambda: self.count,
                                 clock=lambda: self.now, **options)
        self.tuner.on_train_begin()
        self.steps = 0

    def _set(self, count):
        self.calls.append(count)
        self.count, self.switched = count, True

    def epoch(self, steps, pause=0.0):
        self.tuner.on_epoch_begin(0)
        for batch in range(steps):
            self.steps += 1
            self.now += self.step_seconds(self.count, self.steps) + (self.switch_seconds if self.switched else 0.0)
            self.switched = False
            self.tuner.on_train_batch_end(batch)
        self.now += pause  # a validation pass: not a training step


class ThreadTunerTest(TestCase):
    def test_an_idle_machine_gets_every_thread(self):
        # DCN-v2's step measured at 1 and 2 threads (116 and 78 ms); the pool's first step at 2 threads takes 5 s
        # more and the first step of an epoch follows a 30 s validation pass: neither may count.
        run = FakeRun(lambda count, step: {1: 0.116, 2: 0.078}[count], switch_seconds=5.0, probe_steps=2,
                      warmup_steps=3, period=10)
        run.epoch(4, pause=30.0)
        self.assertEqual(run.tuner.probes, [])  # warm-up (3 steps), then the probe started at 1 thread
        run.epoch(10)
        self.assertEqual(run.tuner.probes[0]["ms"], {1: 116.0, 2: 78.0})  # exact: no switch or pause step inside
        self.assertEqual(run.tuner.probes[0]["threads"], 2)
        self.assertEqual((run.count, run.tuner.threads), (2, 2))
        self.assertEqual(run.calls, [2])  # the probe started at the count in force (1): one change, kept

    def test_a_busy_machine_keeps_the_one_fewer(self):
        run = FakeRun(lambda count, step: {1: 0.030, 2: 0.330}[count], probe_steps=3, warmup_steps=2, period=10)
        run.epoch(12)
        self.assertEqual(run.tuner.probes[0]["ms"], {1: 30.0, 2: 330.0})
        self.assertEqual(run.count, 1)
        self.assertEqual(run.calls, [2, 1])

    def test_probes_come_twice_as_late_while_they_agree_and_follow_a_change_of_load(self):
        # Idle until step 120, then busy: 2 threads turn slow.
        def seconds(count, step):
            busy = step > 120
            return {1: 0.030, 2: 0.330 if busy else 0.020}[count]

        run = FakeRun(seconds, probe_steps=2, warmup_steps=2, period=10, max_period=40)
        run.epoch(290)
        ends = [probe["step"] for probe in run.tuner.probes]
        kept = [probe["threads"] for probe in run.tuner.probes]
        # A probe starts at one thread: from 1 thread in force it takes 5 steps (2 + 2 timed, the one after the
        # switch to 2 skipped), from 2 threads 6 (the switch back to 1 skipped too). The first starts at step 2
        # and ends at 7; the wait before the next: 10, doubled to 20 and 40 (the longest) while kept (95 + 40 =
        # 135 would be next). At step 121 the last 2 steps' median (20 and 330 ms) passes 1.5 x 20 ms: a probe
        # starts at once and ends at 126 + 1 with one thread; the wait starts again at 10 (137 -> 142), 20, 40.
        self.assertEqual(ends, [7, 23, 49, 95, 127, 142, 167, 212, 257])
        self.assertEqual(kept, [2, 2, 2, 2, 1, 1, 1, 1, 1])
        self.assertEqual(run.tuner.probes[4]["ms"], {1: 30.0, 2: 330.0})
        self.assertEqual(run.count, 1)

    def test_a_slower_machine_probes_early_and_keeps_a_count_still_best(self):
        # Every count slows 3x after step 40 (a co-tenant on every core): the probe comes early, keeps 2 threads.
        run = FakeRun(lambda count, step: {1: 0.030, 2: 0.020}[count] * (3 if step > 40 else 1), probe_steps=2,
                      warmup_steps=2, period=100)
        run.epoch(60)
        self.assertEqual([p["step"] for p in run.tuner.probes], [7, 47])  # 41: drift; from 2 threads: 6 steps
        self.assertEqual(run.tuner.probes[1]["ms"], {1: 90.0, 2: 60.0})
        self.assertEqual(run.count, 2)

    def test_a_drift_right_after_a_probe_waits_a_quarter_period(self):
        # Busy from step 8, just after the first probe (ended at 7, kept 2 threads): the recent steps pass the
        # drift at step 9, but the next probe starts only at 7 + 40 / 4 = 17 (ends at 23, from 2 threads).
        run = FakeRun(lambda count, step: {1: 0.030, 2: 0.330 if step >= 8 else 0.020}[count], probe_steps=2,
                      warmup_steps=2, period=40)
        run.epoch(30)
        self.assertEqual([(p["step"], p["threads"]) for p in run.tuner.probes], [(7, 2), (23, 1)])

    def test_a_fit_ending_inside_a_probe_keeps_a_measured_count(self):
        run = FakeRun(lambda count, step: {1: 0.030, 2: 0.020}[count], probe_steps=4, warmup_steps=2, period=10)
        run.epoch(6)  # the first probe is at 2 threads now: nothing measured yet says 2 is better
        self.assertEqual(run.count, 2)
        run.tuner.on_train_end()
        self.assertEqual((run.count, run.tuner.probes), (1, []))  # the count fit started with
        run = FakeRun(lambda count, step: {1: 0.030, 2: 0.020}[count], probe_steps=2, warmup_steps=2, period=10)
        run.epoch(19)  # the first probe kept 2 (step 7); the second (from 17) is at 1 thread
        self.assertEqual(run.count, 1)
        run.tuner.on_train_end()
        self.assertEqual(run.count, 2)

    def test_more_threads_must_be_faster_by_the_margin(self):
        for seconds, threads in ((0.0625, 1), (0.0625 * 0.97, 1), (0.0625 * 0.94, 2)):  # margin 5%
            run = FakeRun(lambda count, step: {1: 0.0625, 2: seconds}[count], probe_steps=2, warmup_steps=1, period=10)
            run.epoch(8)
            self.assertEqual(run.tuner.probes[0]["threads"], threads, seconds)

    def test_candidates_are_counts(self):
        with self.assertRaisesRegex(ValueError, "thread counts >= 1"):
            ThreadTuner((0, 1))

    def test_fit_tunes_torch_only_where_the_zoo_chose_its_threads(self):
        if keras.backend.backend() == "torch":
            import torch

            before = torch.get_num_threads()
        simulator = small_simulator()
        train = simulator.dataset(64, batch_size=2, seed=1)
        model = zoo.get("fm", schema=simulator.schema)
        with mock.patch("zoo.threads.tuned_counts", return_value=(1, 2)):
            history = fit(model, train, recipe="suan", batch_size=2, steps_per_epoch=30, epochs=1, verbose=0)
        tuner = history.thread_tuner
        if keras.backend.backend() != "torch":  # TensorFlow and XLA size their pools once, at start
            self.assertIsNone(tuner)
            return
        try:
            self.assertEqual(len(tuner.probes), 1)  # 5 warm-up steps, then 2 x 8 timed steps, within 30
            self.assertEqual(set(tuner.probes[0]["ms"]), {1, 2})
            self.assertEqual(torch.get_num_threads(), tuner.probes[0]["threads"])
        finally:
            torch.set_num_threads(before)
        with mock.patch("zoo.threads.tuned_counts", return_value=None):  # the user's own OMP_NUM_THREADS
            history = fit(model, train, recipe="suan", batch_size=2, steps_per_epoch=2, epochs=1, verbose=0)
        self.assertIsNone(history.thread_tuner)
