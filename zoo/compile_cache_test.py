import os

from tests.testing import TestCase, fresh_report

# A fresh interpreter (JAX): what zoo.configure_process() sets, then a jitted function, and whether JAX reported a hit
# of its persistent compilation cache (jax.monitoring's event) while compiling it.
REPORT = """
import json, os
import numpy as np
import zoo
zoo.configure_process()
import jax

events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
jax.jit(lambda x: (x @ x.T + 1.0).sum())(np.ones((64, 64), np.float32)).block_until_ready()
print(json.dumps({"folder": os.environ.get("JAX_COMPILATION_CACHE_DIR"), "applied": zoo.compile_cache.applied,
                  "config": jax.config.jax_compilation_cache_dir,
                  "minimum": jax.config.jax_persistent_cache_min_compile_time_secs,
                  "hit": any(name.endswith("/compilation_cache/cache_hits") for name in events)}))
"""


def _report(**env):
    cleared = ("JAX_COMPILATION_CACHE_DIR", "ZOO_JAX_CACHE", "XDG_CACHE_HOME", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")
    return fresh_report(REPORT, "jax", cleared, **env)


class CompileCacheTest(TestCase):
    def test_a_second_process_loads_what_the_first_compiled(self):
        home = self.get_temp_dir()
        folder = os.path.join(home, "zoo", "jax")
        default = _report(XDG_CACHE_HOME=home)
        self.assertEqual((default["folder"], default["config"], default["minimum"]), (folder, folder, 0.2))
        self.assertEqual(default["applied"], {"JAX_COMPILATION_CACHE_DIR": folder, "jax.config": folder,
                                              "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2"})
        # this small program compiles in under 0.2 s: with no minimum it is kept, and a second process loads it
        first = _report(XDG_CACHE_HOME=home, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
        self.assertEqual((first["minimum"], first["hit"]), (0.0, False))
        self.assertNotIn("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", first["applied"])  # the user's own
        self.assertTrue(os.listdir(folder))  # the compiled program is on disk
        second = _report(XDG_CACHE_HOME=home, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
        self.assertTrue(second["hit"])

    def test_the_users_folder_wins_and_off_leaves_jaxs_default(self):
        mine = os.path.join(self.get_temp_dir(), "mine")
        own = _report(JAX_COMPILATION_CACHE_DIR=mine)
        self.assertEqual((own["folder"], own["applied"]), (mine, {}))
        chosen = _report(ZOO_JAX_CACHE=mine)
        self.assertEqual((chosen["folder"], chosen["config"]), (mine, mine))
        off = _report(ZOO_JAX_CACHE="off")
        self.assertEqual((off["folder"], off["applied"], off["config"]), (None, {}, None))
        self.assertFalse(off["hit"])
