import os

import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.datasets import eleme, prepare
from zoo.errors import ZooError


class ElemeTest(TestCase):
    def written(self, rows=200):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "eleme.csv")
        simulator = small_simulator()
        eleme.write_simulated(path, simulator, rows, seed=3)
        return folder, path, simulator

    def test_simulated_rows_round_trip(self):
        folder, _, simulator = self.written()
        processed = prepare("eleme", folder, cache_dir=self.get_temp_dir(), sequence_length=8)
        self.assertEqual(sum(processed.rows.values()), 200)
        self.assertEqual(processed.info["ignored_columns"], ["price_list"])
        schema = processed.schema
        self.assertTrue(schema.time)
        self.assertEqual(schema.feature("hist_item_id"), schema.feature("cand_item_id").__class__(
            "item_id", "hist", schema.feature("cand_item_id").vocabulary_size, 8))
        expected, _ = simulator.sample(200, seed=3)
        for split in ("train", "validation", "test"):
            features, labels = processed.take(split, np.arange(processed.rows[split]))
            schema.validate(features, labels)
            valid = features["hist_item_id"] > 0
            cand_time = np.broadcast_to(features["cand_time"], valid.shape)
            self.assertTrue(np.all(features["hist_time"][valid] < cand_time[valid]))
        # The history times are the simulator's (times - timediff), rows in file order within a split.
        features, _ = processed.take("train", np.arange(processed.rows["train"]))
        times = set(map(tuple, expected["hist_time"].tolist()))
        self.assertTrue(all(tuple(t) in times for t in features["hist_time"].tolist()))

    def test_behaviours_not_before_the_exposure_are_removed(self):
        folder, path, _ = self.written(20)
        with open(path) as f:
            lines = f.read().splitlines()
        header = lines[0].split(",")
        column = header.index("timediff_list")
        fields = lines[1].split(",")
        diffs = fields[column].split(";")
        diffs[-1] = "0"  # the newest behaviour at the exposure's own second
        fields[column] = ";".join(diffs)
        lines[1] = ",".join(fields)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        processed = prepare("eleme", folder, cache_dir=self.get_temp_dir(), sequence_length=8)
        self.assertIn("removed 1 behaviour(s) not strictly before their exposure", processed.info["repairs"])
        account = processed.info["accounting"]["eleme.csv"]  # the row is kept, repaired
        self.assertEqual((account["read"], account["kept"], account["repaired"], account["dropped"]), (20, 19, 1, 0))

    def test_header_only_file_is_refused(self):
        folder, path, _ = self.written(5)
        with open(path) as f:
            header = f.readline()
        with open(path, "w") as f:
            f.write(header)
        with self.assertRaisesRegex(ZooError, r"eleme.csv: the file holds only its header line, no data rows$"):
            prepare("eleme", folder, cache_dir=self.get_temp_dir())

    def test_missing_columns_and_ragged_lists(self):
        folder, path, _ = self.written(5)
        with open(path) as f:
            lines = f.read().splitlines()
        with open(path, "w") as f:
            f.write("\n".join([lines[0].replace("timediff_list", "diffs")] + lines[1:]) + "\n")
        with self.assertRaisesRegex(ZooError, "line 1: the header lacks column.s. timediff_list"):
            prepare("eleme", folder, cache_dir=self.get_temp_dir())
        header = lines[0].split(",")
        fields = lines[2].split(",")
        fields[header.index("item_id_list")] += ";77"
        lines[2] = ",".join(fields)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        with self.assertRaisesRegex(ZooError, "eleme.csv, line 3: the behaviour lists have different lengths"):
            prepare("eleme", folder, cache_dir=self.get_temp_dir())
