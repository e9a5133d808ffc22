import csv
import os
from unittest import mock

import numpy as np

from tests.impression_logs import COLUMNS, impression_spec, write_impression_log
from tests.testing import TestCase, in_process_group
from zoo.datasets import ProcessGroup, prepare, spec_streaming
from zoo.datasets.storage import SPLITS
from zoo.errors import ZooError


class ProcessGroupTest(TestCase):
    def test_order_statistics_are_those_of_every_process_together(self):
        rng = np.random.default_rng(0)
        parts = [rng.integers(-50, 50, size=n) for n in (40, 0, 25)]  # duplicates, negatives, an empty process
        together = np.sort(np.concatenate(parts))
        ks = [0, 1, 17, 31, 64, 40]
        found = in_process_group(3, lambda g: g.order_statistics(np.sort(parts[g.rank]), ks))
        for result in found:
            self.assertEqual(result.tolist(), together[ks].tolist())

    def test_shards_and_bad_groups(self):
        files = [f"part-{i}.csv" for i in range(5)]
        self.assertEqual(ProcessGroup(1, 2, lambda v: [v, v]).shards(files), ["part-1.csv", "part-3.csv"])
        self.assertEqual(ProcessGroup().shards(files), files)
        self.assertEqual(ProcessGroup().allgather(3), [3])
        with self.assertRaisesRegex(ZooError, "^2 shard file\\(s\\) for 3 processes: each process reads its own"):
            ProcessGroup(0, 3, lambda v: [v] * 3).shards(files[:2])
        with self.assertRaisesRegex(ZooError, "^process rank 2 of 2 processes: the rank must be in 0..1$"):
            ProcessGroup(2, 2, lambda v: v)
        with self.assertRaisesRegex(ZooError, "^a group of 2 processes needs an allgather function$"):
            ProcessGroup(0, 2)


