import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import prepare
from zoo.errors import ZooError

RECHUB = SHARED_DATA / "torch-rechub" / "amazon_books_sample.csv"


class AmazonBooksTest(TestCase):
    def write(self, lines, header=False):
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "ratings_Books.csv"), "w") as f:
            if header:
                f.write("user,item,rating,timestamp\n")
            f.write("".join(lines))
        return folder

    def test_raw_ratings_follow_rest(self):
        lines = [f"A{u}X,{(u + k) % 6:010d},{1 + (u * k) % 5}.0,{1_300_000_000 + 86400 * k}\n"
                 for u in range(6) for k in range(10)]
        for header in (False, True):
            folder = self.write(lines, header)
            processed = prepare("amazon_books", folder, cache_dir=self.get_temp_dir(), sequence_length=3)
            self.assertEqual(processed.rows, {"train": 48, "validation": 6, "test": 6})
            features, labels = processed.take("train", np.arange(48))
            processed.schema.validate(features, labels)
            valid = features["hist_item_id"] > 0
            cand_time = np.broadcast_to(features["cand_time"], valid.shape)
            self.assertTrue(np.all(features["hist_time"][valid] < cand_time[valid]))
            self.assertEqual(features["hist_item_id"].shape, (48, 3))

    def test_empty_file_is_refused(self):
        with self.assertRaisesRegex(ZooError, r"ratings_Books.csv: the file is empty$"):
            prepare("amazon_books", self.write([]), cache_dir=self.get_temp_dir())

    @unittest.skipUnless(RECHUB.exists(), "shared torch-rechub sample not available")
    def test_preprocessed_sample_is_refused(self):
        with self.assertRaisesRegex(ZooError, r"already-preprocessed file \(user_id,item_id,time,label\)"):
            prepare("amazon_books", RECHUB, cache_dir=self.get_temp_dir())
