import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np

from tests.testing import ROOT, TestCase

# One training run of deres_p (dropout 0.1 from the DeRes recipe, so the dropout RNG must resume too) on
# the simulator, 3 epochs of 8 steps, early stopping with patience 2. KILL_AT=n sends SIGKILL to itself
# after its n-th training step (a real kill -9, mid-epoch); the run writes its weights and History.
RUN = """
import json, os, signal, sys
import keras, numpy as np
import zoo
from tests.testing import small_simulator
from tests.model_configs import SMALL

out, kill_at, table_update = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None
keras.utils.set_random_seed(0)
simulator = small_simulator()
model = zoo.get("deres_p", schema=simulator.schema, **dict(SMALL["deres_p"], dropout=0.1))
train = simulator.dataset(256, batch_size=32, seed=1)
val = simulator.dataset(64, batch_size=32, seed=2, shuffle=False)

class Kill(keras.callbacks.Callback):
    steps = 0
    def on_train_batch_end(self, batch, logs=None):
        Kill.steps += 1
        if Kill.steps == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

# (compiled under JAX: op-by-op it took 3x as long; TensorFlow's XLA on CPU is left out)
history = zoo.recipes.fit(model, train, val, recipe="deres", epochs=3, batch_size=32, early_stopping_patience=2,
                          backup_dir=os.path.join(out, "backup"), callbacks=[Kill()], verbose=0,
                          jit_compile=keras.backend.backend() == "jax", table_update=table_update)
np.savez(os.path.join(out, "weights.npz"), *model.get_weights())
with open(os.path.join(out, "history.json"), "w") as f:
    json.dump({"history": history.history, "epoch": history.epoch}, f)
"""


def _run(out, kill_at, table_update=""):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", RUN, str(out), str(kill_at), table_update], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


class ResumeTest(TestCase):
    def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_result(self):
        self.check_resume("")

    def test_sparse_table_updates_resume_too(self):
        """Row-wise Adagrad's accumulators (and no moments for the tables) are restored with the weights."""
        self.check_resume("rowwise_adagrad")

    def check_resume(self, table_update):
        with tempfile.TemporaryDirectory() as tmp:
            whole, killed = Path(tmp, "whole"), Path(tmp, "killed")
            self.assertEqual(_run(whole, -1, table_update).returncode, 0)
            first = _run(killed, 12, table_update)  # epoch 2 of 3, step 4 of 8
            self.assertEqual(first.returncode, -signal.SIGKILL, first.stderr[-2000:])
            self.assertFalse((killed / "weights.npz").exists())
            metadata = json.loads((killed / "backup" / "training_metadata.json").read_text())
            self.assertEqual(metadata["epoch"], 1)
            second = _run(killed, -1, table_update)
            self.assertEqual(second.returncode, 0, second.stderr[-2000:])

            expected, resumed = np.load(whole / "weights.npz"), np.load(killed / "weights.npz")
            scale = max(np.abs(expected[key]).max() for key in expected.files)
            for key in expected.files:
                np.testing.assert_allclose(resumed[key], expected[key], rtol=0, atol=1e-5 * scale, err_msg=key)
            full = json.loads((whole / "history.json").read_text())
            again = json.loads((killed / "history.json").read_text())
            self.assertEqual(again["epoch"], full["epoch"])
            self.assertGreaterEqual(len(full["epoch"]), 2)
            for key, values in full["history"].items():
                np.testing.assert_allclose(again["history"][key], values, rtol=1e-5, err_msg=key)
            self.assertFalse((killed / "backup").exists())  # a finished run leaves no backup behind

    def test_a_resume_without_its_run_log_is_refused(self):
        from zoo.errors import ZooError
        from zoo.recipes.resume import RunLog

        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "training_metadata.json").write_text(json.dumps({"epoch": 2, "batch": -1}))
            log = RunLog(tmp)
            log.set_model(keras.Sequential([keras.layers.Dense(1)]))
            with self.assertRaisesRegex(ZooError, "backup has 2 epochs but run_log.json has 0"):
                log.on_train_begin()