def rounded(tree):
    """A fitted state with its floats to 12 significant digits (sums over processes add in another order)."""
    if isinstance(tree, dict):
        return {key: rounded(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [rounded(value) for value in tree]
    return float(f"{tree:.12g}") if isinstance(tree, float) else tree


def rows_by_key(processed_parts, split):
    """{(label, line, item, user, time...): feature row} of a split over one or several processed data sets."""
    rows = {}
    for processed in processed_parts:
        count = processed.num_rows(split)
        if not count:
            continue
        features, labels = processed.take(split, np.arange(count))
        lines = processed.source_lines(split)
        for i in range(count):
            key = (int(lines[i]), float(labels[i, 0])) + tuple(
                tuple(np.ravel(features[name][i]).tolist()) for name in sorted(features) if not name.startswith("num_"))
            rows.setdefault(key, []).append({name: np.ravel(features[name][i]) for name in features})
    return rows


class ShardedBuildTest(TestCase):
    """Processes that each read their own shards build, together, the single process's data set."""

    def setUp(self):
        super().setUp()
        self.folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(self.folder, "log.csv"), rows=400, users=20, items=40)
        with open(log, newline="") as f:
            self.rows = list(csv.DictReader(f))
        self.shards = os.path.join(self.folder, "shards")
        os.makedirs(self.shards)

    def write_shards(self, shard_of):
        """Four CSV shards (header, same columns); row i goes to shard shard_of(i, row)."""
        for index in range(4):
            with open(os.path.join(self.shards, f"part-{index}.csv"), "w", newline="") as f:
                writer = csv.DictWriter(f, COLUMNS)
                writer.writeheader()
                writer.writerows(row for i, row in enumerate(self.rows) if shard_of(i, row) == index)

    def build(self, spec, group=None, name="cache"):
        return prepare(spec, self.shards, cache_dir=os.path.join(self.folder, name, str(group)), verbose=False,
                       process_group=group)

    def assert_same_data(self, spec, processes=2, stream=False):
        """The group's data sets together equal one process's in-memory build; `stream`: the group builds
        streaming (small batches and read blocks)."""
        whole = self.build(spec)
        with mock.patch.dict(os.environ, {"ZOO_STREAM_BYTES": "0" if stream else str(2**62)}), \
                mock.patch.object(spec_streaming, "BATCH_ROWS", 29), mock.patch.object(spec_streaming, "BLOCK_BYTES", 512), \
                mock.patch.object(spec_streaming, "PART_ROWS", 40):
            parts = in_process_group(processes, lambda group: self.build(spec, group, name=f"cache-{stream}"))
        self.assertEqual(["streamed" in part.info for part in parts], [stream] * processes)
        states = [part.preprocessing() for part in parts]
        for state in states:
            self.assertEqual(rounded(state["fitted"]), rounded(whole.preprocessing()["fitted"]))
            self.assertEqual(state["schema"], whole.preprocessing()["schema"])
        self.assertEqual([part.info["process"]["shards"] for part in parts][:2],
                         [list(range(4))[rank::processes] for rank in range(processes)][:2])
        for split in SPLITS:
            self.assertEqual(sum(part.num_rows(split) for part in parts), whole.num_rows(split), split)
            expected, found = rows_by_key([whole], split), rows_by_key(parts, split)
            self.assertEqual(sorted(found), sorted(expected), split)
            for key, rows in expected.items():
                for mine, theirs in zip(found[key], rows):
                    for name in theirs:
                        self.assertAllClose(mine[name], theirs[name], atol=1e-6, msg=f"{split} {name}")
        return whole, parts

    def test_histories_from_the_log_and_a_time_split(self):
        self.write_shards(lambda i, row: int(row["user_id"][-3:]) % 4)  # shards partitioned by user
        spec = impression_spec(statistics=False, sequence_length=4)
        spec["columns"]["price"] = {"role": "num", "type": "numeric", "log1p": True, "scale": "standardize"}
        for stream in (False, True):
            with self.subTest(stream=stream):
                whole, parts = self.assert_same_data(spec, stream=stream)
                self.assertGreater(whole.num_rows("validation"), 0)
        self.assertGreater(parts[0].info["streamed"]["partitions"], 1)

    def test_per_user_split_with_three_processes(self):
        self.write_shards(lambda i, row: int(row["user_id"][-3:]) % 4)
        spec = impression_spec(statistics=False, sequence_length=4, split={"by": "user", "fractions": [0.6, 0.2, 0.2]})
        for stream in (False, True):
            with self.subTest(stream=stream):
                self.assert_same_data(spec, processes=3, stream=stream)

    def test_histories_from_the_log_with_random_and_order_splits_streaming(self):
        # rows sorted by user: a random or order split is over every process's rows in (user, time) order
        self.write_shards(lambda i, row: int(row["user_id"][-3:]) % 4)
        for split in ({"by": "random", "fractions": [0.7, 0.2, 0.1], "seed": 2},
                      {"by": "order", "fractions": [0.7, 0.2, 0.1]}):
            with self.subTest(split=split["by"]):
                spec = impression_spec(statistics=False, sequence_length=4, split=split)
                spec["history"]["only"] = {"column": "clicked", "op": "==", "value": 1}
                self.assert_same_data(spec, processes=3, stream=True)

    def test_order_and_random_splits_buckets_and_min_counts_over_shards_in_file_order(self):
        self.write_shards(lambda i, row: i * 4 // len(self.rows))  # consecutive blocks: users span shards
        for split in ({"by": "order", "fractions": [0.7, 0.2, 0.1]},
                      {"by": "random", "fractions": [0.7, 0.2, 0.1], "seed": 3},
                      {"by": "time", "fractions": [0.7, 0.2, 0.1]}):
            spec = impression_spec(statistics=False, split=split)
            del spec["history"]
            bucketed = split["by"] != "time"
            spec["columns"]["price"] = ({"role": "ctx", "type": "numeric", "buckets": 5} if bucketed else
                                        {"role": "num", "type": "numeric", "log1p": True, "scale": "standardize"})
            spec["columns"]["item_id"] = {"role": "cand", "min_count": 3}
            for stream in (False, True):
                with self.subTest(split=split["by"], stream=stream):
                    whole, _ = self.assert_same_data(spec, processes=2 + stream, stream=stream)
                    fit = whole.preprocessing()["fitted"]["price"]
                    self.assertGreater(len(fit["edges"]) if bucketed else fit["std"], 2 if bucketed else 0)

    def test_sampled_negatives_take_every_process_item_attributes(self):
        self.write_shards(lambda i, row: int(row["user_id"][-3:]) % 4)
        spec = impression_spec(statistics=False, feedback=False, sequence_length=4)
        spec["label"] = {"events": True, "negatives": 2, "seed": 0}
        whole = self.build(spec)
        parts = in_process_group(2, lambda group: self.build(spec, group))
        state = whole.preprocessing()
        self.assertEqual(rounded(parts[0].preprocessing()["fitted"]), rounded(state["fitted"]))
        category = {}
        for row in self.rows:
            category[row["item_id"]] = row["category"]
        items, categories = state["fitted"]["item_id"]["tokens"], state["fitted"]["category"]["tokens"]
        for part in parts:
            features, labels = part.take("train", np.arange(part.num_rows("train")))
            self.assertEqual(labels[:, 0].tolist(), [1.0, 0.0, 0.0] * (labels.shape[0] // 3))
            for item, cat in zip(np.ravel(features["cand_item_id"]), np.ravel(features["cand_category"])):
                if item <= len(items):  # a drawn item (training items only) carries its own category
                    self.assertEqual(categories[cat - 1], category[items[item - 1]])
        self.assertEqual(sum(p.num_rows("train") for p in parts), whole.num_rows("train"))
        with mock.patch.dict(os.environ, {"ZOO_STREAM_BYTES": "0"}), mock.patch.object(spec_streaming, "PART_ROWS", 30):
            streamed = in_process_group(2, lambda group: self.build(spec, group, name="streamed"))
        for part, again in zip(parts, streamed):  # each process's negatives: the same stream, partition by partition
            self.assertIn("streamed", again.info)
            for split in SPLITS:
                self.assertEqual(part.num_rows(split), again.num_rows(split))
                first, second = (p.take(split, np.arange(p.num_rows(split))) for p in (part, again))
                for key in first[0]:
                    self.assertAllClose(second[0][key], first[0][key], atol=1e-6, msg=f"{split} {key}")
                np.testing.assert_array_equal(second[1], first[1])

    def test_sampled_negatives_in_file_order_streaming_as_in_memory(self):
        self.write_shards(lambda i, row: i % 4)
        spec = impression_spec(statistics=False, split={"by": "random", "fractions": [0.7, 0.2, 0.1], "seed": 5})
        del spec["history"]
        spec["label"] = {"events": True, "negatives": 2, "seed": 0}
        parts = in_process_group(3, lambda group: self.build(spec, group, name="memory"))
        with mock.patch.dict(os.environ, {"ZOO_STREAM_BYTES": "0"}), mock.patch.object(spec_streaming, "BATCH_ROWS", 17):
            streamed = in_process_group(3, lambda group: self.build(spec, group, name="streamed"))
        for part, again in zip(parts, streamed):  # each process's negatives and their attributes, as in memory
            self.assertIn("streamed", again.info)
            for split in SPLITS:
                first, second = (p.take(split, np.arange(p.num_rows(split))) for p in (part, again))
                for key in first[0]:
                    np.testing.assert_array_equal(second[0][key], first[0][key], err_msg=f"{split} {key}")

    def test_users_across_processes_are_refused_for_histories_from_the_log(self):
        self.write_shards(lambda i, row: i % 4)
        with self.assertRaisesRegex(ZooError, "^user 'user-0\\d\\d' has rows in the shards of processes 0 and 1 "
                                              "\\(\\d+ user\\(s\\) span processes\\): a history built from the log"):
            in_process_group(2, lambda group: self.build(impression_spec(statistics=False), group))

    def test_a_bad_shard_stops_every_process_with_its_error(self):
        self.write_shards(lambda i, row: int(row["user_id"][-3:]) % 4)
        path = os.path.join(self.shards, "part-3.csv")
        with open(path) as f:
            lines = f.readlines()
        lines[2] = lines[2].replace(lines[2].split(",")[0], "maybe", 1)
        with open(path, "w") as f:
            f.writelines(lines)
        table = impression_spec(statistics=False, split={"by": "random", "fractions": [0.8, 0.1, 0.1], "seed": 0})
        del table["history"]
        for spec, stream in ((impression_spec(statistics=False), False), (table, True)):  # in memory; streaming (its read 1)
            errors = []

            def build(group):
                try:
                    self.build(spec, group, name=f"cache-{stream}")
                except ZooError as error:
                    errors.append((group.rank, str(error)))

            with mock.patch.dict(os.environ, {"ZOO_STREAM_BYTES": "0" if stream else str(2**62)}):
                in_process_group(2, build)
            messages = dict(errors)
            self.assertRegex(messages[1], "part-3.csv.*line 3.*clicked")
            self.assertEqual(messages[0], f"process 1 of 2 failed: {messages[1]}")
