import csv
import json
import os
import unittest

import numpy as np

from tests.impression_logs import impression_spec, write_impression_log
from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import prepare, read_preprocessing
from zoo.errors import ZooError

USER_BEHAVIOR = SHARED_DATA / "taobao-userbehavior" / "UserBehavior.csv"


def read_log(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def seconds(text):
    import datetime

    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def everything(processed, split):
    features, labels = processed.take(split, np.arange(processed.num_rows(split)))
    return features, labels[:, 0], processed.source_lines(split)


class ImpressionLogTest(TestCase):
    """A CSV impression log with a header, quoted titles holding commas, ISO times and a 0/1 label."""

    def setUp(self):
        super().setUp()
        self.folder = self.get_temp_dir()
        self.path = write_impression_log(os.path.join(self.folder, "log.csv"), rows=240, users=12, items=30)
        self.rows = read_log(self.path)

    def prepare(self, spec=None, path=None, **kwargs):
        return prepare(spec or impression_spec(sequence_length=4), path or self.path,
                       cache_dir=os.path.join(self.folder, "cache"), verbose=False, **kwargs)

    def test_histories_do_not_depend_on_the_files_row_order(self):
        """Times cut to the day (many rows of a user at one time, at a window's edge): the same rows in another
        file order give every row the same features (histories, their order and cut included): rows sorted by
        (user, time, the entries' fields and label, file order), tie_keys (the streaming build and `request`
        sort by them too: their parity tests hold them to this build)."""
        import re

        lines = open(self.path).read().splitlines()
        header, body = lines[0], [re.sub(r"T\d\d:\d\d:\d\dZ", "T00:00:00Z", line) for line in lines[1:]]
        paths = []
        for k, order in enumerate((np.arange(len(body)), np.random.default_rng(5).permutation(len(body)))):
            paths.append(os.path.join(self.folder, f"day-{k}.csv"))
            with open(paths[-1], "w") as f:
                f.write("\n".join([header] + [body[i] for i in order]) + "\n")
        spec = impression_spec(sequence_length=3)

        def by_row(processed, path):
            texts = open(path).read().splitlines()
            out = {}
            for split in ("train", "validation", "test"):
                features, _, where = everything(processed, split)
                for k, line in enumerate(where):
                    out.setdefault(texts[line - 1], []).append({key: value[k].tolist() for key, value in features.items()})
            return out

        first, second = (by_row(prepare(spec, path, cache_dir=os.path.join(self.folder, f"c{k}"), verbose=False), path)
                         for k, path in enumerate(paths))
        self.assertEqual(set(first), set(second))
        cut = [rows for rows in first.values() if np.count_nonzero(rows[0]["hist_item_id"]) == 3]
        self.assertGreater(len(cut), 20)  # (windows that were cut: where the tie order decides)
        for text, rows in first.items():
            self.assertEqual(sorted(map(str, rows)), sorted(map(str, second[text])), text)

    def test_rows_become_the_contract_with_strictly_earlier_histories(self):
        processed = self.prepare()
        state = processed.preprocessing()
        tokens = state["fitted"]["item_id"]["tokens"]
        item_id = {token: i + 1 for i, token in enumerate(tokens)}
        oov = len(tokens) + 1
        tag_tokens = state["fitted"]["tags"]["tokens"]
        tag_id = {token: i + 1 for i, token in enumerate(tag_tokens)}
        times = np.array([seconds(r["ts"]) for r in self.rows])
        users = np.array([r["user_id"] for r in self.rows])
        cut = np.sort(times)[[int(240 * 0.8), int(240 * 0.9)]]
        train = times < cut[0]
        # the vocabulary: training rows only, by descending count, ties by token
        counts = {}
        for row in np.array(self.rows)[train]:
            counts[row["item_id"]] = counts.get(row["item_id"], 0) + 1
        self.assertEqual(tokens, sorted(counts, key=lambda t: (-counts[t], t)))
        prices = np.array([np.log1p(float(r["price"])) if r["price"] else np.nan for r in self.rows])
        fill = np.nanmean(prices[train])
        seen = 0
        for split, code in (("train", 0), ("validation", 1), ("test", 2)):
            features, labels, lines = everything(processed, split)
            index = lines - 2  # header on line 1
            expected_split = np.where(times < cut[0], 0, np.where(times < cut[1], 1, 2))
            self.assertTrue(np.all(expected_split[index] == code))
            seen += index.size
            np.testing.assert_array_equal(labels, [float(self.rows[i]["clicked"]) for i in index])
            np.testing.assert_allclose(features["num_price"], np.where(np.isnan(prices[index]), fill, prices[index]),
                                       rtol=1e-6)
            for k, i in enumerate(index):
                earlier = np.flatnonzero((users == users[i]) & (times < times[i]))
                earlier = earlier[np.argsort(times[earlier], kind="stable")][-4:]
                expected = [item_id.get(self.rows[j]["item_id"], oov) for j in earlier]
                self.assertEqual(list(features["hist_item_id"][k][4 - len(expected):]), expected)
                self.assertTrue(np.all(features["hist_item_id"][k][: 4 - len(expected)] == 0))
                self.assertEqual(list(features["hist_time"][k][4 - len(expected):]), list(times[earlier]))
                self.assertEqual(features["cand_item_id"][k, 0], item_id.get(self.rows[i]["item_id"], oov))
                self.assertEqual(features["cand_time"][k, 0], times[i])
                tags = [t.strip() for t in self.rows[i]["tags"].split("|") if t.strip()][:4]  # (no-break spaces too)
                expected = [tag_id.get(t, len(tag_tokens) + 1) for t in tags]
                self.assertEqual(list(features["cand_tags"][k, 0]), expected + [0] * (4 - len(expected)))
        self.assertEqual(seen, 240)
        self.assertIn("\u00a0", "".join(r["tags"] for r in self.rows))
        self.assertTrue(all(token == token.strip() and token for token in tag_tokens))
        account = processed.info["accounting"]["log.csv"]
        self.assertEqual(account["read"], account["kept"] + account["repaired"] + account["dropped"])
        self.assertEqual(account["repaired"], sum(1 for r in self.rows if not r["price"]))
        self.assertEqual(processed.schema.feature("cand_title").vocabulary_size,
                         len(state["fitted"]["title"]["tokens"]) + 2)
        self.assertIn('Item 0, size 0, "deluxe"', state["fitted"]["title"]["tokens"] + ["Item 0, size 0, \"deluxe\""])
        self.assertTrue(any(", size" in t for t in state["fitted"]["title"]["tokens"]))

    def test_tag_lists_longer_than_max_tags_keep_their_first_values_counted(self):
        path = write_impression_log(os.path.join(self.folder, "many.csv"), rows=200, items=80)
        rows = read_log(path)
        processed = self.prepare(path=path)
        longer = sum(len([t for t in r["tags"].split("|") if t.strip()]) > 4 for r in rows)
        self.assertGreater(longer, 0)  # items 31 and 63 hold all five tags
        account = processed.info["accounting"]["many.csv"]
        self.assertEqual(account["kinds"]["kept the first 4 of {n} 'tags' tag list(s) longer than 4"], longer)
        self.assertEqual(account["repaired"], sum(1 for r in rows if not r["price"] or
                                                  len([t for t in r["tags"].split("|") if t.strip()]) > 4))

    def test_feedback_and_running_statistics_read_strictly_earlier_rows_only(self):
        processed = self.prepare()
        state = processed.preprocessing()["fitted"]
        times = np.array([seconds(r["ts"]) for r in self.rows])
        users = np.array([r["user_id"] for r in self.rows])
        items = np.array([r["item_id"] for r in self.rows])
        clicked = np.array([float(r["clicked"]) for r in self.rows])
        train = times < np.sort(times)[int(240 * 0.8)]
        prior = clicked[train].mean()
        self.assertAlmostEqual(state["statistics"]["prior"], prior)

        def raw(keys):  # (rows, positives, rate) of each row's key strictly earlier in time, row by row
            out = np.zeros((240, 3))
            for i in range(240):
                earlier = (keys == keys[i]) & (times < times[i])
                out[i] = earlier.sum(), clicked[earlier].sum(), (clicked[earlier].sum() + 10 * prior) / (earlier.sum() + 10)
            return out

        user, item = raw(users), raw(items)
        pair = raw(np.array([f"{r['user_id']}|{r['category']}" for r in self.rows]))  # the user's rows of its category
        edges = {name: [np.unique(np.quantile(values[train, j], np.arange(1, 20) / 20)) for j in range(3)]
                 for name, values in (("user", user), ("item", item), ("pair", pair))}
        for split in ("train", "validation", "test"):
            features, _, lines = everything(processed, split)
            index = lines - 2
            for j, kind in enumerate(("seen", "positives", "rate")):
                np.testing.assert_array_equal(features[f"user_user_id_{kind}"],
                                              1 + np.searchsorted(edges["user"][j], user[index, j], side="right"), kind)
                np.testing.assert_array_equal(features[f"cand_item_id_{kind}"][:, 0],
                                              1 + np.searchsorted(edges["item"][j], item[index, j], side="right"), kind)
                np.testing.assert_array_equal(features[f"cand_user_id_x_category_{kind}"][:, 0],
                                              1 + np.searchsorted(edges["pair"][j], pair[index, j], side="right"), kind)
            for k, i in enumerate(index):  # each history entry's feedback is its earlier row's label
                earlier = np.flatnonzero((users == users[i]) & (times < times[i]))
                earlier = earlier[np.argsort(times[earlier], kind="stable")][-4:]
                self.assertEqual(list(features["hist_feedback"][k][4 - len(earlier):]), list(1 + clicked[earlier]))
                self.assertTrue(np.all(features["hist_feedback"][k][: 4 - len(earlier)] == 0))
        # a test row's label reaches no feature of a row at or before its time, and the table holds every row
        flipped = int(np.flatnonzero(~train)[len(np.flatnonzero(~train)) // 2])
        with open(self.path) as f:
            lines_of_file = f.read().splitlines(keepends=True)
        row = lines_of_file[flipped + 1]
        lines_of_file[flipped + 1] = ("1" if row[0] == "0" else "0") + row[1:]
        other_path = os.path.join(self.folder, "flipped.csv")
        with open(other_path, "w") as f:
            f.write("".join(lines_of_file))
        other = self.prepare(path=other_path)
        changed = 0
        for split in ("train", "validation", "test"):
            a, _, lines = everything(processed, split)
            b, _, _ = everything(other, split)
            before = times[lines - 2] <= times[flipped]
            for key in a:
                np.testing.assert_array_equal(a[key][before], b[key][before], err_msg=key)
                changed += int(np.any(a[key][~before] != b[key][~before]))
        self.assertGreater(changed, 0)
        table = state["statistics:item_id"]
        for token, count, positives in zip(table["values"], table["rows"], table["positives"]):
            self.assertEqual((count, positives), (int((items == token).sum()), int(clicked[items == token].sum())))
        # scoring a later file: the item's counts from the table, the user's from the file's earlier rows
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=60, users=12, items=30, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=25)
        scored = self.prepare(None, later, preprocessing=processed.preprocessing())
        features, _, lines = everything(scored, "all")
        rows = read_log(later)
        later_users = np.array([r["user_id"] for r in rows])
        later_times = np.array([seconds(r["ts"]) for r in rows])
        for k, i in enumerate(lines - 2):
            seen = int(((later_users == later_users[i]) & (later_times < later_times[i])).sum())
            self.assertEqual(features["user_user_id_seen"][k], 1 + np.searchsorted(edges["user"][0], seen, side="right"))
            count = int((items == rows[i]["item_id"]).sum())  # 0 for a new item
            self.assertEqual(features["cand_item_id_seen"][k, 0], 1 + np.searchsorted(edges["item"][0], count, side="right"))
            known = set(state["category"]["tokens"])  # ids compared: every unknown category is the OOV id
            category = np.array([r["category"] if r["category"] in known else None for r in rows], dtype=object)
            same = int(((later_users == later_users[i]) & (category == category[i]) & (later_times < later_times[i])).sum())
            self.assertEqual(features["cand_user_id_x_category_seen"][k, 0],
                             1 + np.searchsorted(edges["pair"][0], same, side="right"))

    def test_history_from_an_earlier_log_equals_scoring_the_concatenated_log(self):
        fitted = self.prepare().preprocessing()
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=60, users=12, items=30, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=25)
        with open(self.path) as f:
            earlier_lines = f.read().splitlines(keepends=True)
        with open(later) as f:
            later_lines = f.read().splitlines(keepends=True)
        both = os.path.join(self.folder, "both.csv")
        with open(both, "w") as f:
            f.write("".join(earlier_lines + later_lines[1:]))
        whole = self.prepare(None, both, preprocessing=fitted)
        scored = self.prepare(None, later, preprocessing=fitted, history_from=[self.path])
        alone = self.prepare(None, later, preprocessing=fitted)
        features, labels, lines = everything(scored, "all")
        reference, reference_labels, reference_lines = everything(whole, "all")
        offset = len(earlier_lines) - 1  # the later rows' lines in the concatenated file
        position = {int(line): i for i, line in enumerate(reference_lines)}
        rows = np.array([position[int(line) + offset] for line in lines])
        self.assertEqual(len(lines), 60)
        np.testing.assert_array_equal(labels, reference_labels[rows])
        for key in features:
            np.testing.assert_array_equal(features[key], reference[key][rows], err_msg=key)
        self.assertFalse(np.array_equal(features["hist_item_id"], everything(alone, "all")[0]["hist_item_id"]))
        account = scored.info["accounting"]["log.csv"]
        self.assertEqual(account["kinds"]["read {n} row(s) for histories and statistics only (an earlier log: not "
                                          "scored)"], 240)
        self.assertEqual((account["read"], account["kept"]), (240, 0))
        summary = scored.info["repairs"] if isinstance(scored.info.get("repairs"), str) else ""
        self.assertIn("log.csv: read 240 row(s) for histories and statistics only (an earlier log: not scored)", summary)
        self.assertNotIn("0 kept + 0 repaired + 240 dropped", summary)  # an earlier log loses no row
        self.assertNotRegex(summary, r"\b0 '")  # no kind of change with a count of 0
        # each file's account counts its own rows' unknown values (the earlier log's items are all known)
        self.assertFalse([kind for kind in account["kinds"] if kind.startswith("mapped")])
        new_items = sum(line.split(",")[2].startswith("new-") for line in later_lines[1:])
        self.assertGreater(new_items, 0)
        self.assertEqual(scored.info["accounting"]["later.csv"]["kinds"][
            "mapped the 'item_id' of {n} row(s) to the OOV id (unknown to the fitted preprocessing)"], new_items)
        with self.assertRaisesRegex(ZooError, r"^history_from .* goes with a preset's fitted preprocessing$"):
            self.prepare(None, later, history_from=[self.path])

    def test_a_fit_that_continues_a_preset_keeps_its_ids_and_appends_new_values(self):
        """grow_from: the later log's fit keeps every token's id, appends the later training rows' new values
        (most frequent first), keeps the price's scale and the statistics' prior and edges, and adds the
        later rows' counts per item to the earlier fit's; the streaming build grows alike."""
        from zoo.datasets import spec_engine

        earlier = self.prepare().preprocessing()
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=120, users=12, items=30, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=20)
        grown = self.prepare(None, later, grow_from=earlier)
        state, old = grown.preprocessing()["fitted"], earlier["fitted"]
        rows = read_log(later)
        times = np.array([seconds(r["ts"]) for r in rows])
        train = times < np.sort(times)[int(120 * 0.8)]
        counts = {}
        for row in np.array(rows)[train]:
            counts[row["item_id"]] = counts.get(row["item_id"], 0) + 1
        new = sorted((v for v in counts if v not in old["item_id"]["tokens"]), key=lambda v: (-counts[v], v))
        self.assertTrue(new)
        self.assertEqual(state["item_id"]["tokens"], old["item_id"]["tokens"] + new)
        self.assertEqual(state["user_id"]["tokens"][:len(old["user_id"]["tokens"])], old["user_id"]["tokens"])
        self.assertEqual(state["price"], old["price"])
        self.assertEqual(state["statistics"], old["statistics"])
        self.assertEqual(state["statistics:item_id"]["edges"], old["statistics:item_id"]["edges"])
        table = {v: (n, p) for v, n, p in zip(*(old["statistics:item_id"][k] for k in ("values", "rows", "positives")))}
        for row in rows:
            n, p = table.get(row["item_id"], (0, 0))
            table[row["item_id"]] = (n + 1, p + int(row["clicked"]))
        grown_table = state["statistics:item_id"]
        self.assertEqual(grown_table["values"][:len(old["statistics:item_id"]["values"])],
                         old["statistics:item_id"]["values"])
        self.assertEqual({v: (n, p) for v, n, p in zip(grown_table["values"], grown_table["rows"],
                                                       grown_table["positives"])}, table)
        features, _, _ = everything(grown, "train")
        self.assertEqual(grown.schema.feature("cand_item_id").vocabulary_size, len(old["item_id"]["tokens"] + new) + 2)
        self.assertLessEqual(features["cand_item_id"].max(), len(old["item_id"]["tokens"] + new))
        # with the earlier log as history only: the later rows alone are split and trained on, their histories
        # reach into the earlier log, and an item's earlier rows are the preset's count plus the later rows'
        with_history = self.prepare(None, later, grow_from=earlier, history_from=[self.path])
        self.assertEqual(with_history.rows, grown.rows)
        self.assertEqual(with_history.preprocessing()["fitted"]["item_id"], state["item_id"])
        features, _, lines = everything(with_history, "train")
        alone, _, alone_lines = everything(grown, "train")
        self.assertEqual(list(lines), list(alone_lines))
        self.assertGreater((features["hist_item_id"] > 0).sum(), (alone["hist_item_id"] > 0).sum())
        # (the earlier log's rows are in the preset's counts already: not counted twice)
        self.assertEqual(with_history.preprocessing()["fitted"]["statistics:item_id"], grown_table)
        item_rate = [key for key in features if key.endswith("item_id_rate")]
        self.assertTrue(item_rate, list(features))
        for key in item_rate:
            np.testing.assert_array_equal(features[key], alone[key])
        # the streaming build (no running statistics there) continues a fit alike
        spec = impression_spec(sequence_length=4, statistics=False)
        base = self.prepare(spec).preprocessing()
        for stream in (False, True):
            out = os.path.join(self.folder, f"stream-{stream}")
            os.makedirs(out)
            spec_engine.build(spec, [later], out, verbose=False, stream=stream, grow_from=base)
            with open(os.path.join(out, "preprocessing.json")) as f:
                fitted = json.load(f)["fitted"]
            self.assertEqual(fitted["item_id"]["tokens"], base["fitted"]["item_id"]["tokens"] + new, stream)
            self.assertEqual(fitted["price"], base["fitted"]["price"], stream)
        capped = dict(base, spec=dict(base["spec"], columns=dict(base["spec"]["columns"], item_id=dict(
            base["spec"]["columns"]["item_id"], max_size=len(base["fitted"]["item_id"]["tokens"]) + 1))))
        out = os.path.join(self.folder, "capped")
        os.makedirs(out)
        spec_engine.build(None, [later], out, verbose=False, grow_from=capped)
        with open(os.path.join(out, "preprocessing.json")) as f:
            self.assertEqual(json.load(f)["fitted"]["item_id"]["tokens"], base["fitted"]["item_id"]["tokens"] + new[:1])

    def test_history_rows_count_once(self):
        """An earlier log that overlaps the rows scored (the log plus half of them, or every row twice) moved
        scores silently; the same file given twice ended in a RuntimeError from the row account. Repeated rows
        now count once (said in the account), a file given twice is one line, and so is an earlier log without
        the label column that the preset's histories and statistics read."""
        fitted = self.prepare().preprocessing()
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=60, users=12, items=30, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=25)
        with open(self.path) as f:
            header, *earlier_lines = f.read().splitlines(keepends=True)
        with open(later) as f:
            later_lines = f.read().splitlines(keepends=True)[1:]
        reference = everything(self.prepare(None, later, preprocessing=fitted, history_from=[self.path]), "all")
        for name, rows, repeated in (("overlap.csv", earlier_lines + later_lines[:30], 30),
                                     ("twice.csv", earlier_lines + earlier_lines, len(earlier_lines))):
            path = os.path.join(self.folder, name)
            with open(path, "w") as f:
                f.write("".join([header] + rows))
            scored = self.prepare(None, later, preprocessing=fitted, history_from=[path])
            features, labels, lines = everything(scored, "all")
            np.testing.assert_array_equal(lines, reference[2])
            for key in features:
                np.testing.assert_array_equal(features[key], reference[0][key], err_msg=f"{name} {key}")
            account = scored.info["accounting"][name]
            self.assertEqual(account["kinds"]["dropped {n} history row(s) that repeat a row scored or an earlier "
                                              "history row (counted once)"], repeated, name)
            self.assertEqual(account["read"], len(rows))
        for given, what in (([later], "the rows scored"), ([self.path, "./" + os.path.relpath(self.path)],
                                                           "an earlier log")):
            with self.assertRaisesRegex(ZooError, f"given as an earlier log for histories and as {what} .*; each row "
                                                  "may count once: leave it out of history_from$"):
                self.prepare(None, later, preprocessing=fitted, history_from=given)
        unlabelled = os.path.join(self.folder, "unlabelled.csv")
        columns = header.strip().split(",")
        with open(unlabelled, "w") as f:
            f.write(",".join(c for c in columns if c != "clicked") + "\n")
            for line in earlier_lines:
                values = next(csv.reader([line]))
                f.write(",".join(f'"{v}"' for c, v in zip(columns, values) if c != "clicked") + "\n")
        with self.assertRaisesRegex(ZooError, "unlabelled.csv: an earlier log for histories needs the label column "
                                              "'clicked' \\(the preset's histories carry each earlier row's label\\)$"):
            self.prepare(None, later, preprocessing=fitted, history_from=[unlabelled])

    def test_shards_parquet_and_json_lines_give_the_same_data(self):
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        reference = self.prepare()
        shards = os.path.join(self.folder, "shards")
        os.makedirs(shards)
        with open(self.path) as f:
            header, *lines = f.read().splitlines(keepends=True)
        for k in range(4):
            with open(os.path.join(shards, f"part-{k}.csv"), "w") as f:
                f.write(header + "".join(lines[k * 60:(k + 1) * 60]))
        table = pcsv.read_csv(self.path)  # typed columns: clicked int64, ts timestamp, price double with nulls
        parquet = os.path.join(self.folder, "log.parquet")
        pq.write_table(table, parquet)
        jsonl = os.path.join(self.folder, "log.jsonl")
        with open(jsonl, "w") as f:
            for row in self.rows:
                f.write(json.dumps(dict(row, clicked=int(row["clicked"]),
                                        price=float(row["price"]) if row["price"] else None)) + "\n")
        for path, fmt in ((shards, "csv"), (parquet, "parquet"), (jsonl, "jsonl")):
            spec = impression_spec(sequence_length=4)
            spec["source"] = {"format": fmt} if fmt != "csv" else spec["source"]
            other = self.prepare(spec, path)
            self.assertEqual(other.rows, reference.rows, fmt)
            self.assertEqual(other.preprocessing()["fitted"], reference.preprocessing()["fitted"], fmt)
            for split in reference.rows:
                a, a_labels, _ = everything(reference, split)
                b, b_labels, _ = everything(other, split)
                np.testing.assert_array_equal(a_labels, b_labels)
                for key in a:
                    np.testing.assert_array_equal(a[key], b[key], err_msg=f"{fmt} {split} {key}")

    def test_a_fitted_contract_scores_new_rows_with_unknown_values_counted(self):
        fitted = self.prepare().preprocessing()
        later = write_impression_log(os.path.join(self.folder, "later.csv"), rows=60, users=12, items=30, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=25)
        processed = self.prepare(None, later, preprocessing=fitted)
        self.assertEqual(list(processed.rows), ["all"])
        self.assertEqual(processed.rows["all"], 60)
        features, labels, lines = everything(processed, "all")
        new = {i for i, r in enumerate(read_log(later)) if r["item_id"].startswith("new-")}
        oov = processed.schema.feature("cand_item_id").vocabulary_size - 1
        np.testing.assert_array_equal(features["cand_item_id"][:, 0] == oov, np.isin(lines - 2, list(new)))
        self.assertEqual(processed.info["unknown_ids"]["item_id"]["rows"], len(new))
        self.assertTrue(processed.info["labeled"])
        self.assertEqual(processed.schema, self.prepare().schema)

    def test_bad_input_is_one_line_naming_file_line_and_column(self):
        def fails(spec, text, pattern):
            path = os.path.join(self.folder, "bad.csv")
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaisesRegex(ZooError, pattern) as raised:
                self.prepare(spec, path)
            self.assertEqual(len(str(raised.exception).splitlines()), 1)

        header = "clicked,ts,item_id,title,user_id,price,category,device,tags\n"
        good = '0,2024-03-01T08:00:00Z,a,"t, 1",u1,1.5,c,ios,sale|new\n'
        fails(None, header + good + '2,2024-03-01T09:00:00Z,a,t,u1,1,c,ios,\n',
              r"bad\.csv, line 3: column 'clicked' should be 0 or 1, found '2'")
        fails(None, header + good + "1,yesterday,a,t,u1,1,c,ios,\n",
              r"bad\.csv, line 3: column 'ts' should be an ISO 8601 time .*'yesterday'")
        fails(None, header + good + "1,3000-01-01T09:00:00Z,a,t,u1,1,c,ios,\n",
              r"bad\.csv, line 3: column 'ts' should be an ISO 8601 time from 1970 to 2262, found '3000-01-01T09:00:00Z'")
        fails(None, header + good + "1,2024-03-01T09:00:00Z,a,t,u1,cheap,c,ios,\n",
              r"bad\.csv, line 3: column 'price' should be a number, found 'cheap'")
        fails(None, header.replace(",device", "") + good.replace(",ios", ""),
              r"bad\.csv: column 'device' named in the spec is absent \(columns: clicked, ts,")
        spec = impression_spec()
        spec["colums"] = spec.pop("columns")
        with self.assertRaisesRegex(ZooError, r"^spec unknown key 'colums' \(did you mean 'columns'\?\)$"):
            self.prepare(spec)

    def test_a_label_rule_that_leaves_one_class_in_training_is_refused_in_either_build(self):
        """'Yes' where the log writes yes: every training row negative. It trained on all negatives and wrote a
        preset; now the in-memory and the streaming build both refuse it, naming the values the log holds."""
        from zoo.datasets import spec_engine

        yes_no = os.path.join(self.folder, "yes_no.csv")
        with open(yes_no, "w", newline="") as f:
            writer = csv.DictWriter(f, list(self.rows[0]))
            writer.writeheader()
            writer.writerows(dict(row, clicked="yes" if row["clicked"] == "1" else "no") for row in self.rows)
        clicks = sum(row["clicked"] == "1" for row in self.rows)
        for rule, one in (({"op": "in", "value": ["Yes"]}, "no positive"), ({"op": "!=", "value": "maybe"},
                                                                             "no negative")):
            spec = dict(impression_spec(sequence_length=4, statistics=False), label=dict(rule, column="clicked"))
            for stream in (False, True):
                with self.assertRaisesRegex(ZooError, f"^label clicked {rule['op']} .* leaves {one} among the \\d+ "
                                                      f"training rows, so there is nothing to learn \\(values of "
                                                      f"clicked at the start of .*yes_no.csv: 'no' {240 - clicks}, "
                                                      f"'yes' {clicks}\\): check"):
                    spec_engine.build(spec, [yes_no], self.get_temp_dir(), verbose=False,
                                      stream=stream)
        with self.assertRaisesRegex(ZooError, "^spec 'label': 'user_id' is also the user column; the label is"):
            self.prepare(dict(impression_spec(), label={"column": "user_id", "op": ">=", "value": "u943"}))

    def test_dropped_times_and_empty_labels_are_counted(self):
        path = os.path.join(self.folder, "gaps.csv")
        with open(path, "w") as f:
            f.write("clicked,ts,item_id,title,user_id,price,category,device,tags\n")
            for k in range(20):
                ts = "never" if k in (3, 7) else f"2024-03-01T08:{k:02d}:00Z"
                label = "" if k == 5 else str(k % 2)
                f.write(f"{label},{ts},i{k % 4},t,u{k % 3},{'' if k == 9 else 2},c,web,eco\n")
        spec = impression_spec()
        spec["time"]["on_error"] = "drop"
        processed = self.prepare(spec, path)
        account = processed.info["accounting"]["gaps.csv"]
        self.assertEqual((account["read"], account["dropped"], account["repaired"]), (20, 3, 1))
        self.assertEqual(account["kept"], 16)
        self.assertEqual(sum(processed.rows.values()), 17)
        self.assertIn("dropped 2 row(s) with an unreadable 'ts'", processed.info["repairs"])

    def test_numbers_past_the_contracts_bound_are_clipped_and_counted(self):
        """A numeric beyond +-1e9 once transformed (neither log1p'd nor standardised here) is clipped to it and
        counted (the raw signature does the same), never stored past what Schema.validate accepts."""
        path = os.path.join(self.folder, "huge.csv")
        with open(path, "w") as f:
            f.write("clicked,ts,item_id,title,user_id,price,category,device,tags\n")
            for k in range(20):
                price = {4: "1e12", 6: "-1e300"}.get(k, "2")
                f.write(f"{k % 2},2024-03-01T08:{k:02d}:00Z,i{k % 4},t,u{k % 3},{price},c,web,\n")
        spec = impression_spec()
        spec["columns"]["price"] = {"role": "num", "type": "numeric", "log1p": False, "scale": "none"}
        processed = self.prepare(spec, path)
        account = processed.info["accounting"]["huge.csv"]
        self.assertEqual((account["read"], account["repaired"]), (20, 2))
        self.assertIn("clipped 2 'price' value(s) to +-1e+09", processed.info["repairs"])
        prices = np.concatenate([processed.column(split, "num_price") for split in processed.rows])
        self.assertEqual((prices.max(), prices.min()), (np.float32(1e9), np.float32(-1e9)))

    def test_a_list_column_history_keeps_the_newest_l_and_counts_the_cut(self):
        path = os.path.join(self.folder, "ads.csv")
        with open(path, "w") as f:
            f.write("clk,ad,seq,ts\n1,a,x^y^z^a^b,1700000000\n0,b,,1700000100\n1,c,b^a,1700000200\n0,a,z,1700000300\n")
        spec = {"label": {"column": "clk"}, "time": {"column": "ts"},
                "columns": {"ad": {"role": "cand", "feature": "item_id"},
                            "seq": {"role": "hist", "separator": "^", "feature": "item_id"}},
                "history": {"from": "columns"}, "sequence_length": 3,
                "split": {"by": "order", "fractions": [0.5, 0.25, 0.25]}}
        processed = self.prepare(spec, path)
        features, _, _ = everything(processed, "train")
        tokens = processed.preprocessing()["fitted"]["ad"]["tokens"]  # shared with the list: train ads only
        self.assertEqual(sorted(tokens), ["a", "b"])
        ids = {t: i + 1 for i, t in enumerate(tokens)}
        oov = len(tokens) + 1
        np.testing.assert_array_equal(features["hist_item_id"],
                                      [[oov, ids["a"], ids["b"]], [0, 0, 0]])  # z, a, b: newest 3, z unknown
        self.assertIn("kept the newest 3 of 1 'seq' list(s) longer than 3", processed.info["repairs"])
        self.assertFalse(processed.schema.time)

    def test_splits_by_date_random_user_and_rule_labels(self):
        spec = impression_spec(split={"by": "date", "validation": "2024-03-08", "test": "2024-03-10"})
        processed = self.prepare(spec)
        times = np.array([seconds(r["ts"]) for r in self.rows])
        boundary = seconds("2024-03-08T00:00:00Z")
        self.assertEqual(processed.rows["train"], int((times < boundary).sum()))
        spec = impression_spec(split={"by": "user", "fractions": [0.5, 0.25, 0.25]})
        spec["label"] = {"column": "price", "op": ">=", "value": 20}
        spec["columns"]["price"]["allow_label_column"] = True  # a rule label on a feature's column, deliberately
        processed = self.prepare(spec)
        features, labels, lines = everything(processed, "train")
        prices = [self.rows[i]["price"] for i in lines - 2]
        np.testing.assert_array_equal(labels, [float(p != "" and float(p) >= 20) for p in prices])
        users = np.array([r["user_id"] for r in self.rows])
        for user in set(users):
            mine = np.flatnonzero((users == user) & np.array([r["price"] != "" for r in self.rows]))  # labelled
            self.assertEqual(int(np.isin(lines - 2, mine).sum()), int(np.floor(mine.size * 0.5)))
        spec = impression_spec(split={"by": "random", "fractions": [0.5, 0.5, 0.0], "seed": 3})
        processed = self.prepare(spec)
        self.assertEqual(processed.rows["test"], 0)
        self.assertAlmostEqual(processed.rows["train"] / 240, 0.5, delta=0.1)

    def test_a_feature_that_reveals_the_label_is_refused_unless_known_before_label(self):
        """A hand-written spec's feature that is present on clicked rows only (hashed, too), a yes/no copy of the
        label or a number that ranks it alone: every fit (in memory; streaming) refuses it in one line naming
        the column and the evidence on the first rows, before reading the whole files; "known_before_label":
        true lets it through. The keys are not judged (an item may decide its clicks), the same values in
        another column are."""
        from zoo.datasets import spec_engine

        path = os.path.join(self.folder, "leaky.csv")
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, list(self.rows[0]) + ["clicked_at", "echo", "stars"])
            writer.writeheader()
            for k, row in enumerate(self.rows):
                click = row["clicked"] == "1"
                writer.writerow(dict(row, clicked_at=row["ts"] if click else "", echo="yes" if click else "no",
                                     stars=4 + k % 2 if click else 1 + k % 3))
        clicks = sum(row["clicked"] == "1" for row in self.rows)
        cases = {"clicked_at": ({"role": "ctx", "hash_buckets": 1000},
                                rf"present only on positive rows \({clicks} of {clicks} positives, 0 of {240 - clicks} "
                                r"negatives\)"),
                 "echo": ({"role": "ctx"}, r"agreeing with the label on 100\.0% of the sampled rows \(per class, "
                                           r"averaged\) read as 0/1"),
                 "stars": ({"role": "num", "type": "numeric"}, r"ranking the sampled labels at AUC 1\.000 by itself")}
        for name, (options, evidence) in cases.items():
            spec = impression_spec(sequence_length=4, statistics=False)  # (statistics: in memory only)
            spec["columns"][name] = dict(options)
            for stream in (False, True):
                with self.subTest(column=name, stream=stream), self.assertRaisesRegex(
                        ZooError, rf"^column '{name}' reveals the label: {evidence}, on the first 240 rows of "
                                  r".*leaky\.csv; a feature must be known before the label: remove it from 'columns', "
                                  r"or mark it \"known_before_label\": true if it is$"):
                    spec_engine.build(spec, [path], self.get_temp_dir(), verbose=False, stream=stream)
            spec["columns"][name]["known_before_label"] = True
            processed = self.prepare(spec, path)
            self.assertIn(f"{options['role']}_{name}", processed.schema.keys())
        decided = os.path.join(self.folder, "decided.csv")  # the item decides the click
        with open(decided, "w", newline="") as f:
            writer = csv.DictWriter(f, ["clicked", "ts", "user_id", "item_id", "device", "item_copy"])
            writer.writeheader()
            for k, row in enumerate(self.rows):
                item = f"i{k % 6}"
                writer.writerow({"clicked": int(k % 6 < 3), "ts": row["ts"], "user_id": row["user_id"],
                                 "item_id": item, "device": row["device"], "item_copy": item})
        spec = {"label": {"column": "clicked"}, "time": {"column": "ts", "format": "iso8601"}, "user": "user_id",
                "item": "item_id", "columns": {"user_id": {"role": "user"}, "item_id": {"role": "cand"},
                                               "device": {"role": "ctx"}},
                "history": {"from": "log", "fields": ["item_id"]}, "sequence_length": 4}
        self.assertEqual(sum(self.prepare(spec, decided).rows.values()), 240)
        spec["columns"]["item_copy"] = {"role": "ctx"}
        with self.assertRaisesRegex(ZooError, r"^column 'item_copy' reveals the label: ranking the sampled labels at "
                                              r"AUC 1\.000 by itself"):
            self.prepare(spec, decided)


