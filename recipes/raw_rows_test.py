import csv
import json
import os

import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase
from zoo.datasets import prepare
from zoo.recipes.raw_rows import score_raw_rows, trained_on_warning


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
        from zoo.recipes import calibrate_file

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

        scores = loaded.predict(later, verbose=0)  # file order
        status, _, err = run_cli("score", preset, later, "--out", os.path.join(folder, "scores.csv"))
        self.assertEqual(status, 0, err)
        rows = Path(folder, "scores.csv").read_text().splitlines()[1:]
        self.assertEqual([int(r.split(",")[0]) for r in rows], list(range(2, 62)))  # file order
        self.assertAllClose([float(r.split(",")[1]) for r in rows], scores, atol=1e-6)
        with open(later, newline="") as f:
            self.assertEqual([float(r.split(",")[2]) for r in rows], [float(r["clicked"]) for r in csv.DictReader(f)])

        report = loaded.evaluate(later, report_path=os.path.join(folder, "report.json"), verbose=0)
        self.assertEqual(report["rows"], 60)
        self.assertEqual(report["data"]["split"], "all")
        self.assertEqual(json.loads(Path(folder, "report.json").read_text())["auc"], report["auc"])
        status, out, err = run_cli("evaluate", preset, "--data", later)
        self.assertEqual(status, 0, err)
        shown = json.loads(out)  # (the JSON alone on stdout)
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

        model = zoo.get("din", schema=zoo.Schema.from_dict(
            prepare(impression_spec(sequence_length=4), write_impression_log(
                os.path.join(self.get_temp_dir(), "log.csv"), rows=60), verbose=False).preprocessing()["schema"]),
            **SMALL["din"])
        with self.assertRaisesRegex(ZooError, "carries no data contract"):
            model.predict("later.csv")
        with self.assertRaisesRegex(ZooError, "carries no data contract"):
            model.predict([{"user_id": "u1", "item_id": "i1"}])


