"""The command line (`python -m zoo ...`), called in-process through zoo.__main__.main, and in a fresh
interpreter where what it prints and imports matters."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import keras
import numpy as np

import zoo
from tests.testing import ROOT, TestCase, small_simulator
from tests.testing import run_cli as run
from zoo.__main__ import _command_line, _is_noise, main
from zoo.recipes.evaluate import StepLog

TINY_DIN = ("--set", "mlp_units=(8,)", "--set", "attention_units=(4,)")
# Lines the quiet command line must never show: TensorFlow's C++ logs and the filtered warnings.
NOISE = re.compile(r"absl|oneDNN|^[IWE]\d{4} |cpu_feature_guard|UserWarning|softmax over axis", re.MULTILINE)


def run_fresh(*argv, python_options=()):
    """(exit status, stdout, stderr) of `python -m zoo ...` in a new interpreter (this backend)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, *python_options, "-m", "zoo", *argv], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stderr


def write_ratings(folder, users=8, per_user=10):
    """A MovieLens u.data of `users` x `per_user` ratings (every user and item has >= 5: kept by 5-core)."""
    rng = np.random.default_rng(0)
    with open(os.path.join(folder, "u.data"), "w") as f:
        for u in range(users):
            for k in range(per_user):
                f.write(f"{u + 1}\t{(u + k) % 10 + 1}\t{rng.integers(1, 6)}\t{1000 + 10 * k}\n")


def spying_on_fit():
    """({}, a stand-in for zoo.recipes.fit that runs it and records its History and Recipe there)."""
    captured, real_fit = {}, zoo.recipes.fit

    def spy(model, train, val=None, recipe="suan", **options):
        captured["history"] = real_fit(model, train, val, recipe=recipe, **options)
        captured["recipe"] = recipe
        return captured["history"]

    return captured, spy


class Interrupted(Exception):
    pass


class YourOwnDataTest(TestCase):
    """An impression log with a header, string ids, quoted titles and ISO times: spec draft, then fit,
    evaluate on later rows and score, each reading the data contract the preset carries."""

    def test_draft_fit_evaluate_score(self):
        """din on every backend; lightsuan, rest and a tuning run under TensorFlow only (the command path is
        the same on every backend, and those models train on all three in their own tests): CI's time."""
        from tests.impression_logs import write_impression_log

        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=400)
        later = write_impression_log(os.path.join(folder, "later.csv"), rows=120, seed=1,
                                     start="2024-03-11T08:00:00Z", days=2, unseen_from=70)
        spec = os.path.join(folder, "spec.json")
        status, out, err = run("spec", "draft", log, "--label", "clicked", "--time", "ts", "--user", "user_id",
                               "--item", "item_id", "--sequence-length", "8", "--out", spec)
        self.assertEqual(status, 0, err)
        self.assertIn("guess(es) noted", out)
        drafted = json.loads(Path(spec).read_text())
        self.assertEqual(drafted["history"]["fields"][0], "item_id")
        self.assertEqual(drafted["columns"]["title"]["role"], "cand")  # constant per item: an item attribute
        cases = (("din", TINY_DIN), ("lightsuan", ("--set", "num_layers=1", "--set", "mlp_units=(8,)",
                                                    "--set", "window_size=2")),
                 ("rest", ("--recipe", "rest", "--set", "model_dim=8", "--set", "encoder_depth=2",
                           "--set", "ffn_dim=8", "--set", "mlp_units=(8,)", "--batch-size", "64")))
        tensorflow = keras.backend.backend() == "tensorflow"
        for model, options in cases if tensorflow else cases[:1]:
            out_dir = os.path.join(folder, model)
            status, out, err = run("fit", model, "--data", log, "--spec", spec, "--out", out_dir, "--epochs", "1",
                                   *options)
            self.assertEqual(status, 0, err)
            # it says what it trains first, and a log file gets one line per epoch (no bar redraws, no colour)
            self.assertRegex(out, rf"(?m)^fit: {model} \(a fresh model: class defaults, except .*\); "
                                                  r"[\d,]+ parameters; backend \w+$")
            self.assertIn("train 320, validation 40, test 40 rows; 320 training rows", out)
            self.assertNotIn("\r", out)
            self.assertNotIn("\x1b[", out)
            preset = os.path.join(out_dir, "preset")
            metadata = json.loads(Path(preset, "metadata.json").read_text())
            self.assertEqual(metadata["training_data"]["data"], "spec")
            self.assertEqual(metadata["training_data"]["rows"]["train"] + metadata["training_data"]["rows"]["validation"]
                             + metadata["training_data"]["rows"]["test"], 400)
            self.assertIn("preprocessing_sha256", metadata)
            status, out, err = run("evaluate", preset, "--data", later)
            self.assertEqual(status, 0, err)
            shown = json.loads(out)  # (the JSON alone on stdout)
            self.assertEqual(shown["rows"], 120)
            self.assertIsNotNone(shown["gauc"])  # grouped by the spec's user column (user_user_id here)
        scores = os.path.join(folder, "scores.csv")
        status, out, err = run("score", os.path.join(folder, "din", "preset"), later, "--out", scores)
        self.assertEqual(status, 0, err)
        rows = Path(scores).read_text().splitlines()
        self.assertEqual(rows[0], "line,score,label")
        self.assertEqual([int(r.split(",")[0]) for r in rows[1:]], list(range(2, 122)))
        self.assertIn("mapped the 'item_id' of", out)
        status, _, err = run("evaluate", os.path.join(folder, "din", "preset"))
        self.assertEqual(status, 2)
        self.assertIn("trained on a data spec: give --data FILE", err)
        if not tensorflow:
            return
        best = os.path.join(folder, "best")
        status, out, err = run("tune", "lightsuan", "--data", log, "--spec", spec, "--search", "k", "--max-trials", "2",
                               "--dir", os.path.join(folder, "tuning"), "--save-best", best, "--set", "num_layers=1",
                               "--set", "mlp_units=(8,)", "--warm-start", os.path.join(folder, "lightsuan", "preset"),
                               "--executions-per-trial", "2")
        self.assertEqual(status, 0, err)
        self.assertRegex(out, r"trial 1/2  k=\d+  val_auc 0\.\d{4} ± 0\.\d{4} over 2 runs")
        self.assertRegex(out, r"the best trial leads the next by \d\.\d{4}, (more than|within) the spread")
        self.assertEqual(json.loads(Path(best, "metadata.json").read_text())["training_data"]["data"], "spec")
        status, out, err = run("evaluate", best, "--data", later)  # the tuned preset carries the contract too
        self.assertEqual(status, 0, err)


