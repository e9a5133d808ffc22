import os
import sys
import types
from unittest import mock

from tests.testing import TestCase, fresh_report
from zoo import threads

# A fresh interpreter: what zoo.configure_process() leaves in the environment and in torch's pool (import zoo
# has loaded torch, the backend, already: the pool is resized).
REPORT = """
import json, os, sys
import zoo
zoo.configure_process()
import torch
print(json.dumps({"env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS",
                  "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")},
                  "torch_threads": torch.get_num_threads(), "usable": zoo.threads.usable_cpus(),
                  "applied": zoo.threads.applied, "tuned": zoo.threads.tuned_counts()}))
"""


def _report(**env):
    return fresh_report(REPORT, "torch", threads.SIZED + ("OMP_WAIT_POLICY", "ZOO_THREADS", "BEFORE"), **env)


class UsableCpusTest(TestCase):
    def quota_files(self, v2=None, v1=None):
        folder = self.get_temp_dir()
        paths = {"v2_max": os.path.join(folder, "cpu.max"), "v1_quota": os.path.join(folder, "quota"),
                 "v1_period": os.path.join(folder, "period")}
        if v2 is not None:
            with open(paths["v2_max"], "w") as file:
                file.write(v2)
        if v1 is not None:
            for key, value in zip(("v1_quota", "v1_period"), v1):
                with open(paths[key], "w") as file:
                    file.write(value)
        return paths

    def test_quota_from_cgroup_v2_and_v1(self):
        self.assertEqual(threads.cgroup_quota(**self.quota_files(v2="150000 100000\n")), 1.5)
        self.assertIsNone(threads.cgroup_quota(**self.quota_files(v2="max 100000\n")))
        self.assertEqual(threads.cgroup_quota(**self.quota_files(v1=("50000", "100000"))), 0.5)
        self.assertIsNone(threads.cgroup_quota(**self.quota_files(v1=("-1", "100000"))))
        self.assertIsNone(threads.cgroup_quota(**self.quota_files()))  # no cgroup files at all
        self.assertIsNone(threads.cgroup_quota(**self.quota_files(v2="garbage")))

    def test_usable_cpus_is_the_affinity_capped_by_the_quota_rounded_up(self):
        affinity = len(os.sched_getaffinity(0))
        self.assertEqual(threads.usable_cpus(**self.quota_files()), affinity)
        self.assertEqual(threads.usable_cpus(**self.quota_files(v2="50000 100000")), 1)  # 0.5 CPU -> 1 thread
        self.assertEqual(threads.usable_cpus(**self.quota_files(v2=f"{100000 * (affinity + 4)} 100000")), affinity)


class ConfigureTest(TestCase):
    def test_configure_process_sizes_torch_and_tensorflow_and_makes_openmp_passive(self):
        report = _report()
        usable, openmp = report["usable"], max(report["usable"] - 1, 1)
        self.assertEqual(report["env"], {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(openmp),
                                         "TF_NUM_INTRAOP_THREADS": str(usable), "TF_NUM_INTEROP_THREADS": str(usable)})
        self.assertEqual(report["torch_threads"], openmp)
        # fit's ThreadTuner then chooses between the one fewer and all of them (one CPU: no choice)
        self.assertEqual(report["tuned"], [usable - 1, usable] if usable > 1 else None)

    def test_fixed_sizes_the_pools_without_tuning(self):
        report = _report(ZOO_THREADS="fixed")
        self.assertEqual(report["env"]["OMP_WAIT_POLICY"], "PASSIVE")
        self.assertEqual(report["torch_threads"], max(report["usable"] - 1, 1))
        self.assertIsNone(report["tuned"])

    def test_the_users_own_settings_win(self):
        report = _report(OMP_NUM_THREADS="1", OMP_WAIT_POLICY="ACTIVE")
        self.assertEqual(report["env"]["OMP_WAIT_POLICY"], "ACTIVE")
        self.assertEqual(report["env"]["OMP_NUM_THREADS"], "1")
        self.assertEqual(report["torch_threads"], 1)
        self.assertNotIn("OMP_NUM_THREADS", report["applied"])
        self.assertIsNone(report["tuned"])  # fit leaves the user's count alone

    def test_opt_out_leaves_everything_alone(self):
        report = _report(ZOO_THREADS="default")
        self.assertEqual(report["applied"], {})
        self.assertEqual(set(report["env"].values()), {None})
        self.assertIsNone(report["tuned"])

    def test_torch_imported_first_gets_its_pool_resized(self):
        # torch sized its pool before zoo could set the environment: configure() resizes it to the quota.
        calls = []
        torch = types.SimpleNamespace(get_num_threads=lambda: 4, set_num_threads=calls.append)
        environment = {k: v for k, v in os.environ.items() if k not in threads.SIZED + ("OMP_WAIT_POLICY",)}
        with mock.patch.dict(os.environ, environment, clear=True), mock.patch.dict(sys.modules, torch=torch), \
                mock.patch.object(threads, "applied", {}), mock.patch.object(threads, "usable_cpus", lambda: 3):
            applied = threads.configure()
            self.assertEqual((os.environ["OMP_NUM_THREADS"], os.environ["TF_NUM_INTRAOP_THREADS"]), ("2", "3"))
            self.assertEqual(threads.tuned_counts(), (2, 3))  # the zoo's count: fit tunes it
        self.assertEqual(calls, [2])
        self.assertEqual(applied["torch.set_num_threads"], "2")

    def test_a_count_set_in_torch_before_zoo_is_kept_and_not_tuned(self):
        calls = []
        torch = types.SimpleNamespace(get_num_threads=lambda: 1, set_num_threads=calls.append)  # the user's 1
        environment = {k: v for k, v in os.environ.items() if k not in threads.SIZED + ("OMP_WAIT_POLICY", "ZOO_THREADS")}
        with mock.patch.dict(os.environ, environment, clear=True), mock.patch.dict(sys.modules, torch=torch), \
                mock.patch.object(threads, "applied", {}), mock.patch.object(threads, "usable_cpus", lambda: 3):
            applied = threads.configure()
            self.assertIsNone(threads.tuned_counts())
        self.assertEqual(calls, [])
        self.assertEqual(applied["torch.kept"], "1")
