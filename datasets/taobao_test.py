import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import load, prepare, taobao
from zoo.datasets.reading import TRUNCATED
from zoo.errors import ZooError

BEHAVIOR = SHARED_DATA / "taobao-userbehavior" / "UserBehavior.csv"
ADS = SHARED_DATA / "fuxictr-tiny-taobaoad"
NO_HISTORY = "made no sample for {n} first behaviour(s) of a user (no earlier history)"


def no_future(test, features):
    valid = features["hist_item_id"] > 0
    cand_time = np.broadcast_to(features["cand_time"][:, :1], valid.shape)
    test.assertTrue(np.all(features["hist_time"][valid] < cand_time[valid]))


@unittest.skipUnless(BEHAVIOR.exists(), "shared Taobao UserBehavior sample not available")
class UserBehaviorTest(TestCase):
    def test_suan_samples(self):
        processed = prepare("taobao", BEHAVIOR.parent, cache_dir=self.get_temp_dir(), sequence_length=10, negatives=2)
        info = processed.info
        self.assertIn("dropped 1 truncated last row(s)", info["repairs"])  # the file is cut off
        account = info["accounting"]["UserBehavior.csv"]
        dates = "dropped {n} behaviour(s) outside the date range 2017-11-25..2017-12-03"
        self.assertEqual((account["read"], account["repaired"]), (84_476, 0))
        self.assertEqual(account["dropped"], 1 + account["kinds"].get(dates, 0))
        self.assertEqual(account["read"], account["kept"] + account["dropped"])
        items = processed.schema.feature("cand_item_id").vocabulary_size - 2
        self.assertAlmostEqual(info["sample_rate"], 2 / (items - 1))
        self.assertTrue(all(processed.rows[s] > 0 for s in ("train", "validation", "test")))
        for split in ("train", "test"):
            features, labels = processed.take(split, np.arange(processed.rows[split]))
            processed.schema.validate(features, labels)
            no_future(self, features)
            self.assertAlmostEqual(labels.mean(), 1 / 3, places=6)  # one positive, two negatives
        # Validation and test candidates come after every training candidate (split by whole days).
        train_end = processed.take("train", np.arange(processed.rows["train"]))[0]["cand_time"].max()
        test_start = processed.take("test", np.arange(processed.rows["test"]))[0]["cand_time"].min()
        self.assertLess(train_end, test_start)

    def test_parallel_groups_keep_positive_and_negatives_together(self):
        processed = prepare("taobao", BEHAVIOR.parent, cache_dir=self.get_temp_dir(), sequence_length=10, negatives=3)
        groups = processed.groups("train", 4)[:50]
        features, labels, weights = processed.take_groups("train", groups, "parallel")
        self.assertEqual(labels.shape, (50, 4))
        full = weights.sum(1) == 4
        self.assertTrue(np.all(labels[full] == [1, 0, 0, 0]))  # sampled together, stored together
        self.assertTrue(np.all(features["cand_time"][full] == features["cand_time"][full][:, :1]))
        no_future(self, features)

    def test_rectified_pctr_undoes_the_sampling(self):
        _, _, info = load("taobao", BEHAVIOR.parent, cache_dir=self.get_temp_dir(), sequence_length=4, with_info=True)
        rate = info["sample_rate"]
        p = 0.5  # the model's pctr on sampled data -> DESIGN.md's p / (p + (1 - p) / sample_rate)
        self.assertAlmostEqual(p / (p + (1 - p) / rate), rate / (1 + rate))