class CommandLineTest(TestCase):
    def test_every_command_has_help(self):
        for command in ("list", "fit", "evaluate", "reproduce", "tune", "export", "demo"):
            status, out, _ = run(command, "--help")
            self.assertEqual(status, 0, command)
            self.assertIn("usage:", out)
            self.assertIn("--verbose", out)

    def test_help_imports_no_backend(self):
        for argv in (("--help",), ("fit", "--help")):
            status, out, err = run_fresh(*argv, python_options=("-X", "importtime"))
            self.assertEqual(status, 0, err[-2000:])
            self.assertIn("usage:", out)
            imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
            self.assertTrue({"zoo", "argparse"} <= imported)  # what the help needs, and no more:
            self.assertFalse(imported & {"tensorflow", "keras", "jax", "torch", "numpy"}, argv)

    def test_native_noise_filter_drops_only_the_known_lines(self):
        noise = [
            "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
            "I0000 00:00:1796143705.484848   18806 port.cc:153] oneDNN custom operations are on. You may see slightly "
            "different numerical results due to floating-point round-off errors from different computation orders. "
            "To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
            "E0000 00:00:1796143705.484848   18806 util.cc:131] oneDNN supports DT_BOOL only on platforms with "
            "AVX-512. Falling back to the default Eigen-based implementation if present.",
        ]
        kept = [
            "E0000 00:00:1796143705.484848   18806 util.cc:131] Something else went wrong.",
            "Traceback (most recent call last):",
            "error: python -m zoo fit: unknown model 'dinn'",
        ]
        self.assertEqual([_is_noise(line + "\n") for line in noise + kept], [True] * 3 + [False] * 3)

    def test_the_filter_forwards_every_other_native_line_and_verbose_skips_it(self):
        code = (
            "import importlib.util, os, sys\n"
            "spec = importlib.util.spec_from_file_location('cli', 'zoo/__main__.py')\n"
            "cli = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(cli)\n"
            "cli._filter_native_stderr()\n"
            "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n"
            "E0000 00:00:1.2   7 util.cc:131] Something else went wrong.\\n')\n"
            "print('from Python', file=sys.stderr)\n"
        )
        # (torch: the module's `import zoo` loads no TensorFlow, whose own start-up lines this filter is not on for)
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, KERAS_BACKEND="torch"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stderr.splitlines()),
                         ["E0000 00:00:1.2   7 util.cc:131] Something else went wrong.", "from Python"])
        with mock.patch("zoo.__main__._quiet") as quiet, mock.patch("zoo.__main__.main", return_value=0):
            _command_line(["list", "--verbose"])
            quiet.assert_not_called()
            _command_line(["list"])
            quiet.assert_called_once()

    def test_fit_in_a_fresh_interpreter_is_quiet_then_evaluate_export(self):
        directory = Path(self.get_temp_dir())
        status, out, err = run_fresh("fit", "din", "--rows", "256", "--epochs", "1", *TINY_DIN,
                                     "--out", str(directory / "run"))
        self.assertEqual(status, 0, err[-3000:])
        self.assertIsNone(NOISE.search(out + err), (out + err)[-3000:])
        self.assertEqual(err.strip(), "")
        self.assertIn("val_auc", out)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
        self.assertRegex(plain, r"\b1/1 ")  # the training and scoring bars know their totals
        self.assertNotIn("Unknown", plain)
        report = json.loads((directory / "run" / "report.json").read_text())
        self.assertEqual(sorted(report["figures"]),
                         ["calibration.png", "roc_curve.png", "score_histograms.png", "training_curves.png"])
        self.assertTrue((directory / "run" / "preset" / "model.weights.h5").is_file())
        self.assertFalse((directory / "run" / "backup").exists())  # a finished run leaves no backup
        status, out, err = run("evaluate", str(directory / "run" / "preset"), "--rows", "128",
                               "--plots", str(directory / "figures"))
        self.assertEqual(status, 0, err)
        shown = json.loads(out)  # (the JSON alone on stdout)
        self.assertEqual(shown["rows"], 128)
        self.assertEqual((shown["calibration"]["bins"], shown["calibration"]["binning"]), (10, "equal-frequency"))
        self.assertEqual(set(shown["calibration"]), {"ece", "bins", "binning", "mean_pctr", "observed_ctr", "ratio"})
        self.assertTrue((directory / "figures" / "calibration.png").is_file())
        status, out, err = run("export", str(directory / "run" / "preset"), str(directory / "export" / "1"))
        self.assertEqual(status, 0, err)
        self.assertTrue((directory / "export" / "1" / "saved_model.pb").is_file())

    def test_fit_calibrate_and_a_calibrated_preset_everywhere(self):
        """fit --calibrate, then `calibrate` the shipped din preset: the calibration is in config.json, the recorded test
        metrics become the calibrated model's, and score and the TensorFlow export return calibrated scores."""
        directory = Path(self.get_temp_dir())
        status, out, err = run("fit", "din", "--rows", "1024", "--epochs", "2", *TINY_DIN, "--calibrate", "platt",
                               "--out", str(directory / "run"))
        self.assertEqual(status, 0, err)
        # a tiny DIN after 2 epochs of 1,024 rows may rank below chance: then "not kept", saying why
        self.assertRegex(out, r"(?m)^platt: slope -?\d\.\d{4}, intercept -?\d\.\d{4}: validation LogLoss "
                              r"\d\.\d{5} -> \d\.\d{5}; (kept|not kept \(.+\))$")
        metadata = json.loads((directory / "run" / "preset" / "metadata.json").read_text())
        config = json.loads((directory / "run" / "preset" / "config.json").read_text())["config"]
        self.assertEqual(metadata["calibration"]["kept"], "calibration" in config)
        out_dir = directory / "calibrated"
        status, out, err = run("calibrate", "din", "--rows", "2000", "--keep", "always", "--out", str(out_dir))
        self.assertEqual(status, 0, err)
        self.assertRegex(out, r"platt: slope \d\.\d{4}, intercept -?\d\.\d{4} on 2,000 validation rows: LogLoss")
        self.assertIn("test split (2,000 rows)", out)
        metadata = json.loads((out_dir / "metadata.json").read_text())
        config = json.loads((out_dir / "config.json").read_text())["config"]
        self.assertEqual(config["calibration"], {k: metadata["calibration"][k] for k in ("method", "slope", "intercept")})
        self.assertLess(metadata["calibration"]["logloss_after"], metadata["calibration"]["logloss_before"])
        shipped = zoo.presets.read_metadata(zoo.presets.resolve("din"))["metrics"]
        self.assertEqual(metadata["metrics_uncalibrated"], shipped)
        self.assertEqual(metadata["metrics"]["test_rows"], 2000)
        model, base = zoo.load(out_dir), zoo.load("din")
        features, _ = zoo.datasets.BehaviourSimulator().sample(32, seed=4)  # the simulator the preset fits
        from zoo.recipes.calibration import apply_calibration

        expected = apply_calibration(model.calibration, base.score(features))
        self.assertAllClose(model.score(features), expected, atol=1e-5)
        if keras.backend.backend() != "tensorflow":
            return  # the export runs under TensorFlow (and JAX: the same graph; zoo/serving tests cover it)
        status, _, err = run("export", str(out_dir), str(directory / "export" / "1"))
        self.assertEqual(status, 0, err)
        import tensorflow as tf

        served = tf.saved_model.load(str(directory / "export" / "1")).signatures["serving_default"]
        inputs = {k: tf.constant(v) for k, v in features.items()}
        self.assertAllClose(served(**inputs)["pctr"].numpy(), expected, atol=1e-5)

    def test_two_fits_with_one_seed_give_identical_metrics(self):
        directory = Path(self.get_temp_dir())
        reports = []
        for run_name in ("a", "b"):
            argv = ("fit", "din", "--rows", "256", "--epochs", "1", "--seed", "3", *TINY_DIN,
                    "--out", str(directory / run_name))
            status, _, err = run(*argv)
            self.assertEqual(status, 0, err)
            reports.append(json.loads((directory / run_name / "report.json").read_text()))
        self.assertEqual(reports[0]["auc"], reports[1]["auc"])
        self.assertEqual(reports[0]["logloss"], reports[1]["logloss"])

    def test_every_training_flag_reaches_the_training(self):
        """--batch-size, --epochs, --learning-rate and --seed: the steps, epochs, optimiser and seed of the
        run recipes.fit makes (96 rows at batch 32: 3 steps an epoch; the recipe's own batch is 256)."""
        captured, spy = spying_on_fit()
        out_dir = Path(self.get_temp_dir()) / "run"
        with mock.patch.object(zoo.recipes, "fit", spy):
            status, out, err = run("fit", "din", "--rows", "96", "--batch-size", "32", "--epochs", "2",
                                   "--learning-rate", "0.005", "--seed", "7", *TINY_DIN, "--out", str(out_dir))
        self.assertEqual(status, 0, err)
        history, recipe = captured["history"], captured["recipe"]
        self.assertEqual(history.params["steps"], 3)
        self.assertEqual(history.epoch, [0, 1])
        learning_rate = keras.ops.convert_to_numpy(history.trainer.optimizer.learning_rate)
        self.assertAllClose(learning_rate, 0.005)
        self.assertEqual(recipe.seeds, (7,))
        self.assertIn("2 epoch(s), batch 32, learning rate 0.005, seed 7", out)
        self.assertIn("96 training rows, 3 batches per epoch", out)
        metadata = json.loads((out_dir / "preset" / "metadata.json").read_text())
        self.assertEqual(metadata["training"], {"epochs": 2, "epochs_run": 2, "batch_size": 32, "learning_rate": 0.005,
                                                "table_update": "dense", "kept_epoch": 2})  # (small tables: dense)
        self.assertRegex(out, r"kept the last epoch, 2 of 2 \(val_auc 0\.\d{4}; the recipe has no early stopping\)")

    def test_a_fit_on_your_own_log_keeps_the_best_validation_epoch(self):
        from tests.impression_logs import impression_spec, write_impression_log

        folder = Path(self.get_temp_dir())
        log = write_impression_log(str(folder / "log.csv"), rows=400)
        spec = folder / "spec.json"
        spec.write_text(json.dumps(impression_spec(sequence_length=4)))
        captured, spy = spying_on_fit()
        with mock.patch.object(zoo.recipes, "fit", spy):
            status, out, err = run("fit", "din", "--data", log, "--spec", str(spec), "--epochs", "4",
                                   "--learning-rate", "0.05", *TINY_DIN, "--out", str(folder / "run"))
        self.assertEqual(status, 0, err)
        self.assertEqual(captured["recipe"].early_stopping_patience, 2)
        self.assertEqual((captured["recipe"].batch_size, captured["recipe"].epochs), (1024, 4))  # own-data default; flag
        scores = captured["history"].history["val_auc"]
        best = int(np.argmax(scores)) + 1
        kept = json.loads((folder / "run" / "preset" / "metadata.json").read_text())["training"]["kept_epoch"]
        self.assertEqual(kept, best)
        self.assertIn(f"kept epoch {best}: the best val_auc {scores[best - 1]:.4f} (", out)
        self.assertIn("patience 2)", out)
        # beside the trivial baselines on the same rows, flagged either way
        for split in ("validation", "test"):
            self.assertRegex(out, rf"(?m)^{split}: baselines \(AUC on the same rows\): global rate 0\.5000, item rate "
                                  r"0\.\d{4}, user running rate 0\.\d{4}, item \+ user 0\.\d{4}; din (beats|does NOT beat) "
                                  r"the best \(.+\) by [+-]\d\.\d{4} \(95% CI [+-]\d\.\d{4} \.\. [+-]\d\.\d{4}\)$")
        baselines = json.loads((folder / "run" / "preset" / "metadata.json").read_text())["baselines"]
        self.assertEqual(sorted(baselines), ["test", "validation"])
        self.assertEqual(len(baselines["validation"]["rows"]), 4)

    def test_an_interrupted_fit_is_refused_without_resume_and_continued_with_it(self):
        out = Path(self.get_temp_dir()) / "run"
        argv = ("fit", "din", "--rows", "64", "--batch-size", "32", "--epochs", "2", *TINY_DIN, "--out", str(out))
        ends = StepLog.on_epoch_end

        def interrupt_after_the_first_epoch(log, epoch, logs=None):
            ends(log, epoch, logs)
            if epoch == 1:
                raise Interrupted  # before Keras backs the second epoch up

        status, _, err = run(*argv[:-2], "--resume", "--out", str(out))
        self.assertEqual((status, err.strip().count("\n")), (2, 0))
        self.assertIn("holds no interrupted run", err)
        with mock.patch.object(StepLog, "on_epoch_end", interrupt_after_the_first_epoch):
            with self.assertRaises(Interrupted):
                run(*argv)
        status, _, err = run(*argv)
        self.assertEqual(status, 2)
        self.assertEqual(err.strip(), f"error: {out / 'backup'} holds an interrupted run (1 epoch(s) done): pass "
                                      "--resume to continue it or remove it")
        status, _, err = run(*argv, "--resume")
        self.assertEqual(status, 0, err)
        report = json.loads((out / "report.json").read_text())
        self.assertEqual(len(report["history"]["loss"]), 2)  # the first epoch's logs and the resumed second's
        self.assertFalse((out / "backup").exists())

    def test_evaluate_refuses_a_preset_of_another_schema_in_one_line(self):
        directory = Path(self.get_temp_dir())
        model = zoo.get("din", schema=small_simulator().schema, attention_units=(4,), mlp_units=(8,))
        model.save_to_preset(str(directory / "small"))
        status, _, err = run("evaluate", str(directory / "small"), "--rows", "16")
        self.assertEqual(status, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("din was built for another schema than this data: the history has length", err)
        self.assertIn("python -m zoo fit din (on the simulator), or zoo.get('din', schema=schema)", err)

    def test_a_data_set_with_protocol_and_rows(self):
        folder = self.get_temp_dir()
        write_ratings(folder)
        out = Path(self.get_temp_dir())
        status, _, err = run("fit", "din", "--data", "movielens", "--path", folder, "--protocol", "rest", "--rows",
                             "20", "--epochs", "1", *TINY_DIN, "--data-option", "sequence_length=4", "--out", str(out))
        self.assertEqual(status, 0, err)
        for name in ("report.json", "test_report.json"):  # the held-out splits: their first 20 / 5 = 4 rows
            self.assertEqual(json.loads((out / name).read_text())["rows"], 4)
        status, _, err = run("fit", "din", "--data", "movielens", "--path", folder, "--protocol", "deres")
        self.assertEqual(status, 2)
        self.assertIn("movielens has no protocol 'deres'", err)

    def test_argument_mistakes_answer_before_a_backend_is_imported(self):
        cases = ((("fit", "lightsaun"), "did you mean 'lightsuan'?"),
                 (("evaluate", "rest_movielen"), "did you mean 'rest_movielens'?"),
                 (("score", "din", "/nowhere.csv"), "/nowhere.csv: no such file or folder"),
                 (("fit", "din", "--data", "x.csv", "--spec", "/nowhere.json"), "/nowhere.json: no such file"))
        folder = self.get_temp_dir()
        log = os.path.join(folder, "log.csv")
        Path(log).write_text("user_id,item_id,clicked,ts\nu1,i1,1,1000\nu2,i2,0,1001\n")
        misspelt, absent = os.path.join(folder, "misspelt.json"), os.path.join(folder, "absent.json")
        Path(misspelt).write_text(json.dumps({"labell": {"column": "clicked"}}))
        Path(absent).write_text(json.dumps({"label": {"column": "clickd"}, "user": "user_id", "item": "item_id",
                                            "time": {"column": "ts"}, "columns": {"user_id": {"role": "user"}},
                                            "history": None}))
        cases += ((("fit", "din", "--data", log, "--spec", misspelt), "spec unknown key 'labell' (did you mean 'label'?)"),
                  (("tune", "din", "--search", "B", "--data", log, "--spec", absent),
                   "column 'clickd' named in the spec is absent (columns: user_id, item_id, clicked, ts)"),
                  (("spec", "draft", log, "--label", "clickd"), "--label clickd: "),
                  (("fit", "din", "--batch-size", "-3"), "argument --batch-size: -3; it must be at least 1"),
                  (("fit", "din", "--learning-rate", "nan"), "argument --learning-rate: nan; it must be a finite"),
                  (("fit", "din", "--seed", "-1"), "argument --seed: -1; a seed is from 0 to 4294967295"),
                  (("score", "din", log, "--batch-size", "x"), "argument --batch-size: 'x' is not a whole number"),
                  (("fit", "din", "--set", "mlp_units=eight"), "din hyperparameters: mlp_units is 'eight' (text)"),
                  (("fit", "llama", "--set", "ffn_dim=None"), "llama hyperparameters: ffn_dim is None; it must be an "
                                                              "integer >= 1"),  # (bst's ffn_dim may be None)
                  (("tune", "lightsuan", "--search", "k", "--set", "window_siz=3"),
                   "lightsuan has no hyperparameter window_siz (hyperparameters: schema, num_layers"),
                  (("fit", "deres_s", "--set", "weighting=3"), "deres_s hyperparameters: weighting is 3"))
        # rows read through a spec preset's contract: their header against its spec (the label where metrics need it)
        from tests.impression_logs import impression_spec, write_impression_log
        from zoo.datasets import fitted, prepare

        preset = os.path.join(folder, "preset")
        os.makedirs(preset)
        impressions = write_impression_log(os.path.join(folder, "impressions.csv"), rows=80)
        fitted.save_preprocessing(prepare(impression_spec(sequence_length=4), impressions, verbose=False,
                                          cache_dir=os.path.join(folder, "cache")).preprocessing(), preset)
        lines = Path(impressions).read_text().splitlines()
        for name, drop in (("no_price.csv", "price"), ("no_label.csv", "clicked")):
            at = lines[0].split(",").index(drop)  # (the first rows' fields hold no quoted comma before these)
            Path(folder, name).write_text("\n".join([",".join(c for i, c in enumerate(lines[0].split(",")) if i != at)]
                                                    + lines[1:2]) + "\n")
        no_price, no_label = os.path.join(folder, "no_price.csv"), os.path.join(folder, "no_label.csv")
        cases += ((("score", preset, no_price), f"{no_price}: column 'price' named in the spec is absent"),
                  (("request", preset, no_price), f"{no_price}: column 'price' named in the spec is absent"),
                  (("evaluate", preset, "--data", no_label), f"{no_label}: column 'clicked' named in the spec is absent"),
                  (("score", preset, impressions, "--history-from", no_price), "column 'price' named in the spec"))
        for argv, message in cases:
            result = subprocess.run([sys.executable, "-X", "importtime", "-m", "zoo", *argv], capture_output=True,
                                    text=True, cwd=ROOT, timeout=120)
            self.assertEqual(result.returncode, 2, argv)
            errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            self.assertEqual(len(errors), 1, result.stderr[-2000:])
            self.assertIn(message, errors[0])
            self.assertNotIn("tensorflow", result.stderr)  # -X importtime names every module imported
            self.assertNotIn("| keras", result.stderr)

    def test_a_second_fit_on_one_folder_is_refused_while_the_first_runs(self):
        import fcntl

        out = Path(self.get_temp_dir()) / "run"
        out.mkdir()
        with open(out / ".lock", "a+") as held:  # a live run holds the folder
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.write("pid 12345")
            held.flush()
            status, _, err = run("fit", "din", "--rows", "32", "--epochs", "1", *TINY_DIN, "--out", str(out))
        self.assertEqual(status, 2)
        self.assertIn(f"--out {out}: another run is using it (pid 12345)", err)
        self.assertFalse((out / "preset").exists())
        status, _, err = run("fit", "din", "--rows", "32", "--epochs", "1", *TINY_DIN, "--out", str(out))
        self.assertEqual(status, 0, err)  # released: the folder is free again

    def test_outputs_that_cannot_be_written_are_one_line(self):
        from tests.impression_logs import impression_spec, write_impression_log

        folder = Path(self.get_temp_dir())
        log = write_impression_log(str(folder / "log.csv"), rows=120)
        preset = folder / "preset"
        state = zoo.datasets.prepare(impression_spec(sequence_length=4), log, verbose=False).preprocessing()
        zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), attention_units=(4,), mlp_units=(8,)) \
            .save_to_preset(str(preset), preprocessing=state)
        a_file = folder / "a_file"
        a_file.write_text("x")
        cases = [(("score", str(preset), log, "--out", str(folder)), f"{folder}: Is a directory"),
                 (("score", str(preset), log, "--out", str(a_file / "scores.csv")), "Not a directory"),
                 (("spec", "draft", log, "--label", "clicked", "--out", str(a_file / "spec.json")), "Not a directory")]
        if os.path.exists("/dev/full"):
            cases.append((("score", str(preset), log, "--out", "/dev/full"), "No space left on device"))
        for argv, message in cases:
            status, _, err = run(*argv)
            self.assertEqual(status, 2, (argv, err))
            self.assertIn(message, err, argv)
            self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_bad_arguments_exit_2_with_one_line(self):
        cases = [
            (("fit", "dinn"), "unknown model 'dinn'"),
            (("fit", "din", "--data", "criteo"), "--data criteo needs --path"),
            (("fit", "din", "--data", "criteo", "--path", "/nowhere/x.csv"), "/nowhere/x.csv: no such file"),
            (("fit", "din", "--set", "depth"), "bad override 'depth'"),
            (("fit", "din", "--set", "depth=3", "--rows", "10"), "din has no hyperparameter depth"),
            (("fit", "din", "--rows", "0"), "--rows is 0; it must be at least 1"),
            (("fit", "din", "--protocol", "deres"), "--protocol is a data set's preprocessing"),
            (("tune", "din", "--search", "B", "--rows", "10"), "din has no hyperparameter num_blocks"),
            (("export", "din", "/tmp/zoo-no-version"), "numeric version"),
            (("evaluate", "./nowhere"), "no such preset directory"),
            (("frobnicate",), "invalid choice"),
            (("fit", "din", "--rows", "10", "--shard-dense"), "go with --strategy (or --devices)"),
            (("fit", "din", "--rows", "10", "--devices", "64"),
             "Keras 3 has no multi-device training" if keras.backend.backend() == "torch" else "64 devices asked for"),
        ]
        for argv in cases:
            argv, message = argv
            status, _, err = run(*argv)
            self.assertEqual(status, 2, argv)
            self.assertIn(message, err, argv)
            self.assertEqual(len(err.strip().splitlines()), 1, err)


class StdoutTest(TestCase):
    """A command whose result goes to stdout fails (exit 2, one line on stderr) when stdout cannot take it:
    closed (`zoo list >&-` exited 0, its output lost) or full (/dev/full)."""

    def run_list(self, **options):
        return subprocess.run([sys.executable, "-m", "zoo", "list"], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                              timeout=120, **options)

    def test_a_closed_or_full_stdout_is_an_error(self):
        closed = self.run_list(stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
        self.assertEqual(closed.returncode, 2)
        self.assertEqual(closed.stderr.strip().splitlines()[-1],
                         "error: stdout is closed, and this command writes its result there: give it a place to write "
                         "(a file with --out, or a pipe)")
        with open("/dev/full", "w") as full:
            done = self.run_list(stdout=full)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.strip().splitlines()[-1], "error: stdout: No space left on device")
        self.assertEqual(self.run_list(stdout=subprocess.DEVNULL).returncode, 0)
