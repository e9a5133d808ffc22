import json
import os
import subprocess
import sys

from tests.testing import ROOT, TestCase

# A fresh interpreter (JAX): what `import zoo` sets, then a jitted function, and whether JAX reported a hit
# of its persistent compilation cache (jax.monitoring's event) while compiling it.
REPORT = """
import json, os
import numpy as np
import zoo
import jax

events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
jax.jit(lambda x: (x @ x.T + 1.0).sum())(np.ones((64, 64), np.float32)).block_until_ready()
print(json.dumps({"folder": os.environ.get("JAX_COMPILATION_CACHE_DIR"), "applied": zoo.compile_cache.applied,
                  "config": jax.config.jax_compilation_cache_dir,
                  "hit": any(name.endswith("/compilation_cache/cache_hits") for name in events)}))
"""


def _report(**env):
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("JAX_COMPILATION_CACHE_DIR", "ZOO_JAX_CACHE", "XDG_CACHE_HOME")}
    environment.update(KERAS_BACKEND="jax", PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3",
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", **env)
    done = subprocess.run([sys.executable, "-c", REPORT], env=environment, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class CompileCacheTest(TestCase):
    def test_a_second_process_loads_what_the_first_compiled(self):
        home = self.get_temp_dir()
        folder = os.path.join(home, "zoo", "jax")
        first = _report(XDG_CACHE_HOME=home)
        self.assertEqual((first["folder"], first["config"]), (folder, folder))
        self.assertEqual(first["applied"], {"JAX_COMPILATION_CACHE_DIR": folder})
        self.assertFalse(first["hit"])
        self.assertTrue(os.listdir(folder))  # the compiled program is on disk
        second = _report(XDG_CACHE_HOME=home)
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
