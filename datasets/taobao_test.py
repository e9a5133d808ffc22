import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import load, prepare, taobao

BEHAVIOR = SHARED_DATA / "taobao-userbehavior" / "UserBehavior.csv"
ADS = SHARED_DATA / "fuxictr-tiny-taobaoad"


def no_future(test, features):
    valid = features["hist_item_id"] > 0
    test.assertTrue(np.all(features["hist_time"][valid] < np.broadcast_to(features["cand_time"][:, :1], valid.shape)[valid]))


@unittest.skipUnless(BEHAVIOR.exists(), "shared Taobao UserBehavior sample not available")
class UserBehaviorTest(TestCase):
    def test_suan_samples(self):
        processed = prepare("taobao", BEHAVIOR.parent, cache_dir=self.get_temp_dir(), sequence_length=10, negatives=2)
        info = processed.info
        self.assertIn("dropped 1 truncated last row(s)", info["repairs"])  # the file is cut off
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