@unittest.skipUnless(USER_BEHAVIOR.exists(), "shared Taobao UserBehavior sample not available")
class EventLogTest(TestCase):
    """Taobao UserBehavior with a header and reordered columns, as an event log with sampled negatives."""

    def test_events_become_positives_with_sampled_negatives(self):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "behaviours.csv")
        raw = []
        with open(USER_BEHAVIOR) as source:
            for line in source.readlines()[:3000]:
                raw.append(line.strip().split(","))
        with open(path, "w") as f:
            f.write("ts,behavior_type,item_id,user_id,category_id\n")
            for user, item, category, behaviour, ts in raw:
                f.write(f"{ts},{behaviour},{item},{user},{category}\n")
        spec = {
            "label": {"events": True, "negatives": 1, "seed": 0},
            "time": {"column": "ts", "format": "unix_s", "utc_offset_hours": 8, "derive": ["hour"]},
            "user": "user_id", "item": "item_id",
            "columns": {"user_id": {"role": "user"}, "item_id": {"role": "cand"},
                        "category_id": {"role": "cand", "feature": "category"},
                        "behavior_type": {"role": "hist", "feature": "behavior"}},
            "history": {"from": "log", "fields": ["item_id", "category", "behavior"], "min_length": 1},
            "sequence_length": 20, "split": {"by": "time", "fractions": [0.8, 0.1, 0.1]},
        }
        processed = prepare(spec, path, cache_dir=os.path.join(folder, "cache"), verbose=False)
        state = processed.preprocessing()
        items = len(state["fitted"]["item_id"]["tokens"])
        self.assertAlmostEqual(processed.info["sample_rate"], 1 / (items - 1))
        users = np.array([r[0] for r in raw])
        times = np.array([int(r[4]) for r in raw])
        first = sum(1 for i in range(len(raw)) if not np.any((users == users[i]) & (times < times[i])))
        self.assertEqual(sum(processed.rows.values()), 2 * (len(raw) - first))
        self.assertIn(f"made no sample for {first} row(s)", processed.info["repairs"])
        features, labels, _ = everything(processed, "train")
        np.testing.assert_array_equal(labels, np.tile([1.0, 0.0], labels.size // 2))
        positive, negative = features["cand_item_id"][0::2, 0], features["cand_item_id"][1::2, 0]
        self.assertTrue(np.all(positive != negative) and np.all((negative >= 1) & (negative <= items)))
        np.testing.assert_array_equal(features["hist_item_id"][0::2], features["hist_item_id"][1::2])
        valid = features["hist_item_id"] > 0
        self.assertTrue(np.all(features["hist_time"][valid] < np.broadcast_to(features["cand_time"], valid.shape)[valid]))
        self.assertTrue(np.all(valid.sum(1) >= 1))
        hours = ((features["cand_time"][:, 0] + 8 * 3600) // 3600) % 24 + 1
        np.testing.assert_array_equal(features["ctx_hour"], hours)
        self.assertEqual(processed.schema.feature("hist_behavior").vocabulary_size, 6)  # pv fav cart buy + pad, OOV
        # and a model trains on it
        import zoo

        model = zoo.get("din", schema=processed.schema, attention_units=(4,), mlp_units=(8,))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        batch = {k: v[:64] for k, v in features.items()}
        loss = model.train_on_batch(batch, labels[:64, None])
        self.assertTrue(np.isfinite(float(np.asarray(loss).reshape(-1)[0])))
        self.assertEqual(read_preprocessing(state)["spec"]["label"]["negatives"], 1)


if __name__ == "__main__":
    unittest.main()
