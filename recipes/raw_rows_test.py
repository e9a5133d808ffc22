import csv
import os

import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase
from zoo.datasets import prepare
from zoo.recipes import score_raw_rows


class ScoreRawRowsTest(TestCase):
    def test_a_spec_preset_scores_labelled_rows_with_their_labels(self):
        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=200)
        later = write_impression_log(os.path.join(folder, "later.csv"), rows=40, seed=2, start="2024-03-20T00:00:00Z")
        cache = os.path.join(folder, "cache")
        state = prepare(impression_spec(sequence_length=4), log, cache_dir=cache, verbose=False).preprocessing()
        model = zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), **SMALL["din"])
        scores, lines, labels = score_raw_rows(model, None, later, state, cache_dir=cache, with_labels=True,
                                               verbose=0)
        with open(later, newline="") as f:
            clicked = [float(row["clicked"]) for row in csv.DictReader(f)]
        self.assertEqual(sorted(lines.tolist()), list(range(2, 42)))
        np.testing.assert_array_equal(labels, [clicked[line - 2] for line in lines])
        processed = prepare(None, later, preprocessing=state, cache_dir=cache, verbose=False)
        features, _ = processed.take("all", np.arange(40))
        self.assertAllClose(scores, np.asarray(model.score(features)).reshape(-1))
        two = score_raw_rows(model, None, later, state, cache_dir=cache, verbose=0)
        self.assertLen(two, 2)


class PresetNamedOnceTest(TestCase):
    """A preset trained on a data spec carries its preprocessor: from Python every step takes the preset
    once, and the command line's score, evaluate and calibrate print the same numbers as those calls."""

    def test_python_calls_and_the_command_line_agree(self):
        import json
        from pathlib import Path

        from tests.testing import run_cli
        from zoo.datasets import Preprocessor
        from zoo.recipes import calibrate_file, evaluate_file, score_file

        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=240)
        later = write_impression_log(os.path.join(folder, "later.csv"), rows=60, seed=2, start="2024-03-20T00:00:00Z")
        state = prepare(impression_spec(sequence_length=4), log, verbose=False).preprocessing()
        model = zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), **SMALL["din"])
        self.assertIsNone(model.preprocessor)  # a fresh model has none
        preset = os.path.join(folder, "preset")
        model.save_to_preset(preset, preprocessing=state)

        loaded = zoo.load(preset)
        self.assertIsInstance(loaded.preprocessor, Preprocessor)
        self.assertEqual(loaded.preprocessor.state, state)
        self.assertEqual(loaded.preprocessor.user_key, "user_user_id")
        dataset, info = loaded.preprocessor.read(later)
        self.assertEqual(info["rows"]["all"], 60)
        self.assertEqual(sum(int(labels.shape[0]) for _, labels in dataset), 60)

        scored = score_file(preset, later, verbose=0)  # the folder named once, here and below
        self.assertEqual(scored.lines.tolist(), list(range(2, 62)))  # file order
        status, _, err = run_cli("score", preset, later, "--out", os.path.join(folder, "scores.csv"))
        self.assertEqual(status, 0, err)
        rows = Path(folder, "scores.csv").read_text().splitlines()[1:]
        self.assertAllClose([float(r.split(",")[1]) for r in rows], scored.scores, atol=1e-6)
        self.assertEqual([float(r.split(",")[2]) for r in rows], scored.labels.tolist())

        report = evaluate_file(loaded, later, report_path=os.path.join(folder, "report.json"), verbose=0)
        self.assertEqual(report["rows"], 60)
        self.assertEqual(report["data"]["split"], "all")
        self.assertEqual(json.loads(Path(folder, "report.json").read_text())["auc"], report["auc"])
        status, out, err = run_cli("evaluate", preset, "--data", later)
        self.assertEqual(status, 0, err)
        shown = json.loads(out[out.index("{"):])
        self.assertAlmostEqual(shown["auc"], report["auc"], places=6)
        self.assertAlmostEqual(shown["logloss"], report["logloss"], places=6)

        # an untrained model may rank below chance: then both keep it uncalibrated and say why, with one fit
        calibrated, fitted = calibrate_file(preset, later, "platt", verbose=0)
        self.assertEqual(calibrated.preprocessor.state, state)
        out_dir = os.path.join(folder, "calibrated")
        status, out, err = run_cli("calibrate", preset, "--data", later, "--out", out_dir)
        self.assertEqual(status, 0, err)
        self.assertIn(f"slope {fitted['slope']:.4f}, intercept {fitted['intercept']:.4f} on 60 ", out)
        self.assertEqual(zoo.load(out_dir).preprocessor.state, state)  # the calibrated preset keeps the contract
        calibrated.save_to_preset(os.path.join(folder, "from_python"))  # writes the preprocessor it carries
        self.assertTrue(Path(folder, "from_python", "preprocessing.json").is_file())
        # the whole command as one call: the same calibration and the same metadata as the command line's preset
        result = zoo.recipes.calibrate_preset(preset, os.path.join(folder, "preset_call"), later, verbose=0)
        self.assertEqual((result["report"]["slope"], result["report"]["kept"]), (fitted["slope"], fitted["kept"]))

        def metadata(name):
            data = json.loads(Path(folder, name, "metadata.json").read_text())
            return {k: v for k, v in data.items() if k not in ("date",) and not k.endswith("_sha256")}

        self.assertEqual(metadata("preset_call"), metadata("calibrated"))

    def test_a_model_without_a_preprocessor_is_refused_in_one_line(self):
        from zoo.errors import ZooError
        from zoo.recipes import score_file

        model = zoo.get("din", schema=zoo.Schema.from_dict(
            prepare(impression_spec(sequence_length=4), write_impression_log(
                os.path.join(self.get_temp_dir(), "log.csv"), rows=60), verbose=False).preprocessing()["schema"]),
            **SMALL["din"])
        with self.assertRaisesRegex(ZooError, "carries no data contract"):
            score_file(model, "later.csv")