class RawRowsThroughTheModelTest(TestCase):
    """A preset is a task: its predict, evaluate and fit take raw rows (a path, a DataFrame, a pyarrow Table, a
    dict of columns, a list of dicts) through its preprocessor, in the input's row order, and give what the
    command line gives on the same rows."""

    @classmethod
    def setUpClass(cls):
        import tempfile

        cls.folder = tempfile.mkdtemp()
        cls.log = write_impression_log(os.path.join(cls.folder, "log.csv"), rows=300)
        cls.later = write_impression_log(os.path.join(cls.folder, "later.csv"), rows=60, seed=2,
                                         start="2024-03-20T00:00:00Z", unseen_from=70)
        state = prepare(impression_spec(sequence_length=4), cls.log, verbose=False,
                        cache_dir=os.path.join(cls.folder, "cache")).preprocessing()
        model = zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), **SMALL["din"])
        cls.preset = os.path.join(cls.folder, "preset")
        model.save_to_preset(cls.preset, preprocessing=state)

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.folder, ignore_errors=True)

    def test_predict_on_a_dataframe_equals_the_command_line_row_for_row(self):
        import pandas
        import pyarrow

        from tests.testing import run_cli

        model = zoo.load(self.preset)
        rows = pandas.read_csv(self.later)
        scores = model.predict(rows, history_from=self.log, verbose=0)
        out = os.path.join(self.get_temp_dir(), "scores.csv")
        status, _, err = run_cli("score", self.preset, self.later, "--history-from", self.log, "--out", out)
        self.assertEqual(status, 0, err)
        with open(out, newline="") as f:
            written = list(csv.DictReader(f))
        self.assertEqual([int(r["line"]) for r in written], list(range(2, 62)))
        self.assertEqual(scores.shape, (60,))
        np.testing.assert_allclose(scores, [float(r["score"]) for r in written], rtol=0, atol=1e-6)
        # every other form of the same rows, and the rows shuffled: each row keeps its own score
        for other in (rows.to_dict("records"), {name: rows[name].tolist() for name in rows.columns},
                      pyarrow.Table.from_pandas(rows), self.later):
            np.testing.assert_array_equal(model.predict(other, history_from=[self.log], verbose=0), scores)
        shuffled = rows.sample(frac=1.0, random_state=3)
        np.testing.assert_array_equal(model.predict(shuffled, history_from=self.log, verbose=0),
                                      scores[shuffled.index.to_numpy()])
        # the histories come from the earlier log: without it the scores differ
        self.assertGreater(np.abs(model.predict(rows, verbose=0) - scores).max(), 0)

    def test_evaluate_on_rows_equals_the_command_line(self):
        import json

        import pandas

        from tests.testing import run_cli

        model = zoo.load(self.preset)
        report = model.evaluate(pandas.read_csv(self.later), history_from=self.log, verbose=0)
        status, out, err = run_cli("evaluate", self.preset, "--data", self.later, "--history-from", self.log)
        self.assertEqual(status, 0, err)
        shown = json.loads(out)  # (the JSON alone on stdout)
        self.assertIn("baselines (AUC on the same rows): global rate", err)  # the lines on stderr
        account = next(line for line in err.splitlines() if line.startswith("evaluated "))
        self.assertTrue(account.startswith(f"evaluated 60 row(s) of {self.later} ("), account)
        self.assertIn("to the OOV id (unknown to the fitted preprocessing)", account)  # the unseen users, counted
        self.assertIn("to the OOV id", report["data"]["account"])  # (the DataFrame's report says it too)
        for key in ("auc", "logloss", "gauc"):
            self.assertAlmostEqual(report[key], shown[key], places=6)
        self.assertEqual(report["rows"], 60)
        self.assertEqual(report["data"]["path"], "60 rows given in memory")
        # the baselines stand on the same rows in the same order (evaluate refuses otherwise): the file's report
        from_file = model.evaluate(self.later, history_from=self.log, verbose=0)
        self.assertEqual(report["baselines"], from_file["baselines"])
        self.assertGreater(len(report["baselines"]["rows"]), 1)

    def test_evaluate_on_the_file_it_was_trained_on_warns(self):
        """A spec preset evaluated on a file its metadata names as training data: a warning (Python) or a
        "warning:" line (command line, the JSON alone on stdout), and report["data"]["trained_on"]; rows of
        another file, none."""
        import warnings

        from tests.testing import run_cli

        model = zoo.load(self.preset)
        folder = os.path.join(self.get_temp_dir(), "trained")
        model.save_to_preset(folder, metadata={"training_data": {"data": "spec", "files": [self.log]}},
                             preprocessing=model.preprocessor.state)
        trained = zoo.load(folder)
        with self.assertWarnsRegex(UserWarning, r"log\.csv is the file this preset was trained on, so these metrics "
                                                r"include the rows that trained it \(not held out\)"):
            report = trained.evaluate(self.log, verbose=0)
        self.assertEqual([os.path.basename(f) for f in report["data"]["trained_on"]], ["log.csv"])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertNotIn("trained_on", trained.evaluate(self.later, verbose=0)["data"])
        self.assertFalse([w for w in caught if "trained on" in str(w.message)])
        status, out, err = run_cli("evaluate", folder, "--data", self.log)
        self.assertEqual(status, 0, err)
        self.assertEqual(json.loads(out)["rows"], report["rows"])
        self.assertEqual([line for line in err.splitlines() if "trained on" in line],
                         ["warning: " + str(trained_on_warning(report["data"]["trained_on"]))])

    def test_evaluate_on_rows_of_one_class_is_one_line(self):
        """It printed "auc": NaN and exited 0."""
        import pandas

        from tests.testing import run_cli
        from zoo.errors import ZooError

        rows = pandas.read_csv(self.later)
        model = zoo.load(self.preset)
        with self.assertRaisesRegex(ZooError, "^the labelled rows scored of 60 rows given in memory: all 60 are positive "
                                              "\\(label 1\\), so AUC and GAUC rank nothing"):
            model.evaluate(rows.assign(clicked=1), verbose=0)
        negatives = os.path.join(self.get_temp_dir(), "negatives.csv")
        rows.assign(clicked=0).to_csv(negatives, index=False)
        status, out, err = run_cli("evaluate", self.preset, "--data", negatives)
        self.assertEqual(status, 2, out)
        self.assertEqual(err.strip().splitlines()[-1], f"error: the labelled rows scored of {negatives}: all 60 are "
                         "negative (label 0), so AUC and GAUC rank nothing: evaluate on rows of both classes")

    def test_evaluate_groups_gauc_by_the_raw_user(self):
        """Users unseen in training share the OOV id; GAUC still groups each of them alone, as a GAUC computed
        from the file's own user column does (pairwise, here)."""
        import pandas

        model = zoo.load(self.preset)
        rows = pandas.read_csv(self.later)
        rows["user_id"] = [f"new-{u}" if int(u[-3:]) % 2 else u for u in rows["user_id"]]  # half the users unseen
        report = model.evaluate(rows, history_from=self.log, verbose=0)
        scores = model.predict(rows, history_from=self.log, verbose=0)
        total = weight = 0.0
        for _, group in rows.assign(score=scores).groupby("user_id"):
            positive, negative = group.score[group.clicked == 1].to_numpy(), group.score[group.clicked == 0].to_numpy()
            if len(positive) and len(negative):
                pairs = (positive[:, None] > negative[None, :]) + 0.5 * (positive[:, None] == negative[None, :])
                total, weight = total + len(group) * pairs.mean(), weight + len(group)
        self.assertAlmostEqual(report["gauc"], total / weight, places=6)

    def test_a_row_the_reading_drops_scores_nan_and_is_counted(self):
        import pandas

        model = zoo.load(self.preset)
        rows = pandas.read_csv(self.later)
        rows.loc[5, "ts"] = "not a time"
        self.assertEqual(model.preprocessor.spec["time"]["on_error"], "error")  # an unreadable time: one line
        with self.assertRaisesRegex(zoo.ZooError, r"^row 5 of the rows given: column 'ts' should be"):
            model.predict(rows, verbose=0)
        rows.loc[5, "ts"] = rows.loc[4, "ts"]
        rows.loc[7, "clicked"] = None  # an empty label drops the row from a labelled reading
        with self.assertWarnsRegex(UserWarning, "1 of 60 rows given were not scored"):
            scores = model.predict(rows, verbose=0)
        self.assertTrue(np.isnan(scores[7]))
        self.assertEqual(int(np.isnan(scores).sum()), 1)
        # the other rows score as the rows without it do (a dropped row is no one's history either)
        np.testing.assert_array_equal(np.delete(scores, 7), model.predict(rows.drop(index=7), verbose=0))

    def test_bad_rows_are_refused_in_one_line(self):
        import pandas

        model = zoo.load(self.preset)
        rows = pandas.read_csv(self.later)
        with self.assertRaisesRegex(zoo.ZooError, r"^the rows given: column 'price' named in the spec is absent"):
            model.predict(rows.drop(columns=["price"]), verbose=0)
        with self.assertRaisesRegex(zoo.ZooError, "columns of different lengths"):
            model.predict({"user_id": ["u1", "u2"], "item_id": ["i1"]}, verbose=0)
        with self.assertRaisesRegex(zoo.ZooError, "history_from is a path or a list of paths"):
            model.predict(rows, history_from=3, verbose=0)
        with self.assertRaisesRegex(zoo.ZooError, "takes no steps or callbacks"):
            model.predict(rows, steps=2)
        with self.assertRaisesRegex(zoo.ZooError, "takes no return_dict"):
            model.evaluate(rows, return_dict=True)
        with self.assertRaisesRegex(zoo.ZooError, "verbose is 'loud'"):
            model.predict(rows, verbose="loud")
        with self.assertRaisesRegex(zoo.ZooError, "history_from goes with raw rows"):
            features, _ = model.preprocessor.processed(self.later).take("all", np.arange(2))
            model.predict(features, history_from=self.log)

    def test_fit_takes_raw_rows_and_a_contract_batch_still_predicts(self):
        import pandas

        model = zoo.load(self.preset)
        model.compile(optimizer="adam", loss="binary_crossentropy")
        before = model.predict(self.later, verbose=0)
        history = model.fit(pandas.read_csv(self.log), validation_data=self.later, epochs=1, batch_size=64,
                            verbose=0)
        self.assertEqual(set(history.history), {"loss", "val_loss"})
        self.assertGreater(np.abs(model.predict(self.later, verbose=0) - before).max(), 0)
        features, _ = model.preprocessor.processed(self.later).take("all", np.arange(3))
        self.assertEqual(model.predict(features, verbose=0).shape, (3, 1))

    def test_the_preprocessor_reads_rows_in_file_order(self):
        model = zoo.load(self.preset)
        dataset, info = model.preprocessor.read(self.later, history_from=self.log)
        with open(self.later, newline="") as f:
            clicked = [float(r["clicked"]) for r in csv.DictReader(f)]
        labels = np.concatenate([np.asarray(y).reshape(-1) for _, y in dataset])
        np.testing.assert_array_equal(labels, clicked)
        scores = np.concatenate([np.asarray(model.predict(x, verbose=0)).reshape(-1) for x, _ in dataset])
        np.testing.assert_allclose(scores, model.predict(self.later, history_from=self.log, verbose=0), atol=1e-6)
        from zoo.datasets.pipeline import make_dataset

        processed = model.preprocessor.processed(self.later)
        with self.assertRaisesRegex(zoo.ZooError, "order is a permutation of the split's rows, without shuffle"):
            make_dataset(processed, "all", shuffle=True, order=np.arange(60))
