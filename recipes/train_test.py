import csv
import json
import os
from pathlib import Path

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.testing import TestCase, run_cli
from zoo.errors import ZooError
from zoo.recipes.train import folder_lock, suspicious

TINY = {"attention_units": [8], "mlp_units": [8]}


def log_and_spec(folder):
    """(a 400-row impression log, its spec's path) written in `folder`."""
    log = write_impression_log(os.path.join(folder, "log.csv"), rows=400)
    spec = os.path.join(folder, "spec.json")
    with open(spec, "w") as f:
        json.dump(impression_spec(sequence_length=4), f)
    return log, spec


class TrainTest(TestCase):
    """`zoo.recipes.train` is `python -m zoo fit`: the same run, preset and numbers from one call."""

    def test_the_python_call_and_the_command_line_give_the_same_run(self):
        from zoo.recipes.sparse_table_adam import is_table

        folder = self.get_temp_dir()
        log, spec = log_and_spec(folder)
        lines = []
        source = zoo.recipes.DataSource(log, spec=spec, seed=3)
        result = zoo.recipes.train("din", source, os.path.join(folder, "python"), epochs=2, batch_size=64,
                                   hyperparameters=TINY, log=lines.append)
        self.assertTrue(lines[0].startswith("fit: din (a fresh model: class defaults, except attention_units=[8], "
                                            "mlp_units=[8])"), lines[0])
        self.assertIn("     recipe suan: 2 epoch(s), batch 64, learning rate 0.001, seed 3, tables dense (largest table "
                      f"{max(v.shape[0] for v in result['model'].weights if is_table(v)):,} rows < 100,000)",
                      lines)  # (the tables' update the zoo picked, and why)
        self.assertEqual(json.loads(open(os.path.join(result["preset"], "metadata.json")).read())["training"][
            "table_update"], "dense")
        self.assertTrue(any(line.startswith("kept epoch ") for line in lines), lines)
        self.assertTrue(any(line.startswith("test: baselines (AUC on the same rows)") for line in lines), lines)
        metadata = json.loads(open(os.path.join(result["preset"], "metadata.json")).read())
        self.assertEqual(metadata["metrics"], result["metrics"])
        self.assertEqual(set(result["baselines"]), {"validation", "test"})
        self.assertEqual(metadata["training"]["kept_epoch"], result["kept_epoch"])
        self.assertTrue(os.path.isfile(os.path.join(result["preset"], "preprocessing.json")))
        status, out, err = run_cli("fit", "din", "--data", log, "--spec", spec, "--epochs", "2", "--batch-size", "64",
                                   "--seed", "3", "--set", "attention_units=[8]", "--set", "mlp_units=[8]",
                                   "--out", os.path.join(folder, "cli"))
        self.assertEqual(status, 0, err)
        cli = json.loads(open(os.path.join(folder, "cli", "preset", "metadata.json")).read())
        self.assertEqual(cli["metrics"], result["metrics"])
        self.assertEqual(cli["training"], metadata["training"])
        python = os.path.join(folder, "python")
        for line in lines:  # every line of the account, the same but for the folder
            self.assertIn(line.strip().replace(python, os.path.join(folder, "cli")), out)

    def test_table_update_and_clipnorm_reach_the_optimizer(self):
        """`fit --table-update --clipnorm` trains with zoo.recipes.SparseTableAdam by that rule, its gradients'
        global norm clipped at that value, says both in the banner and records them in the preset; the same
        from Python, each alone."""
        folder = self.get_temp_dir()
        status, out, err = run_cli("fit", "din", "--rows", "128", "--epochs", "1", "--table-update", "rowwise_adagrad",
                                   "--clipnorm", "10", "--set", "attention_units=[8]", "--set", "mlp_units=[8]",
                                   "--out", folder)
        self.assertEqual(status, 0, err)
        self.assertIn("gradients' global norm clipped at 10, tables updated by rows (rowwise_adagrad)",
                      out.splitlines()[1])
        metadata = json.loads(open(os.path.join(folder, "preset", "metadata.json")).read())
        self.assertEqual(metadata["training"]["table_update"], "rowwise_adagrad")
        self.assertEqual(metadata["training"]["clipnorm"], 10.0)
        source = zoo.recipes.DataSource(rows=64)
        result = zoo.recipes.train("din", source, os.path.join(folder, "python"), epochs=1, table_update="lazy_adam",
                                   hyperparameters=TINY, log=None)
        self.assertEqual(type(result["model"].optimizer).__name__, "SparseTableAdam")
        self.assertEqual(result["model"].optimizer.table_update, "lazy_adam")
        self.assertIsNone(result["model"].optimizer.global_clipnorm)
        result = zoo.recipes.train("din", source, os.path.join(folder, "clipped"), epochs=1, clipnorm=2.5,
                                   hyperparameters=TINY, log=None)
        self.assertEqual(type(result["model"].optimizer).__name__, "Adam")
        self.assertEqual(result["model"].optimizer.global_clipnorm, 2.5)

    def test_a_held_folder_is_refused_and_freed_after(self):
        folder = os.path.join(self.get_temp_dir(), "run")
        with folder_lock(folder):
            with self.assertRaisesRegex(ZooError, rf"^--out {folder}: another run is using it \(pid {os.getpid()}\)"):
                with folder_lock(folder):
                    pass
            status, _, err = run_cli("fit", "din", "--rows", "64", "--epochs", "1", "--out", folder)
            self.assertEqual(status, 2)
            self.assertIn("another run is using it", err)
        with folder_lock(folder):  # free again
            pass
        self.assertFalse(os.path.exists(folder))  # made by the lock, left holding nothing but it: removed
        fresh = os.path.join(self.get_temp_dir(), "refused")
        with self.assertRaises(ZooError), folder_lock(fresh):  # a run refused before it wrote anything
            raise ZooError("refused")
        self.assertFalse(os.path.exists(fresh))
        with folder_lock(fresh):  # one that wrote something keeps its folder
            Path(fresh, "report.json").write_text("{}")
        self.assertEqual(sorted(os.listdir(fresh)), [".lock", "report.json"])

    def test_a_limited_source_reads_its_first_rows(self):
        folder = self.get_temp_dir()
        log, spec = log_and_spec(folder)
        source = zoo.recipes.DataSource(log, spec=spec, rows=100, limit=True)
        train, _ = source.load("train", batch_size=32)
        self.assertEqual(sum(int(batch[1].shape[0]) for batch in train), 100)
        self.assertGreater(source.info["rows"]["train"], 100)
        record, preprocessing = source.record()
        self.assertEqual(record["rows_used"], {"train": 100, "validation": 20})
        self.assertEqual(record["data"], "spec")
        self.assertIsNotNone(preprocessing)
        with self.assertRaisesRegex(ZooError, "^--protocol and --data-option are a named data set's"):
            zoo.recipes.DataSource(log, spec=spec, protocol="rest").load("train")

    def test_a_validation_auc_too_good_to_be_true_stops_fit_naming_the_likely_column(self):
        """A column marked known_before_label that is the label in another form ("outcome": hit on every click):
        the model reads it and ranks the validation rows at AUC 1.0, which no click log gives. fit stops in one
        line naming that column (of the feature columns, the one that alone ranks the log's first rows best),
        before the test split, the baselines and the preset; the command line prints the line, exit 2."""
        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=400)
        with open(log, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(log, "w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]) + ["outcome"])
            writer.writeheader()
            writer.writerows(dict(row, outcome="hit" if row["clicked"] == "1" else "miss") for row in rows)
        spec = impression_spec(sequence_length=4)
        spec["columns"]["outcome"] = {"role": "ctx", "known_before_label": True}
        message = (r"validation AUC (1\.0000|0\.999\d) is too good to be true \(>= 0\.999\): the label leaks into the "
                   r"features, most likely through column 'outcome' \(alone it ranks the labels of the first 400 rows "
                   r"of .*log\.csv at AUC 1\.000\); fit stops without a preset: remove that column")
        out = os.path.join(folder, "run")
        with self.assertRaisesRegex(ZooError, "^" + message):
            zoo.recipes.train("din", zoo.recipes.DataSource(log, spec=spec), out, epochs=3, batch_size=64,
                              learning_rate=0.01, hyperparameters=TINY, log=None)
        self.assertFalse(os.path.exists(os.path.join(out, "preset")))
        path = os.path.join(folder, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        status, _, err = run_cli("fit", "din", "--data", log, "--spec", path, "--epochs", "3", "--batch-size", "64",
                                 "--learning-rate", "0.01", "--set", "attention_units=[8]", "--set", "mlp_units=[8]",
                                 "--out", os.path.join(folder, "cli"))
        self.assertEqual(status, 2)
        self.assertRegex(err.splitlines()[-1], "^error: " + message)
        keys_only = dict(spec, columns={"user_id": {"role": "user"}, "item_id": {"role": "cand"}},
                         history={"from": "log", "fields": ["item_id"], "feedback": True},
                         statistics={"keys": ["user_id", "item_id"]})
        self.assertEqual(suspicious(0.9995, zoo.recipes.DataSource(log, spec=keys_only)),
                         "validation AUC 0.9995 is too good to be true (>= 0.999): the label leaks into the features, "
                         "through a key or the history (the spec has no other feature column to judge); fit stops "
                         "without a preset")
