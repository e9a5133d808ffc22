import contextlib
import io
import json
import os
from unittest import mock

import numpy as np

from tests.impression_logs import impression_spec, write_impression_log
from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import spec_engine, spec_reading, spec_streaming, storage
from zoo.errors import ZooError

CRITEO = SHARED_DATA / "deepctr" / "criteo_sample.txt"


def write_wide_log(path, rows=500, seed=0):
    """A headered CSV with every column kind the streaming build serves: string ids, a quoted title, a
    '^'-joined item list sharing the item vocabulary, a tag list of its own, counts with gaps, prices, stock levels."""
    rng = np.random.default_rng(seed)
    start = 1_700_000_000
    times = np.sort(rng.integers(0, 20 * 86400, size=rows)) + start
    with open(path, "w") as f:
        f.write("price,clicked,ts,user,item,title,count,tags,seen,device,weight,stock\n")
        for i in range(rows):
            item = int(rng.zipf(1.6)) % 60
            seen = "^".join(f"sku{int(x)}" for x in rng.integers(0, 60, size=rng.integers(0, 9)))
            tags = "^".join(f"t{int(x)}" for x in rng.integers(0, 15, size=rng.integers(0, 4)))
            price = "" if i % 11 == 0 else f"{rng.gamma(2.0, 10.0):.3f}"
            count = "" if i % 7 == 0 else str(int(rng.integers(0, 40)))
            weight = "" if i % 5 == 0 else f"{rng.normal(3.0, 2.0):.2f}"
            f.write(f'{price},{int(rng.random() < 0.3)},{int(times[i])},u{int(rng.integers(0, 40))},sku{item},'
                    f'"Item {item}, size {item % 3}",{count},{tags},{seen},{["ios", "web"][i % 2]},{weight},'
                    f'{"" if i % 13 == 0 else i % 50 - 10}\n')
    return path


def wide_spec(split):
    return {
        "source": {"format": "csv", "delimiter": ",", "header": True},
        "label": {"column": "clicked"},
        "time": {"column": "ts", "format": "unix_s", "derive": ["hour", "weekday"]},
        "user": "user",
        "item": "item",
        "columns": {
            "user": {"role": "user", "max_size": 25},
            "item": {"role": "cand", "min_count": 2},
            "title": {"role": "cand", "hash_buckets": 97},
            "device": {"role": "ctx"},
            "count": {"role": "ctx", "type": "numeric", "bars": True, "min_count": 2},
            "price": {"role": "num", "type": "numeric", "log1p": True, "scale": "standardize"},
            "weight": {"role": "cand", "type": "numeric", "buckets": 6, "fill": 0},
            "stock": {"role": "num", "type": "numeric", "fill": 0, "scale": "minmax"},
            "seen": {"role": "hist", "type": "list", "separator": "^", "feature": "item"},
            "tags": {"role": "hist", "type": "list", "separator": "^", "min_count": 3},
        },
        "history": {"from": "columns"},
        "sequence_length": 5,
        "split": split,
    }


