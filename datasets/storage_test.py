import fcntl
import os
import signal
import subprocess
import sys
import time

import numpy as np

from tests.testing import TestCase
from zoo.datasets import storage


class AbandonedBuildsTest(TestCase):
    """A build killed with SIGKILL leaves its temporary folder in the cache; the next build removes it, and
    never a folder a live build holds."""

    def test_a_killed_build_is_removed_at_the_next_run_and_a_live_one_kept(self):
        cache = self.get_temp_dir()
        # a build that is killed: a child process that holds its folder, as `cached` does, then dies by SIGKILL
        code = ("import sys, time; from zoo.datasets import storage\n"
                "storage.cached(sys.argv[1], 'spec', 'p', 'k', lambda tmp: (print(tmp, flush=True), time.sleep(60)))")
        child = subprocess.Popen([sys.executable, "-c", code, cache], stdout=subprocess.PIPE, text=True)
        killed = child.stdout.readline().strip()
        with open(os.path.join(killed, "partial.npy"), "wb") as f:
            f.write(b"\0" * 1024)
        self.assertEqual(storage.remove_abandoned(cache), [])  # held: the child is alive
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        self.assertTrue(os.path.isdir(killed))  # what SIGKILL leaves
        # a live build of this process (its lock held), and an older zoo's folder without a lock (just made)
        live = os.path.join(cache, ".spec-live")
        os.makedirs(live)
        holder = open(os.path.join(live, storage.BUILDING), "w")
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.addCleanup(holder.close)
        recent = os.path.join(cache, ".spec-recent")
        os.makedirs(recent)
        old = os.path.join(cache, ".spec-old")
        os.makedirs(old)
        past = time.time() - storage.ABANDONED_AFTER - 60
        os.utime(old, (past, past))
        target = storage.cached(cache, "spec", "p", "k2", lambda tmp: storage.write_meta(tmp, "x", _schema(), {}, {}))
        self.assertTrue(os.path.isfile(os.path.join(target, "meta.json")))
        self.assertFalse(os.path.exists(os.path.join(target, storage.BUILDING)))
        self.assertFalse(os.path.exists(killed))
        self.assertFalse(os.path.exists(old))
        self.assertTrue(os.path.isdir(live))
        self.assertTrue(os.path.isdir(recent))

    def test_a_failed_build_leaves_nothing(self):
        cache = self.get_temp_dir()

        def fail(tmp):
            raise ValueError("the build failed")

        with self.assertRaisesRegex(ValueError, "the build failed"):
            storage.cached(cache, "spec", "p", "k", fail)
        self.assertEqual(os.listdir(cache), [])


def _schema():
    from tests.testing import small_simulator

    return small_simulator().schema


class SaveFailureTest(TestCase):
    """A cache array that cannot be written whole (here a file size limit; a full disk alike) is an OSError
    naming the file (NumPy's own said "3000 requested and 2544 written", no file)."""

    def test_a_failed_write_names_the_file(self):
        import resource


        folder = self.get_temp_dir()
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
        try:
            with self.assertRaises(OSError) as caught:
                storage.save(folder, "labels", np.zeros(10_000, np.float32))
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        self.assertEqual(caught.exception.filename, os.path.join(folder, "labels.npy"))
        self.assertIn("writing the data cache failed", str(caught.exception))
