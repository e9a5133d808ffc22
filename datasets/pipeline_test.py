import os
import threading
from unittest import mock

import keras
import numpy as np

import zoo
from tests.testing import TestCase, in_process_group, small_simulator
from zoo.datasets import eleme, load, names, prepare
from zoo.errors import ZooError


def write_ratings(folder, users=5, per_user=12):
    with open(os.path.join(folder, "u.data"), "w") as f:
        for u in range(users):
            for k in range(per_user):
                t = 1000 + 10 * (k // 2)  # pairs of ratings share a second
                f.write(f"{u + 1}\t{(u + k) % 7 + 1}\t{1 + (u + k) % 5}\t{t}\n")
    return folder


class PipelineTest(TestCase):
    def eleme_folder(self):
        folder = self.get_temp_dir()
        eleme.write_simulated(os.path.join(folder, "eleme.csv"), small_simulator(), 120, seed=1)
        return folder

    def test_batches_train_din_one_step(self):
        cache = self.get_temp_dir()
        dataset, schema = load("eleme", self.eleme_folder(), cache_dir=cache, batch_size=32, sequence_length=8)
        features, labels = next(iter(dataset))
        schema.validate({k: np.asarray(v) for k, v in features.items()}, np.asarray(labels))
        self.assertEqual(features["hist_time"].dtype.name, "int64")
        self.assertEqual(features["num_avg_price"].dtype.name, "float32")
        model = zoo.get("din", schema=schema, attention_units=(8,), mlp_units=(8,))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        history = model.fit(dataset.take(1), verbose=0)  # the tf.data pipeline itself, on this backend
        self.assertTrue(np.isfinite(history.history["loss"][0]), keras.backend.backend())

    def test_pipelines_run_without_tf_datas_autotuning_thread(self):
        from zoo.datasets.pipeline import without_autotune_thread

        dataset, _ = load("eleme", self.eleme_folder(), cache_dir=self.get_temp_dir(), batch_size=32,
                          sequence_length=8)
        self.assertIs(dataset.options().autotune.enabled, False)
        self.assertIsNone(without_autotune_thread(None))  # what is not a tf.data pipeline passes through

    def test_the_arrays_are_opened_before_tf_datas_threads_start(self):
        """np.load parses .npy headers with ast, which CPython 3.11.7 races on between threads: every load
        happens in the thread that builds the pipeline, none in the parallel gathers."""
        from zoo.datasets import storage

        loads, original = [], np.load

        def recorded(*args, **kwargs):
            loads.append(threading.current_thread() is threading.main_thread())
            return original(*args, **kwargs)

        folder, cache = self.eleme_folder(), self.get_temp_dir()
        load("eleme", folder, cache_dir=cache, batch_size=16, sequence_length=8)  # builds the cache
        with mock.patch.object(storage.np, "load", side_effect=recorded):
            dataset, _ = load("eleme", folder, cache_dir=cache, batch_size=16, sequence_length=8, split="train")
            self.assertTrue(loads)
            for _ in dataset.take(4):
                pass
        self.assertTrue(all(loads), f"{loads.count(False)} of {len(loads)} arrays were opened in a tf.data thread")

    def test_a_process_share_is_every_size_th_row_from_its_rank(self):
        folder = write_ratings(self.get_temp_dir())
        cache = self.get_temp_dir()

        def rows(group, shuffle):
            dataset, _, info = load("movielens", folder, cache_dir=cache, batch_size=5, shuffle=shuffle, seed=2,
                                    sequence_length=6, process_group=group, with_info=True)
            keys = np.concatenate([np.asarray(f["cand_time"])[:, 0] * 100 + np.asarray(f["cand_item_id"])[:, 0]
                                   for f, _ in dataset])
            self.assertEqual(info["rows"]["train"], keys.size)  # the share's rows, as the CLI's progress counts
            return keys

        everything = rows(None, False)
        shares = in_process_group(3, lambda group: rows(group, False))
        for rank, share in enumerate(shares):
            self.assertEqual(share.tolist(), everything[rank::3].tolist())
        shuffled = in_process_group(3, lambda group: rows(group, True))
        self.assertEqual(sorted(np.concatenate(shuffled).tolist()), sorted(everything.tolist()))
        self.assertNotEqual(shuffled[0].tolist(), shares[0].tolist())

    def test_parallel_mode_batches(self):
        folder = write_ratings(self.get_temp_dir())
        dataset, schema = load("movielens", folder, cache_dir=self.get_temp_dir(), batch_size=4, sequence_length=6,
                               mode="parallel", num_candidates=3)
        self.assertEqual(schema.num_candidates, 3)
        features, labels = next(iter(dataset))
        features = {k: np.asarray(v) for k, v in features.items()}
        schema.validate(features, np.asarray(labels))
        self.assertEqual(tuple(labels.shape), (4, 3))
        self.assertEqual(features["cand_item_id"].shape, (4, 3))
        # the history precedes every candidate of the row
        hist_time, cand_time = features["hist_time"], features["cand_time"]
        valid = hist_time > 0
        self.assertTrue(np.all(hist_time[valid] < np.broadcast_to(cand_time.min(1, keepdims=True), valid.shape)[valid]))

    def test_prefix_mode_masks_to_each_candidates_own_history(self):
        folder = write_ratings(self.get_temp_dir())
        processed = prepare("movielens", folder, cache_dir=self.get_temp_dir(), sequence_length=20)
        groups = processed.groups("train", 4)
        grouped, labels, weights = processed.take_groups("train", groups, "prefix")
        single, single_labels = processed.take("train", np.arange(processed.rows["train"]))
        for row in range(groups.shape[0]):
            for slot in range(4):
                sample = groups[row, slot]
                if sample < 0:
                    self.assertEqual(weights[row, slot], 0.0)
                    continue
                # prefix-valid mask: candidate j sees the behaviours with hist_time < cand_time[j]
                earlier = grouped["hist_time"][row] < grouped["cand_time"][row, slot]
                visible = earlier & (grouped["hist_item_id"][row] > 0)
                own = single["hist_item_id"][sample][single["hist_item_id"][sample] > 0]
                self.assertEqual(grouped["hist_item_id"][row][visible].tolist(), own.tolist())
                self.assertEqual(labels[row, slot], single_labels[sample, 0])
        # a user's 9 train ratings in groups of 4: 4 + 4 + 1 (+3 repeats, weight 0)
        self.assertEqual(weights.sum(), processed.rows["train"])

    def test_with_weights_and_argument_errors(self):
        folder = write_ratings(self.get_temp_dir())
        cache = self.get_temp_dir()
        dataset, _ = load("movielens", folder, cache_dir=cache, mode="prefix", num_candidates=4, with_weights=True,
                          shuffle=False)
        _, labels, weights = next(iter(dataset))
        self.assertEqual(tuple(weights.shape), tuple(labels.shape))
        with self.assertRaisesRegex(ZooError, "needs num_candidates"):
            load("movielens", folder, cache_dir=cache, mode="parallel")
        with self.assertRaisesRegex(ZooError, "need mode="):
            load("movielens", folder, cache_dir=cache, num_candidates=3)
        with self.assertRaisesRegex(ZooError, "unknown batching mode"):
            load("movielens", folder, cache_dir=cache, mode="serial", num_candidates=3)
        with self.assertRaisesRegex(ZooError, "batch_size"):
            load("movielens", folder, cache_dir=cache, batch_size=0)
        with self.assertRaisesRegex(ZooError, "unknown split 'dev'"):
            load("movielens", folder, cache_dir=cache, split="dev")
        with self.assertRaisesRegex(ZooError, "parallel-candidate and shared-prefix modes need"):
            load("eleme", self.eleme_folder(), cache_dir=cache, mode="parallel", num_candidates=2)


class RegistryTest(TestCase):
    def test_names(self):
        listed = names()
        self.assertEqual(sorted(listed), sorted(["criteo", "avazu", "movielens", "amazon_books", "taobao", "eleme"]))
        self.assertEqual(sorted(listed["criteo"]), ["bars", "deres"])
        self.assertEqual(sorted(listed["taobao"]), ["ads", "suan"])

    def test_module_load_is_the_registry_load(self):
        from zoo.datasets import movielens

        folder = write_ratings(self.get_temp_dir())
        cache = self.get_temp_dir()
        _, schema = movielens.load(folder, cache_dir=cache, sequence_length=3)
        self.assertEqual(schema, load("movielens", folder, cache_dir=cache, sequence_length=3)[1])

    def test_errors(self):
        folder = write_ratings(self.get_temp_dir())
        with self.assertRaisesRegex(ZooError, "unknown data set 'netflix'"):
            load("netflix", folder)
        with self.assertRaisesRegex(ZooError, "movielens has no protocol 'bars'"):
            load("movielens", folder, protocol="bars")
        with self.assertRaisesRegex(ZooError, r"has no option\(s\) depth"):
            load("movielens", folder, depth=3)