@unittest.skipUnless(ADS.exists(), "shared Taobao display-ads sample not available")
class DisplayAdsTest(TestCase):
    def test_ads_rows(self):
        self.assertEqual(taobao.detect_protocol(ADS), "ads")
        processed = prepare("taobao", ADS, cache_dir=self.get_temp_dir(), sequence_length=4)
        self.assertEqual(processed.rows, {"train": 100, "validation": 100, "test": 100})
        schema = processed.schema
        self.assertFalse(schema.time)
        features, labels = processed.take("train", np.arange(100))
        schema.validate(features, labels)
        with open(ADS / "train_sample.csv") as f:
            rows = [line.rstrip("\n").split(",") for line in f][1:]
        lengths = [min(len([t for t in r[-1].split("^") if t]), 4) for r in rows]
        self.assertEqual((features["hist_item_id"] > 0).sum(1).tolist(), lengths)
        # hist and cand share the item vocabulary: a clicked ad group that is also a candidate gets one id
        ids = dict(zip([r[3] for r in rows], features["cand_item_id"][:, 0].tolist()))
        for r, hist in zip(rows, features["hist_item_id"]):
            last = [t for t in r[-1].split("^") if t][-1:]
            if last and last[0] in ids:
                self.assertEqual(hist[-1], ids[last[0]])
        self.assertEqual(labels.sum(), sum(float(r[0]) for r in rows))
        files = ["test_sample.csv", "train_sample.csv", "valid_sample.csv"]
        self.assertEqual(sorted(processed.info["accounting"]), files)
        for account in processed.info["accounting"].values():  # a missing price is a counted repair
            self.assertEqual(account["read"], account["kept"] + account["repaired"] + account["dropped"])
            self.assertEqual(account["read"], 100)


def behavior_lines(count):
    """The first `count` lines of the shared UserBehavior.csv (each with its newline)."""
    with open(BEHAVIOR) as f:
        return [next(f) for _ in range(count)]


@unittest.skipUnless(BEHAVIOR.exists(), "shared Taobao UserBehavior sample not available")
class UserBehaviorRawFileTest(TestCase):
    def prepare_text(self, text):
        folder = self.get_temp_dir()
        with open(os.path.join(folder, "UserBehavior.csv"), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        return prepare("taobao", folder, cache_dir=self.get_temp_dir(), sequence_length=4, verbose=False)

    def test_byte_order_mark_does_not_make_a_new_user(self):
        text = "".join(behavior_lines(2000))
        plain, marked = self.prepare_text(text), self.prepare_text(b"\xef\xbb\xbf" + text.encode())
        self.assertEqual(marked.rows, plain.rows)  # user 1's second behaviour keeps its sample
        self.assertEqual(marked.schema, plain.schema)
        self.assertEqual(marked.info["accounting"]["UserBehavior.csv"]["kept"], 2000)

    def test_last_line_cut_inside_its_timestamp_is_dropped(self):
        lines = behavior_lines(2001)
        cut = self.prepare_text("".join(lines[:-1]) + lines[-1][: lines[-1].rindex(",") + 6])
        account = cut.info["accounting"]["UserBehavior.csv"]
        self.assertEqual(account["kinds"], {TRUNCATED: 1, NO_HISTORY: account["kinds"][NO_HISTORY]})
        self.assertEqual((account["read"], account["kept"], account["dropped"]), (2001, 2000, 1))
        self.assertEqual(cut.rows, self.prepare_text("".join(lines[:-1])).rows)

    def test_empty_file_is_refused(self):
        with self.assertRaisesRegex(ZooError, r"UserBehavior.csv: the file is empty$"):
            self.prepare_text("")


class UserBehaviorFormatTest(TestCase):
    def test_ties_never_see_each_other_and_bad_behaviour_type(self):
        folder = self.get_temp_dir()
        day = 1511539200 + 3600
        with open(os.path.join(folder, "UserBehavior.csv"), "w") as f:
            for k, t in enumerate([0, 0, 86400, 86400, 2 * 86400, 3 * 86400]):
                f.write(f"1,{k + 10},{k},pv,{day + t}\n")
        processed = prepare("taobao", folder, cache_dir=self.get_temp_dir(), sequence_length=5, negatives=0)
        features, _ = processed.take("train", np.arange(processed.rows["train"]))
        no_future(self, features)
        self.assertEqual((features["hist_item_id"] > 0).sum(1).tolist(), [2, 2])  # two ties at t=86400
        with open(os.path.join(folder, "UserBehavior.csv"), "a") as f:
            f.write(f"1,1,1,click,{day}\n")
        with self.assertRaisesRegex(Exception, "line 7: column 'behavior_type' should be one of pv, fav, cart, buy"):
            prepare("taobao", folder, cache_dir=self.get_temp_dir())
