import collections
import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import prepare, preprocess
from zoo.datasets.reading import TRUNCATED
from zoo.errors import ZooError

ML100K = SHARED_DATA / "movielens-100k"


def no_future(test, features):
    """Every visible behaviour is strictly earlier than the row's (first) candidate."""
    valid = features["hist_item_id"] > 0
    cand_time = np.broadcast_to(features["cand_time"][:, :1], valid.shape)
    test.assertTrue(np.all(features["hist_time"][valid] < cand_time[valid]))


def write_ratings(path, delimiter, header=None, users=6, per_user=8, half_stars=False):
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        if header:
            f.write(header + "\n")
        for u in range(users):
            for k in range(per_user):
                rating = rng.integers(2, 11) / 2 if half_stars else rng.integers(1, 6)
                f.write(delimiter.join([str(u + 1), str((u + k) % 8 + 1), str(rating), str(1000 + 10 * k)]) + "\n")


@unittest.skipUnless((ML100K / "u.data").exists(), "shared ML-100K not available")
class MovieLens100KTest(TestCase):
    def test_rest_protocol(self):
        processed = prepare("movielens", ML100K, cache_dir=self.get_temp_dir(), sequence_length=20)
        self.assertEqual(processed.schema.keys()[:3], ["hist_item_id", "hist_rating", "hist_time"])
        ratings = np.loadtxt(ML100K / "u.data", dtype=np.int64)
        total = sum(processed.rows.values())
        self.assertEqual(total, processed.info["events"])
        self.assertLessEqual(total, 100_000)
        self.assertIn("5-core", processed.info["repairs"])
        account = processed.info["accounting"]["u.data"]  # rows read = kept + repaired + dropped
        core = "removed {n} rating(s) of users/items with fewer than 5 ratings (5-core)"
        self.assertEqual((account["read"], account["kept"], account["repaired"]), (100_000, total, 0))
        self.assertEqual(account["dropped"], account["kinds"][core])
        self.assertEqual(account["read"], account["kept"] + account["dropped"])
        positives = 0
        for split in ("train", "validation", "test"):
            features, labels = processed.take(split, np.arange(processed.rows[split]))
            processed.schema.validate(features, labels)
            no_future(self, features)
            positives += labels.sum()
        self.assertGreater(processed.rows["train"], 0.75 * total)
        # rating >= 4 is the label (5-core keeps most of ML-100K's 55,375 positives)
        self.assertAlmostEqual(positives / total, (ratings[:, 2] >= 4).mean(), delta=0.02)

    def test_history_is_the_last_l_earlier_ratings(self):
        length = 5
        processed = prepare("movielens", ML100K, cache_dir=self.get_temp_dir(), sequence_length=length)
        features, labels = processed.take("test", np.arange(processed.rows["test"]))
        ratings = np.loadtxt(ML100K / "u.data", dtype=np.int64)
        ratings = ratings[preprocess.k_core(ratings[:, 0], ratings[:, 1], 5)]  # (tested in preprocess_test)
        row = 0  # the first test sample belongs to some user: rebuild its history from the raw file
        user_id = features["user_user_id"][row]
        same_user = features["user_user_id"] == user_id
        # Find the raw user: the one whose ratings at cand_time include this item (via time match).
        time = features["cand_time"][row, 0]
        candidates = {u for u, _, _, t in ratings if t == time}
        histories = []
        for u in candidates:
            # time order, ties in file order
            earlier = sorted((t, i, r) for i, (uu, _, r, t) in enumerate(ratings) if uu == u and t < time)
            histories.append([r * 2 for _, _, r in earlier[-length:]])
        got = features["hist_rating"][row][features["hist_rating"][row] > 0].tolist()
        self.assertIn(got, histories)
        self.assertTrue(same_user.any())


