import csv
import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import criteo, preprocess, prepare
from zoo.errors import ZooError

SAMPLE = SHARED_DATA / "deepctr" / "criteo_sample.txt"


def take_all(processed, split):
    return processed.take(split, np.arange(processed.num_rows(split)))


@unittest.skipUnless(SAMPLE.exists(), "shared Criteo sample not available")
class CriteoSampleTest(TestCase):
    def rows(self):
        with open(SAMPLE) as f:
            return list(csv.DictReader(f))

    def test_deres_day_split_buckets_and_train_only_vocabulary(self):
        processed = prepare("criteo", SAMPLE, protocol="deres", cache_dir=self.get_temp_dir(), min_count=1)
        self.assertEqual(processed.rows, {"train": 171, "validation": 14, "test": 15})  # 6/7, then halves
        schema = processed.schema
        self.assertEqual(len(schema.keys()), 39)
        self.assertEqual(schema.feature("cand_i1").vocabulary_size, 12)
        train, _ = take_all(processed, "train")
        test, labels = take_all(processed, "test")
        schema.validate(test, labels)
        counts = np.bincount(train["cand_i5"][:, 0], minlength=12)
        self.assertTrue(np.all(counts[1:11] <= 0.2 * 171), counts)  # about 10% each, never one big bucket
        rows = self.rows()
        self.assertEqual(labels[:, 0].tolist(), [float(r["label"]) for r in rows[185:]])
        # A C3 value first seen in the test rows is out-of-vocabulary: fitted on train only.
        seen = {r["C3"] for r in rows[:171]}
        oov = schema.feature("cand_c3").vocabulary_size - 1
        expected = [oov if r["C3"] not in seen else None for r in rows[185:]]
        self.assertIn(oov, expected)
        for got, want in zip(test["cand_c3"], expected):
            if want is not None:
                self.assertEqual(got, want)
            else:
                self.assertLess(got, oov)

    def test_bars_transform_and_split(self):
        processed = prepare("criteo", SAMPLE, protocol="bars", cache_dir=self.get_temp_dir(), min_count=1)
        self.assertEqual(sum(processed.rows.values()), 200)
        self.assertGreater(processed.rows["train"], 140)
        train, _ = take_all(processed, "train")
        # ids are a bijection of the BARS token floor(ln(x)^2) / int(x) (missing -> 0) on train rows
        rows = self.rows()
        codes = np.random.default_rng(2019).choice(3, size=200, p=[0.8, 0.1, 0.1])
        tokens = [preprocess.bars_numeric(float(r["I3"] or 0)) for r, c in zip(rows, codes) if c == 0]
        pairs = set(zip(tokens, train["cand_i3"][:, 0].tolist()))
        self.assertEqual(len(pairs), len(set(tokens)))
        self.assertEqual(len(pairs), len(set(train["cand_i3"][:, 0].tolist())))

    def test_bars_fit_scores_new_rows(self):
        # The fitted spec of a BARS numeric (an id column) is read back in scoring mode.
        fitted = prepare("criteo", SAMPLE, protocol="bars", cache_dir=self.get_temp_dir(), min_count=1)
        scored = prepare(None, SAMPLE, preprocessing=fitted.preprocessing(), cache_dir=self.get_temp_dir())
        self.assertEqual(scored.rows, {"all": 200})
        features, _ = take_all(scored, "all")
        train, _ = take_all(fitted, "train")
        codes = np.random.default_rng(2019).choice(3, size=200, p=[0.8, 0.1, 0.1])
        np.testing.assert_array_equal(features["cand_i3"][codes == 0], train["cand_i3"])

    def test_blank_lines_do_not_move_the_row_order_split(self):
        with open(SAMPLE) as f:
            lines = f.readlines()
        for at in (150, 100, 3):  # blank lines among the training rows, and a whitespace-only one
            lines.insert(at, "\n")
        lines.insert(50, "  \r\n")
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "criteo_sample.txt"), "w") as f:
            f.writelines(lines)
        blank = prepare("criteo", folder, cache_dir=self.get_temp_dir(), min_count=1)
        plain = prepare("criteo", SAMPLE, cache_dir=self.get_temp_dir(), min_count=1)
        self.assertEqual(blank.rows, plain.rows)
        for split in ("train", "test"):
            for key, value in take_all(plain, split)[0].items():
                np.testing.assert_array_equal(take_all(blank, split)[0][key], value)
        account = blank.info["accounting"]["criteo_sample.txt"]
        self.assertEqual(account, dict(plain.info["accounting"]["criteo_sample.txt"], blank_lines=4))
        # every row is kept; a missing numeric filled with the training mean counts its row as repaired
        self.assertEqual((account["read"], account["kept"] + account["repaired"], account["dropped"]), (200, 200, 0))
        self.assertEqual(account["kinds"]["filled {n} missing 'I1' value(s) with the training mean"], 90)

    def test_cache_is_reused(self):
        cache = self.get_temp_dir()
        first = prepare("criteo", SAMPLE, cache_dir=cache)
        second = prepare("criteo", SAMPLE, cache_dir=cache)
        self.assertEqual(first.directory, second.directory)
        third = prepare("criteo", SAMPLE, cache_dir=cache, min_count=2)
        self.assertNotEqual(first.directory, third.directory)


class CriteoFormatTest(TestCase):
    def test_tab_separated_original_format(self):
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "train.txt"), "w") as f:
            for i in range(14):
                numerics = [str(i)] + [""] * 12
                f.write("\t".join([str(i % 2)] + numerics + [f"c{i % 3}"] * 26) + "\n")
        processed = prepare("criteo", folder, cache_dir=self.get_temp_dir(), min_count=1)
        self.assertEqual(processed.rows, {"train": 12, "validation": 1, "test": 1})
        features, labels = take_all(processed, "train")
        self.assertEqual(labels[:, 0].tolist(), [i % 2 for i in range(12)])
        self.assertEqual(len(set(features["cand_i1"][:, 0].tolist())), 10)  # 12 distinct values, 10 buckets

    def test_bad_label_names_line(self):
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "train.txt"), "w") as f:
            f.write("\t".join(["1"] + ["1"] * 13 + ["a"] * 26) + "\n")
            f.write("\t".join(["yes"] + ["1"] * 13 + ["a"] * 26) + "\n")
        with self.assertRaisesRegex(ZooError, r"train.txt, line 2: column 'label' should be 0 or 1"):
            prepare("criteo", folder, cache_dir=self.get_temp_dir())
        self.assertEqual(criteo.DEFAULT_PROTOCOL, "deres")

    def test_header_only_file_is_refused_and_empty_labels_are_counted(self):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "train.csv")
        with open(path, "w") as f:
            f.write(",".join(criteo.HEADER) + "\n")
        with self.assertRaisesRegex(ZooError, r"train.csv: the file holds only its header line, no data rows$"):
            prepare("criteo", folder, cache_dir=self.get_temp_dir())
        with open(path, "a") as f:
            for i in range(8):
                f.write(",".join(["" if i == 2 else str(i % 2)] + ["1"] * 13 + ["a"] * 26) + "\n")
        account = prepare("criteo", folder, cache_dir=self.get_temp_dir()).info["accounting"]["train.csv"]
        self.assertEqual((account["read"], account["kept"], account["repaired"], account["dropped"]), (8, 7, 0, 1))
