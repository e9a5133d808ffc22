import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import avazu, prepare
from zoo.errors import ZooError

SAMPLE = SHARED_DATA / "avazu-head1k" / "avazu_sample.txt"


def write_avazu(path, hours):
    with open(path, "w") as f:
        f.write(",".join(avazu.HEADER) + "\n")
        for i, hour in enumerate(hours):
            f.write(",".join([str(i), str(i % 2), str(hour)] + [f"v{i % 5}"] * 21) + "\n")


@unittest.skipUnless(SAMPLE.exists(), "shared Avazu sample not available")
class AvazuSampleTest(TestCase):
    def test_deres_hashes_high_cardinality_fields(self):
        processed = prepare("avazu", SAMPLE, cache_dir=self.get_temp_dir(), max_vocabulary=200)
        self.assertEqual(processed.rows, {"train": 799, "validation": 100, "test": 100})
        schema = processed.schema
        self.assertEqual(len(schema.keys()), 22)
        ip = schema.feature("user_device_ip")  # ~900 distinct ips in the sample
        self.assertTrue(ip.hashed)
        self.assertEqual(ip.vocabulary_size, 202)
        self.assertFalse(schema.feature("cand_c1").hashed)
        features, labels = processed.take("test", np.arange(100))
        schema.validate(features, labels)
        account = processed.info["accounting"]["avazu_sample.txt"]
        self.assertEqual((account["read"], account["kept"], account["repaired"], account["dropped"]), (999, 999, 0, 0))

    def test_bars_derives_hour_weekday_weekend(self):
        processed = prepare("avazu", SAMPLE, protocol="bars", cache_dir=self.get_temp_dir())
        keys = processed.schema.keys()
        self.assertIn("ctx_weekday", keys)
        self.assertIn("ctx_weekend", keys)
        self.assertNotIn("cand_id", keys)
        self.assertIn("cand_site_id", keys)
        self.assertEqual(sum(processed.rows.values()), 999)


class AvazuFormatTest(TestCase):
    def test_bars_hour_fields(self):
        folder = self.get_temp_dir()
        # 14102100 is Tuesday 2014-10-21 00h; 14102514 is Saturday 14h.
        write_avazu(os.path.join(folder, "train.csv"), [14102100] * 20 + [14102514] * 20)
        processed = prepare("avazu", folder, protocol="bars", cache_dir=self.get_temp_dir(), min_count=1)
        features, _ = processed.take("train", np.arange(processed.rows["train"]))
        hour = processed.schema.feature("ctx_hour")
        self.assertEqual(hour.vocabulary_size, 4)  # "0", "14" + padding + OOV
        self.assertEqual(len(set(features["ctx_weekend"].tolist())), 2)

    def test_deres_rejects_rows_out_of_time_order(self):
        folder = self.get_temp_dir()
        write_avazu(os.path.join(folder, "train.csv"), [14102101, 14102100])
        with self.assertRaisesRegex(ZooError, r"train.csv, line 3: rows are not in time order"):
            prepare("avazu", folder, cache_dir=self.get_temp_dir())

    def test_header_only_file_is_refused(self):
        folder = self.get_temp_dir()
        write_avazu(os.path.join(folder, "train.csv"), [])
        with self.assertRaisesRegex(ZooError, r"train.csv: the file holds only its header line, no data rows$"):
            prepare("avazu", folder, cache_dir=self.get_temp_dir())

    def test_blank_lines_do_not_move_the_row_order_split(self):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "train.csv")
        write_avazu(path, [14102100 + i // 4 for i in range(20)])
        plain = prepare("avazu", folder, cache_dir=self.get_temp_dir())
        with open(path) as f:
            lines = f.readlines()
        with open(path, "w") as f:
            f.writelines(lines[:5] + ["\n"] * 3 + lines[5:])
        blank = prepare("avazu", folder, cache_dir=self.get_temp_dir())
        self.assertEqual(plain.rows, {"train": 16, "validation": 2, "test": 2})
        self.assertEqual(blank.rows, plain.rows)
        self.assertEqual(blank.info["accounting"]["train.csv"]["blank_lines"], 3)

    def test_bad_hour(self):
        folder = self.get_temp_dir()
        write_avazu(os.path.join(folder, "train.csv"), ["2014-10-21"])
        with self.assertRaisesRegex(ZooError, "line 2: column 'hour' should be YYMMDDHH"):
            prepare("avazu", folder, cache_dir=self.get_temp_dir())