class MovieLensFormatsTest(TestCase):
    def test_ml1m_double_colon_and_ml20m_csv(self):
        for name, delimiter, header, half in (
            ("ratings.dat", "::", None, False),
            ("ratings.csv", ",", "userId,movieId,rating,timestamp", True),
        ):
            folder = self.get_temp_dir()
            write_ratings(os.path.join(folder, name), delimiter, header, half_stars=half)
            processed = prepare("movielens", folder, cache_dir=self.get_temp_dir(), sequence_length=4)
            self.assertEqual(sum(processed.rows.values()), 48)
            # per user (8 ratings): floor(6.4) = 6 train, floor(7.2) = 7 -> 1 validation, 1 test
            self.assertEqual(processed.rows, {"train": 36, "validation": 6, "test": 6})
            features, labels = processed.take("train", np.arange(36))
            no_future(self, features)
            counts = collections.Counter(features["user_user_id"].tolist())
            self.assertEqual(sorted(counts.values()), [6] * 6)
            if half:  # half stars keep their meaning: 2 x rating in 2..10, odd values present
                seen = set(features["hist_rating"][features["hist_rating"] > 0].tolist())
                self.assertTrue(seen <= set(range(2, 11)) and any(v % 2 for v in seen), seen)

    def test_five_core_removes_sparse_users(self):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "u.data")
        write_ratings(path, "\t")
        with open(path, "a") as f:
            f.write("99\t1\t5\t2000\n")  # a user with one rating
        processed = prepare("movielens", folder, cache_dir=self.get_temp_dir())
        self.assertEqual(sum(processed.rows.values()), 48)
        self.assertIn("removed 1 rating(s) of users/items with fewer than 5 ratings", processed.info["repairs"])


def ml100k_lines(count):
    """The first `count` lines of the shared u.data (each with its newline)."""
    with open(ML100K / "u.data") as f:
        return [next(f) for _ in range(count)]


@unittest.skipUnless((ML100K / "u.data").exists(), "shared ML-100K not available")
class MovieLensRawFileTest(TestCase):
    def prepare_text(self, text, **options):
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "u.data"), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        return prepare("movielens", folder, cache_dir=self.get_temp_dir(), sequence_length=4, verbose=False, **options)

    def test_byte_order_mark_does_not_make_a_new_user(self):
        text = "".join(ml100k_lines(3000))
        plain = self.prepare_text(text)
        marked = self.prepare_text(b"\xef\xbb\xbf" + text.encode())
        self.assertEqual(marked.rows, plain.rows)  # user 196's first rating is not lost to the 5-core
        self.assertEqual(marked.schema, plain.schema)
        for key in ("read", "kept", "dropped"):
            self.assertEqual(marked.info["accounting"]["u.data"][key], plain.info["accounting"]["u.data"][key])
        self.assertIn("removed the UTF-8 byte-order mark", marked.info["repairs"])

    def test_last_line_cut_inside_its_timestamp_is_dropped(self):
        lines = ml100k_lines(3001)
        user, item, rating, time = lines[-1].split("\t")
        complete = self.prepare_text("".join(lines[:-1]))
        cut = self.prepare_text("".join(lines[:-1]) + "\t".join([user, item, rating, time[:5]]))
        self.assertEqual(cut.rows, complete.rows)
        account = cut.info["accounting"]["u.data"]
        self.assertEqual(account["kinds"][TRUNCATED], 1)
        self.assertEqual(account["read"], 3001)
        self.assertEqual(account["dropped"], complete.info["accounting"]["u.data"]["dropped"] + 1)

    def test_empty_and_header_only_files_are_refused(self):
        with self.assertRaisesRegex(ZooError, r"u.data: the file is empty$"):
            self.prepare_text("")
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "ratings.csv"), "w") as f:
            f.write("userId,movieId,rating,timestamp\n")
        with self.assertRaisesRegex(ZooError, r"ratings.csv: the file holds only its header line, no data rows$"):
            prepare("movielens", folder, cache_dir=self.get_temp_dir())
        with self.assertRaisesRegex(ZooError, r"u.data: no row is left \(u.data: read 3 row\(s\); removed 3"):
            self.prepare_text("".join(ml100k_lines(3)))  # nobody has 5 ratings
