"""The main job (zoo/demo.py) runs end to end, small, and its numbers say what each step proves."""

import contextlib
import io
import os
import unittest
from pathlib import Path

import keras

from tests.testing import TestCase
from zoo import demo


# The demo is the TensorFlow main job (scripts/demo.sh); under TensorFlow it traces six models' graphs,
# about 80 s on 2 CPU cores whatever the sizes, so it runs once, there. Each of its calls is tested on
# all three backends by the zoo's own tests (distillation, score_candidates, tuning, presets, export).
@unittest.skipUnless(keras.backend.backend() == "tensorflow", "the demo's backend; its parts run everywhere")
class DemoTest(TestCase):
    def test_small_demo_runs_every_step(self):
        cwd = os.getcwd()
        os.chdir(self.get_temp_dir())
        self.addCleanup(os.chdir, cwd)
        out = Path("demo_out")  # relative, as scripts/demo.sh writes it
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            results = demo.run(rows=256, epochs=1, out=out, candidates=40, requests=2, tuning_rows=128, trials=1)
        lines = printed.getvalue().splitlines()
        self.assertEqual([line[:5] for line in lines if line.startswith("[")],
                         [f"[{i}/6]" for i in range(1, 7)])
        for name in ("LightSUAN (student)", "SUAN (teacher)"):
            self.assertTrue(0.0 <= results[name]["auc"] <= 1.0 and results[name]["logloss"] > 0, results[name])
        scoring = results["scoring"]
        self.assertLess(scoring["max_difference"], 1e-5)  # parallel passes + cache = each candidate alone
        self.assertGreater(scoring["alone_per_s"], 0)
        self.assertGreater(scoring["parallel_per_s"], 0)
        self.assertEqual(set(results["tuning"]["best"]), {"k", "r"})
        self.assertTrue(any(line.startswith("trial 1/1  k=") for line in lines))
        self.assertLess(results["preset_difference"], 1e-6)
        self.assertEqual(results["serving"]["signatures"], ["score_all", "serving_default"])
        self.assertLess(results["serving"]["max_difference"], 1e-5)
        self.assertTrue((out / "lightsuan" / "model.weights.h5").is_file())
        self.assertTrue((out / "export" / "lightsuan" / "1" / "saved_model.pb").is_file())
        # A second run writes the next export version instead of failing on a non-empty folder.
        self.assertEqual(demo._next_version(out / "export" / "lightsuan"), out / "export" / "lightsuan" / "2")
        self.assertEqual(demo._next_version(out / "nothing"), out / "nothing" / "1")