def arrays(directory):
    return {name[:-4]: np.load(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if name.endswith(".npy")}


def meta(directory):
    with open(os.path.join(directory, "meta.json")) as f:
        return json.load(f)


class StreamingBuildTest(TestCase):
    """The streaming build gives the in-memory build's data set, batch boundaries anywhere."""

    def setUp(self):
        super().setUp()
        self.folder = self.get_temp_dir()

    def both(self, spec, files, batch_rows=37, part_rows=40, **kwargs):
        """(in-memory dir, streaming dir), the second with small batches, partitions and 1 KiB read blocks."""
        out = []
        for stream in (False, True):
            directory = os.path.join(self.folder, f"{len(os.listdir(self.folder))}-{stream}")
            os.makedirs(directory)
            with mock.patch.object(spec_streaming, "BATCH_ROWS", batch_rows), \
                    mock.patch.object(spec_streaming, "PART_ROWS", part_rows), \
                    mock.patch.object(spec_streaming, "BLOCK_BYTES", 1024):
                spec_engine.build(spec, files, directory, verbose=False, stream=stream, **kwargs)
            out.append(directory)
        return out

    def assert_same(self, memory, streamed, exact=True):
        expected, got = arrays(memory), arrays(streamed)
        self.assertEqual(sorted(expected), sorted(got))
        for name, values in expected.items():
            self.assertEqual((values.dtype, values.shape), (got[name].dtype, got[name].shape), name)
            if name.split(".")[1] == "num_price" and not exact:  # standardized: sums in another order
                np.testing.assert_allclose(got[name], values, rtol=1e-6, atol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(got[name], values, err_msg=name)
        first, second = meta(memory), meta(streamed)
        self.assertEqual(first["rows"], second["rows"])
        self.assertEqual(first["schema"], second["schema"])
        self.assertEqual(first["info"]["accounting"], second["info"]["accounting"])
        self.assertEqual(first["info"]["repairs"], second["info"]["repairs"])
        self.assertIn("streamed", second["info"])
        return first, second

    def assert_same_fit(self, memory, streamed):
        fits = []
        for directory in (memory, streamed):
            with open(os.path.join(directory, "preprocessing.json")) as f:
                fits.append(json.load(f)["fitted"])
        self.assertEqual(list(fits[0]), list(fits[1]))  # same columns, same order
        for name, state in fits[0].items():
            other = fits[1][name]
            self.assertEqual(sorted(state), sorted(other), name)
            for key, value in state.items():
                if key in ("mean", "std", "fill"):
                    self.assertAlmostEqual(other[key], value, delta=1e-12 * max(1.0, abs(value)), msg=(name, key))
                else:
                    self.assertEqual(other[key], value, (name, key))

    def test_every_split_and_column_kind_over_shards(self):
        files = [write_wide_log(os.path.join(self.folder, f"part-{i}.csv"), rows=rows, seed=i)
                 for i, rows in enumerate((300, 7, 220))]
        splits = [{"by": "time", "fractions": [0.7, 0.2, 0.1]}, {"by": "order", "fractions": [0.6, 0.3, 0.1]},
                  {"by": "random", "fractions": [0.8, 0.1, 0.1], "seed": 5},
                  {"by": "held_out_users", "fractions": [0.6, 0.2, 0.2], "seed": 2},
                  {"by": "date", "validation": "2023-11-25", "test": "2023-11-28"}]
        for split in splits:
            with self.subTest(split=split["by"]):
                memory, streamed = self.both(wide_spec(split), files)
                first, _ = self.assert_same(memory, streamed, exact=False)
                self.assertEqual(sum(first["rows"].values()), 527)
                self.assertGreater(min(first["rows"].values()), 0)
                self.assert_same_fit(memory, streamed)
        _, second = meta(memory), meta(streamed)
        self.assertEqual(second["info"]["streamed"]["reads"], 2)  # a date split needs no counting read

    def test_scoring_mode_reads_once_and_counts_unknown_values(self):
        train = write_wide_log(os.path.join(self.folder, "train.csv"), rows=400, seed=1)
        later = write_wide_log(os.path.join(self.folder, "later.csv"), rows=300, seed=9)
        fit_dir = os.path.join(self.folder, "fit")
        os.makedirs(fit_dir)
        spec_engine.build(wide_spec({"by": "time", "fractions": [0.8, 0.1, 0.1]}), [train], fit_dir, verbose=False)
        with open(os.path.join(fit_dir, "preprocessing.json")) as f:
            fitted = json.load(f)
        memory, streamed = self.both(None, [later], batch_rows=50, fitted=fitted)
        first, second = self.assert_same(memory, streamed)
        self.assertEqual(first["info"]["unknown_ids"], second["info"]["unknown_ids"])
        self.assertGreater(first["info"]["unknown_ids"]["user"]["values"], 0)
        self.assertEqual(second["info"]["streamed"]["reads"], 1)

    def test_criteo_sample_as_the_deres_protocol(self):
        from zoo.datasets import criteo

        with open(CRITEO) as f:
            header = f.readline().startswith("label")
        spec = criteo.spec("deres", dict(criteo.OPTIONS["deres"], min_count=2), ",", header)
        memory, streamed = self.both(spec, [str(CRITEO)], batch_rows=23)
        first, _ = self.assert_same(memory, streamed)
        self.assertEqual(meta(streamed)["info"]["streamed"]["reads"], 3)  # count, fit, encode
        self.assertGreater(first["rows"]["train"], 0)

    def test_histories_from_the_log_over_user_partitions(self):
        files = [write_impression_log(os.path.join(self.folder, f"log-{i}.csv"), rows=rows, users=25, seed=i)
                 for i, rows in enumerate((260, 150))]
        only = {"column": "clicked", "op": "==", "value": 1}
        cases = [({"by": "time", "fractions": [0.8, 0.1, 0.1]}, None, 0), ({"by": "user", "fractions": [0.6, 0.2, 0.2]},
                 only, 2), ({"by": "random", "fractions": [0.7, 0.2, 0.1], "seed": 4}, None, 1),
                 ({"by": "order", "fractions": [0.7, 0.2, 0.1]}, only, 0)]
        for split, rule, min_length in cases:
            with self.subTest(split=split["by"]):
                spec = impression_spec(statistics=False, sequence_length=4, split=split)
                spec["history"].update(only=rule, min_length=min_length)
                if split["by"] == "order":  # a tags column first: both builds fit the columns in their order
                    spec["columns"] = {"tags": spec["columns"].pop("tags"), **spec["columns"]}
                memory, streamed = self.both(spec, files)
                first, second = self.assert_same(memory, streamed, exact=False)
                self.assertEqual(first["kind"], "events")
                self.assertGreater(second["info"]["streamed"]["partitions"], 3)
                self.assert_same_fit(memory, streamed)

    def test_partitions_numbered_densely_and_few(self):
        # users of ~16 rows against partitions of 5 rows (numbers would skip); then at most 3 partition files
        files = [write_impression_log(os.path.join(self.folder, "log.csv"), rows=410, users=25, seed=2)]
        spec = impression_spec(statistics=False, sequence_length=4)
        memory, streamed = self.both(spec, files, part_rows=5)
        self.assert_same(memory, streamed, exact=False)
        self.assertEqual(meta(streamed)["info"]["streamed"]["partitions"], 25)
        with mock.patch.object(spec_streaming, "MAX_PARTITIONS", 3):
            memory, streamed = self.both(spec, files, part_rows=5)
        self.assert_same(memory, streamed, exact=False)
        self.assertLessEqual(meta(streamed)["info"]["streamed"]["partitions"], 3)

    def test_sampled_negatives_in_file_order_take_every_batch_attributes(self):
        path = write_impression_log(os.path.join(self.folder, "log.csv"), rows=300, users=20, seed=4)
        spec = impression_spec(statistics=False, split={"by": "random", "fractions": [0.7, 0.2, 0.1], "seed": 1})
        del spec["history"]
        spec["label"] = {"events": True, "negatives": 2, "seed": 0}
        memory, streamed = self.both(spec, [path], batch_rows=23)
        self.assert_same(memory, streamed, exact=False)
        self.assertEqual(meta(streamed)["info"]["streamed"]["reads"], 3)  # fit, last-seen attributes, encode

    def test_row_counting_without_a_label_or_time_column_reads_one_text_column(self):
        # read 1 of an order split over an event log with no time: types are not guessed from a first block
        path = os.path.join(self.folder, "events.csv")
        with open(path, "w") as f:
            f.write("user,item\n" + "".join(f"u{i % 7},{i % 50}\n" for i in range(300)) + "u1,x12\nu2,x12\n")
        spec = {"source": {"format": "csv", "delimiter": ",", "header": True}, "label": {"events": True, "seed": 0},
                "user": "user", "item": "item", "columns": {"user": {"role": "user"}, "item": {"role": "cand"}},
                "split": {"by": "order", "fractions": [0.8, 0.1, 0.1]}}
        memory, streamed = self.both(spec, [path])
        self.assert_same(memory, streamed)

    def test_every_row_dropped_is_one_line_as_in_memory(self):
        path = write_wide_log(os.path.join(self.folder, "log.csv"), rows=40)
        with open(path) as f:
            lines = f.readlines()
        with open(path, "w") as f:  # every label empty
            f.writelines([lines[0]] + [",".join(v if i != 1 else "" for i, v in enumerate(line.split(",")))
                                       for line in lines[1:]])
        for stream in (False, True):
            with self.assertRaisesRegex(ZooError, r"log\.csv: no row is left \(log\.csv: read 40 row\(s\); dropped 40 row\(s\) with an empty 'clicked'\)$"):
                spec_engine.build(wide_spec({"by": "time", "fractions": [0.8, 0.1, 0.1]}), [path],
                                  os.path.join(self.folder, f"none-{stream}"), verbose=False, stream=stream)

    def test_events_with_sampled_negatives_and_scoring_over_user_partitions(self):
        path = write_impression_log(os.path.join(self.folder, "log.csv"), rows=400, users=30, seed=3)
        spec = impression_spec(statistics=False, feedback=False, sequence_length=4)
        spec["label"] = {"events": True, "negatives": 2, "seed": 0}
        memory, streamed = self.both(spec, [path], part_rows=60)
        self.assert_same(memory, streamed, exact=False)
        self.assert_same_fit(memory, streamed)
        with open(os.path.join(memory, "preprocessing.json")) as f:
            fitted = json.load(f)
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=200, users=40, seed=8,
                                     start="2024-04-01T00:00:00Z", unseen_from=70)
        memory, streamed = self.both(None, [later], part_rows=50, fitted=fitted)
        first, second = self.assert_same(memory, streamed)
        self.assertEqual(first["info"]["unknown_ids"], second["info"]["unknown_ids"])
        self.assertGreater(first["info"]["unknown_ids"]["item_id"]["rows"], 0)

    def test_files_over_the_threshold_stream_and_users_across_processes_are_refused(self):
        from tests.testing import in_process_group

        path = write_wide_log(os.path.join(self.folder, "log.csv"), rows=60)
        spec = wide_spec({"by": "order", "fractions": [0.8, 0.1, 0.1]})
        out = os.path.join(self.folder, "auto")
        os.makedirs(out)
        printed = io.StringIO()
        with mock.patch.dict(os.environ, {"ZOO_STREAM_BYTES": "100"}), contextlib.redirect_stdout(printed):
            info = spec_engine.build(spec, [path], out)
        self.assertIn("streamed", info)
        self.assertIn("streaming build: fitted on 48 training rows of 60\nstreaming build: encoded 60 rows\n",
                      printed.getvalue())
        errors = []
        per_user = wide_spec({"by": "user", "fractions": [0.8, 0.1, 0.1]})

        def build(group):
            try:
                spec_engine.build(per_user, [path, path], os.path.join(self.folder, f"g{group.rank}"), verbose=False,
                                  group=group, stream=True)
            except ZooError as error:
                errors.append(str(error))

        in_process_group(2, build)
        self.assertEqual(len(errors), 2)
        for error in errors:  # the same file twice: every user has rows in both processes' shards
            self.assertRegex(error, r"^user 'u\d+' has rows in the shards of processes 0 and 1 \(\d+ user\(s\) span")

    def test_bad_rows_are_named_as_in_memory(self):
        path = write_wide_log(os.path.join(self.folder, "log.csv"), rows=120)
        with open(path) as f:
            lines = f.readlines()
        lines[90] = lines[90].replace(",0,", ",2,", 1) if ",0," in lines[90] else lines[90].replace(",1,", ",2,", 1)
        with open(path, "w") as f:
            f.writelines(lines)
        spec = wide_spec({"by": "random", "fractions": [0.8, 0.1, 0.1], "seed": 1})
        for stream in (False, True):
            with mock.patch.object(spec_streaming, "BLOCK_BYTES", 1024), \
                    self.assertRaisesRegex(ZooError, r"log\.csv, line 91: column 'clicked' should be 0 or 1, found '2'"):
                spec_engine.build(spec, [path], os.path.join(self.folder, f"bad-{stream}"), verbose=False,
                                  stream=stream)


class TableAppenderTest(TestCase):
    def test_batches_make_the_arrays_np_save_would(self):
        folder = self.get_temp_dir()
        writer = storage.TableAppender(folder)
        rng = np.random.default_rng(0)
        parts = [{"labels": rng.random(n).astype(np.float32), "hist_x": rng.integers(0, 9, (n, 3)).astype(np.int32),
                  "line": np.arange(n, dtype=np.int64)} for n in (4, 0, 11)]
        for part in parts:
            writer.append("train", part)
        writer.append("test", {key: values[:0] for key, values in parts[0].items()})
        writer.close(_schema(), {"note": "x"})
        for key in parts[0]:
            expected = np.concatenate([part[key] for part in parts])
            for mmap in (None, "r"):
                got = np.load(os.path.join(folder, f"train.{key}.npy"), mmap_mode=mmap)
                self.assertEqual((got.dtype, got.shape), (expected.dtype, expected.shape))
                np.testing.assert_array_equal(got, expected)
            self.assertEqual(np.load(os.path.join(folder, f"test.{key}.npy")).shape, (0,) + expected.shape[1:])
        self.assertEqual(meta(folder)["rows"], {"train": 15, "test": 0})
        other = storage.TableAppender(self.get_temp_dir())
        other.append("train", {"labels": np.zeros(2, np.float32)})
        with self.assertRaisesRegex(ValueError, r"train.labels: a batch of float64 \(\) after float32 \(\)"):
            other.append("train", {"labels": np.zeros(2)})


def _schema():
    from zoo.feature import Feature
    from zoo.schema import Schema

    return Schema(features=[Feature("x", "hist", 10, 4)], sequence_length=3)
