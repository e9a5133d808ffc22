import os

import numpy as np

from tests.testing import TestCase
from zoo.datasets import preprocess, storage, tabular
from zoo.datasets.events import Interner
from zoo.datasets.reading import Repairs
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema


class TabularTest(TestCase):
    def test_fit_ids_is_the_vocabulary_on_training_values(self):
        cand = ["b", "a", "c", "b", "a", "d"]
        hist = ["a", "d", "d", "e"]
        train_cand, train_hist = np.array([1, 1, 1, 1, 0, 0], bool), np.array([1, 1, 1, 0], bool)
        tokens = ["a", "b", "c", "d", "e", "a"]  # a token may be listed twice
        codes = [tokens.index(t) for t in cand], [tokens.index(t) for t in hist]
        (cand_ids, hist_ids), size, hashed = tabular.fit_ids(
            [(tokens, np.array(codes[0]), train_cand), (tokens, np.array(codes[1]), train_hist)], min_count=2)
        vocabulary = preprocess.Vocabulary(min_count=2)
        vocabulary.fit_many([t for t, fit in zip(cand + hist, np.concatenate([train_cand, train_hist])) if fit])
        vocabulary.finalize()
        self.assertEqual((cand_ids.dtype, size, hashed), (np.int32, vocabulary.size, False))
        self.assertEqual(cand_ids.tolist() + hist_ids.tolist(), [vocabulary.lookup(t) for t in cand + hist])
        self.assertEqual(cand_ids.tolist(), [2, 1, 4, 2, 1, 3])  # a 3x, b 2x, d 2x (ties by token); c once: OOV
        (ids,), size, hashed = tabular.fit_ids([(tokens, np.array(codes[0]), train_cand)], max_size=2)
        self.assertEqual((size, hashed), (4, True))
        self.assertEqual(ids.tolist(), [preprocess.HashedIds(2).lookup(t) for t in cand])

    def test_the_earliest_fault_and_the_first_check_of_its_row(self):
        repairs = Repairs("dir/f.csv")
        lines = np.array([2, 3, 5, 6])
        checks = [(np.array([0, 0, 0, 1], bool), lambda row: "first check"),
                  (np.array([0, 0, 1, 0], bool), lambda row: f"second check, row {row}"),
                  (np.array([0, 0, 1, 0], bool), lambda row: "third check")]
        with self.assertRaisesRegex(ZooError, r"^dir/f.csv, line 5: second check, row 2$"):
            tabular.first_fault(repairs, lines, checks)
        tabular.first_fault(repairs, lines, [(np.zeros(4, bool), lambda row: "never")])

    def test_lists_keep_their_newest_values_left_padded(self):
        lengths = np.array([3, 0, 1, 4])
        values = np.arange(1, 9)  # [1 2 3] [] [4] [5 6 7 8]
        self.assertEqual(tabular.padded(values, lengths, 2).tolist(), [[2, 3], [0, 0], [0, 4], [7, 8]])
        self.assertEqual(tabular.newest(lengths, 2).tolist(), [False, True, True, True, False, False, True, True])
        self.assertEqual(tabular.padded(np.zeros(0, np.int64), np.array([0, 0]), 3).tolist(), [[0] * 3] * 2)

    def test_values_per_token_and_zero_one(self):
        interner = Interner()
        codes = interner.extend(["1", "", "x", "0", "1"])
        self.assertEqual(tabular.zero_one(interner, codes).tolist(), [1, tabular.EMPTY, tabular.OTHER, 0, 1])
        self.assertEqual(tabular.per_token(interner, len, np.int64).tolist(), [1, 0, 1, 1])
        self.assertEqual(tabular.shown(interner, 2), "'x'")

    def test_missing_numbers_take_the_training_mean_summed_in_row_order(self):
        values = np.array([0.1, np.nan, 0.2, 0.3, 5.0, np.nan])
        train = np.array([1, 1, 1, 1, 0, 0], bool)
        mean = ((0.1 + 0.2) + 0.3) / 3
        expected = np.float32([0.1, mean, 0.2, 0.3, 5.0, mean])
        self.assertEqual(tabular.fill_mean(values, train).tolist(), expected.tolist())
        self.assertEqual(tabular.fill_mean(np.array([np.nan]), np.array([True])).tolist(), [0.0])

    def test_splits_and_writing(self):
        self.assertEqual(tabular.order_split(10, (0.8, 0.1, 0.1)).tolist(), [0] * 8 + [1, 2])
        codes = tabular.random_split(5, (0.8, 0.1, 0.1), 2019)
        self.assertEqual(codes.tolist(), np.random.default_rng(2019).choice(3, size=5, p=[0.8, 0.1, 0.1]).tolist())
        folder = self.get_temp_dir()
        schema = Schema(features=[Feature("c1", "cand", 5, 4)])
        features = {"cand_c1": np.array([1, 2, 3, 4], np.int32), "labels": np.array([0, 1, 0, 1], np.float32)}
        tabular.write(folder, schema, np.array([0, -1, 2, 0]), features, {"note": 1})  # -1: a dropped row
        processed = storage.open_processed(folder)
        self.assertEqual(processed.rows, {"train": 2, "validation": 0, "test": 1})
        self.assertEqual(np.load(os.path.join(folder, "train.cand_c1.npy")).tolist(), [1, 4])
        self.assertEqual(processed.info, {"note": 1})
