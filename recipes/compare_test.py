import csv
import json
import os

import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase, run_cli
from zoo.recipes.baselines import PRIOR_ROWS
from zoo.recipes.metrics import auc


TIMINGS = ("samples_per_second", "scoring_us_per_row")  # measured again when a cell is trained again


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class CompareTest(TestCase):
    """Models and baselines on the same rows of a team's log: cells kept and resumed, the leaderboard's
    numbers those of the kept scores, the baselines read from the raw rows, the winner's preset usable."""

    def test_models_and_baselines_on_the_same_rows_resumable(self):
        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=400)
        later = write_impression_log(os.path.join(folder, "later.csv"), rows=80, seed=2, start="2024-03-20T00:00:00Z",
                                     days=2, unseen_from=70)
        spec = os.path.join(folder, "spec.json")
        with open(spec, "w") as f:
            json.dump(impression_spec(sequence_length=4), f)
        out = os.path.join(folder, "compare")
        lines = []
        options = dict(seeds=2, epochs=1, later=later, hyperparameters={m: SMALL[m] for m in ("din", "deepfm")},
                       log=lines.append)
        board = zoo.recipes.compare(["din", "deepfm"], log, spec, out, **options)
        self.assertEqual([m["model"] for m in board["models"]], ["din", "deepfm"])
        self.assertEqual(len(lines), 4)  # 2 models x 2 seeds, each trained once
        later_labels = np.array([float(r["clicked"]) for r in read(later)])
        for entry in board["models"]:
            self.assertEqual(entry["seeds"], 2)
            cells = os.path.join(out, "cells", entry["model"])
            for name, labels_file in (("test", "test_labels.npy"), ("later", "later_labels.npy")):
                labels = np.load(os.path.join(out, labels_file))
                suffix = "_scores.npy" if name == "test" else "_later_scores.npy"
                aucs = [auc(labels, np.load(os.path.join(cells, f"seed{k}{suffix}"))) for k in (0, 1)]
                self.assertAlmostEqual(entry[name]["auc"]["mean"], float(np.mean(aucs)), places=6)
                self.assertAlmostEqual(entry[name]["auc"]["sd"], float(np.std(aucs, ddof=1)), places=6)
                vs = entry[name]["vs_best_baseline"]
                best = max(board["baselines"][name].items(), key=lambda item: item[1]["auc"])
                self.assertEqual(vs["baseline"], best[0])
                self.assertEqual(vs["beats"], vs["ci95"][0] > 0)
            self.assertEqual(sorted(np.load(os.path.join(out, "later_labels.npy"))), sorted(later_labels))
        # the later rows' item-rate baseline from the raw rows: every row of the training log (and its rate), smoothed
        rows = read(log)
        prior = np.mean([float(r["clicked"]) for r in rows])
        counts, positives = {}, {}
        for r in rows:
            counts[r["item_id"]] = counts.get(r["item_id"], 0) + 1
            positives[r["item_id"]] = positives.get(r["item_id"], 0) + float(r["clicked"])
        later_rows = read(later)
        order = np.load(os.path.join(out, "later_lines.npy")) - 2  # each scored row's index in the file
        np.testing.assert_array_equal(np.load(os.path.join(out, "later_labels.npy")), later_labels[order])
        reference = [(positives.get(r["item_id"], 0) + PRIOR_ROWS * prior) / (counts.get(r["item_id"], 0) + PRIOR_ROWS)
                     for r in later_rows]
        self.assertAlmostEqual(board["baselines"]["later"]["item rate"]["auc"], auc(later_labels, reference), places=6)
        # the winner's preset scores the later rows as its cell did
        winner = board["winner"]
        self.assertTrue(os.path.isdir(winner["preset"]))
        preset = zoo.load(winner["preset"])
        scores = preset.predict(later, history_from=log, verbose=0)  # file order
        kept = np.load(os.path.join(out, "cells", winner["model"], f"seed{winner['seed']}_later_scores.npy"))
        self.assertEqual(scores.shape, (80,))
        np.testing.assert_allclose(scores[order], kept, rtol=1e-5, atol=1e-6)
        # evaluate with the training log as history: the same rows, scores and baselines as the comparison's
        report = preset.evaluate(later, history_from=[log], verbose=0)
        self.assertAlmostEqual(report["auc"], auc(np.load(os.path.join(out, "later_labels.npy")), kept), places=5)
        for row in report["baselines"]["rows"]:
            self.assertAlmostEqual(row["auc"], board["baselines"]["later"][row["name"]]["auc"], places=10)
        # a rerun trains nothing and gives the same leaderboard
        lines.clear()
        again = zoo.recipes.compare(["din", "deepfm"], log, spec, out, **options)
        self.assertEqual([line.endswith("kept") for line in lines], [True] * 4)
        self.assertEqual(json.dumps(again["models"]), json.dumps(board["models"]))
        self.assertTrue(os.path.isfile(os.path.join(out, "leaderboard.png")))
        # a run killed during a cell (its result is written last, so it is missing) trains that cell again
        # and gives the uninterrupted leaderboard
        os.remove(os.path.join(out, "cells", "din", "seed1.json"))
        lines.clear()
        resumed = zoo.recipes.compare(["din", "deepfm"], log, spec, out, **options)
        self.assertEqual([line.endswith("kept") for line in lines], [True, True, False, True])
        self.assertEqual(*(json.dumps([{k: v for k, v in m.items() if k not in TIMINGS} for m in b["models"]])
                           for b in (resumed, board)))
        # a rerun with other options (here the command line, at the models' default sizes and one seed) trains
        # its cells again instead of mixing in the kept ones, and the leaderboard holds this run's seeds only
        status, printed, error = run_cli("compare", "din", "deepfm", "--data", log, "--spec", spec, "--out", out,
                                         "--seeds", "1", "--epochs", "1", "--later", later)
        self.assertEqual(status, 0, error)
        self.assertIn("din seed 0: the kept cell was made from other data or options; trained again", printed)
        self.assertIn("| baseline: item + user |", printed)
        with open(os.path.join(out, "leaderboard.json")) as f:
            self.assertEqual([m["seeds"] for m in json.load(f)["models"]], [1, 1])
        status, _, error = run_cli("compare", "dinn", "--data", log, "--spec", spec)
        self.assertEqual((status, error.strip()), (2, "error: unknown model 'dinn' (known: " + error.split("(known: ")[1].strip()))

    def test_rows_that_rank_nothing_are_refused_before_training(self):
        """Later rows of one class printed AUC NaN; an event log's later rows (all positives) ended in a matplotlib
        ValueError. Both are one line now, before any model trains."""
        from zoo.errors import ZooError

        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=300)
        later = os.path.join(folder, "later.csv")
        rows = read(write_impression_log(later, rows=40, seed=2, start="2024-03-20T00:00:00Z"))
        with open(later, "w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]))
            writer.writeheader()
            writer.writerows(dict(row, clicked="0") for row in rows)
        lines = []
        with self.assertRaisesRegex(ZooError, f"^the rows of {later}: all 40 are negative \\(label 0\\), so AUC"):
            zoo.recipes.compare(["din"], log, impression_spec(sequence_length=4), os.path.join(folder, "a"), seeds=1,
                                epochs=1, later=later, log=lines.append)
        events = dict(impression_spec(sequence_length=4, statistics=False, feedback=False),
                      label={"events": True, "negatives": 1})
        with self.assertRaisesRegex(ZooError, "^compare --later .*: an event log's rows are all positives"):
            zoo.recipes.compare(["din"], log, events, os.path.join(folder, "b"), seeds=1, epochs=1, later=later,
                                log=lines.append)
        self.assertEqual(lines, [])
        self.assertFalse(os.path.exists(os.path.join(folder, "a", "cells")))

    def test_training_options_reach_every_cell_recipe(self):
        """compare's batch size, learning rate and clipping reach the recipe every cell trains by, early
        stopping added; the command line's --clipnorm is refused unless a finite number > 0."""
        from zoo.recipes.compare import PATIENCE, Comparison

        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=120)
        spec = os.path.join(folder, "spec.json")
        with open(spec, "w") as f:
            json.dump(impression_spec(sequence_length=4), f)
        comparison = Comparison(["din"], log, spec, os.path.join(folder, "compare"), seeds=1, epochs=2, batch_size=32,
                                learning_rate=0.01, clipnorm=5.0, log=None)
        recipe = comparison._recipe(comparison.table.rows[0], 0)
        self.assertEqual((recipe.batch_size, recipe.learning_rate, recipe.clipnorm, recipe.epochs,
                          recipe.early_stopping_patience), (32, 0.01, 5.0, 2, PATIENCE))
        plain = Comparison(["din"], log, spec, os.path.join(folder, "plain"), seeds=1, log=None)
        self.assertIsNone(plain._recipe(plain.table.rows[0], 0).clipnorm)
        status, _, error = run_cli("compare", "din", "--data", log, "--spec", spec, "--clipnorm", "0")
        self.assertEqual((status, error.strip().splitlines()[-1]),
                         (2, "error: python -m zoo compare: argument --clipnorm: 0; it must be a finite number > 0"))
