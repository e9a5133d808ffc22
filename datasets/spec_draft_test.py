"""`spec draft` on logs written as teams export them: integer ids, text labels, an event kind, no header, a
column that is the label in another form; each draft builds (zoo.datasets.prepare) with no edit."""

import os

import numpy as np

from tests.testing import TestCase
from zoo.datasets import prepare
from zoo.datasets.spec import DataSpec
from zoo.datasets.spec_draft import draft
from zoo.errors import ZooError

KINDS = ("view", "basket", "order")


def write_log(path, rows=600, header=True, seed=0):
    """user,item,kind,stars,liked,yes,price,ts: integer ids (many distinct), an event kind, 1-5 stars, liked =
    stars >= 4 as 0/1, the same as yes/no, a heavy-tailed price, unix seconds in order."""
    rng = np.random.default_rng(seed)
    lines = ["user,item,kind,stars,liked,answer,price,ts"] if header else []
    for i in range(rows):
        stars = int(rng.integers(1, 6))
        lines.append(f"{int(rng.integers(1, 80))},{int(rng.integers(1000, 1400))},{KINDS[int(rng.integers(0, 3))]},"
                     f"{stars},{int(stars >= 4)},{'yes' if stars >= 4 else 'no'},{rng.pareto(1.5) * 10:.2f},"
                     f"{1_700_000_000 + 60 * i}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


class SpecDraftTest(TestCase):
    def setUp(self):
        super().setUp()
        self.folder = self.get_temp_dir()
        self.log = write_log(os.path.join(self.folder, "log.csv"))

    def built(self, spec):
        return prepare(spec, self.log, cache_dir=os.path.join(self.folder, "cache"), verbose=False)

    def test_integer_keys_are_ids_and_the_label_in_another_form_is_left_out(self):
        spec = draft(self.log, label="stars", time="ts", user="user", item="item", sequence_length=8)
        self.assertEqual(spec["label"], {"column": "stars", "op": ">=", "value": 4})
        self.assertEqual(spec["columns"]["user"]["role"], "user")
        self.assertEqual(spec["columns"]["item"], dict(spec["columns"]["item"], role="cand", type="categorical"))
        self.assertEqual(spec["history"]["fields"], ["item"])  # the user's earlier items: an id history
        for leak in ("liked", "answer"):  # stars >= 4 in two other forms
            self.assertNotIn(leak, spec["columns"])
            self.assertIn("left out: it determines the label on the sample", spec["notes"][leak])
        self.assertEqual(spec["columns"]["price"], dict(spec["columns"]["price"], log1p=True, scale="standardize"))
        processed = self.built(spec)
        self.assertGreater(processed.rows["train"], 0)

    def test_a_0_1_label_with_a_stray_value_stays_a_0_1_label(self):
        """One `2` among 0/1 clicks (a double click?) was drafted as `liked >= 2`: one positive in the log."""
        lines = open(self.log).read().splitlines()
        row = lines[100].split(",")
        row[4] = "2"
        lines[100] = ",".join(row)
        with open(self.log, "w") as f:
            f.write("\n".join(lines) + "\n")
        spec = draft(self.log, label="liked", time="ts", user="user", item="item", sequence_length=8)
        self.assertEqual(spec["label"], {"column": "liked", "op": ">=", "value": 1})
        self.assertIn("1 of 600 sampled rows hold another value (2), read as positive", spec["notes"]["liked"])
        processed = self.built(spec)
        labels = np.concatenate([processed.column(split, "labels") for split in processed.rows])
        self.assertEqual(int(labels.sum()), sum(int(line.split(",")[4]) >= 1 for line in lines[1:]))

    def test_a_note_says_when_the_zone_cannot_be_told(self):
        unix = draft(self.log, label="liked", time="ts", user="user", item="item", sequence_length=8)
        self.assertIn("the users' zone cannot be told", unix["notes"]["ts"])
        lines = open(self.log).read().splitlines()
        local = os.path.join(self.folder, "local.csv")
        with open(local, "w") as f:  # the same rows with ISO times without a zone
            f.write(lines[0] + "\n")
            for line in lines[1:]:
                *rest, ts = line.split(",")
                f.write(",".join(rest + [np.datetime64(int(ts), "s").astype(str).replace("T", " ")]) + "\n")
        naive = draft(local, label="liked", time="ts", user="user", item="item", sequence_length=8)
        self.assertEqual(naive["time"]["format"], "iso8601")
        self.assertIn("the zone cannot be told (no Z or +HH:MM): read as UTC", naive["notes"]["ts"])
        from tests.impression_logs import write_impression_log

        zoned = draft(write_impression_log(os.path.join(self.folder, "zoned.csv"), rows=200), label="clicked",
                      time="ts", user="user_id", item="item_id")
        self.assertNotIn("cannot be told", zoned["notes"]["ts"])  # every time ends in Z

    def test_a_compressed_log_is_drafted_and_built(self):
        """A .gz log (a suffix the reader lists) is drafted and built like the plain file (its header had been
        read as plain text: a csv.Error traceback)."""
        import gzip

        packed = os.path.join(self.folder, "log.csv.gz")
        with open(self.log, "rb") as source, open(packed, "wb") as target:
            target.write(gzip.compress(source.read()))
        spec = draft(packed, label="liked", time="ts", user="user", item="item", sequence_length=8)
        self.assertEqual(spec, draft(self.log, label="liked", time="ts", user="user", item="item", sequence_length=8))
        plain = self.built(spec)
        compressed = prepare(spec, packed, cache_dir=os.path.join(self.folder, "cache_gz"), verbose=False)
        self.assertEqual(compressed.rows, plain.rows)

    def test_a_yes_no_label_and_an_event_kind_with_positive_values(self):
        spec = draft(self.log, label="answer", time="ts", user="user", item="item", sequence_length=8)
        self.assertEqual(spec["label"], {"column": "answer", "op": "in", "value": ["yes"]})
        self.assertNotIn("liked", spec["columns"])  # the same label as 0/1
        self.assertNotIn("stars", spec["columns"])  # stars >= 4 ranks it perfectly
        processed = self.built(spec)
        _, labels = processed.take("train", np.arange(processed.rows["train"]))
        self.assertTrue(0 < labels.mean() < 1)

        with self.assertRaisesRegex(ZooError, r"--label kind: its values are text \(.*\): name the positive ones "
                                              r"with --positive V1,V2"):
            draft(self.log, label="kind", time="ts", user="user", item="item")
        spec = draft(self.log, label="kind", time="ts", user="user", item="item", positive=["order", "basket"],
                     sequence_length=8)
        self.assertEqual(spec["label"], {"column": "kind", "op": "in", "value": ["order", "basket"]})
        processed = self.built(spec)
        features, labels = processed.take("train", np.arange(processed.rows["train"]))
        lines = processed.source_lines("train")
        kinds = [row.split(",")[2] for row in open(self.log).read().splitlines()[1:]]
        expected = [float(kinds[line - 2] in ("order", "basket")) for line in lines]
        np.testing.assert_array_equal(labels.reshape(-1), expected)
        # the event kind of each earlier row is a history attribute beside its label (feedback)
        self.assertEqual(spec["columns"]["kind"]["role"], "hist")
        self.assertEqual(spec["history"]["fields"], ["item", "kind"])
        self.assertTrue(spec["history"]["feedback"])
        self.assertEqual(spec["statistics"]["keys"], ["user", "item"])
        kind_ids = processed.preprocessing()["fitted"]["kind"]["tokens"]
        self.assertEqual(sorted(kind_ids), sorted(KINDS))
        self.assertTrue(np.all(np.isin(features["hist_feedback"], [0, 1, 2])))
        with self.assertRaisesRegex(ZooError, "has no value 'purchase'"):
            draft(self.log, label="kind", positive=["purchase"])

    def test_labels_that_cannot_mean_anything_are_refused_naming_the_values(self):
        keys = dict(time="ts", user="user", item="item")
        with self.assertRaisesRegex(ZooError, r"^label kind in \['view', 'basket', 'order'\] is positive \(1\) on "
                                              r"all 600 sampled rows .*\(values of kind: '\w+' \d+, "):
            draft(self.log, label="kind", positive=list(KINDS), **keys)  # every value named
        lines = open(self.log).read().splitlines()
        with open(self.log, "w") as f:  # no one liked anything
            f.write("\n".join([lines[0]] + [",".join(line.split(",")[:4] + ["0"] + line.split(",")[5:])
                                            for line in lines[1:]]) + "\n")
        with self.assertRaisesRegex(ZooError, r"^label liked is negative \(0\) on all 600 sampled rows with a label, so "
                                              r"there is nothing to learn \(values of liked: '0' 600\)"):
            draft(self.log, label="liked", **keys)
        for flag in ("user", "item", "time"):
            with self.assertRaisesRegex(ZooError, f"^--label \\w+ is also --{flag}: the label is what"):
                draft(self.log, **dict(keys, label=keys[flag]))
        with self.assertRaisesRegex(ZooError, "^--positive yes: no label column to apply it to: name it with --label"):
            draft(self.log, positive=["yes"], **keys)
        headless = os.path.join(self.folder, "headless.csv")
        with open(headless, "w") as f:
            f.write("\n".join(lines[1:]) + "\n")
        with self.assertRaisesRegex(ZooError, "^--columns names 'stars' twice: each column needs its own name"):
            draft(headless, columns=["user", "item", "kind", "stars", "stars", "answer", "price", "ts"])

    def test_item_attributes_tags_and_tabular_rows(self):
        rng = np.random.default_rng(1)
        category = rng.integers(100, 400, size=200)  # whole numbers constant per item: a category id
        path = os.path.join(self.folder, "items.csv")
        with open(path, "w") as f:
            f.write("ts,user,item,category,genres,recent_items,clicked\n")
            for i in range(600):
                item = int(rng.integers(0, 200))
                tags = "|".join(sorted({"comedy", "drama", "war", "noir"}.difference([["comedy", "war", "noir", "x"][item % 4]])))
                recent = "^".join(str(int(v)) for v in rng.integers(0, 200, size=3))
                f.write(f"{1_700_000_000 + 60 * i},u{int(rng.integers(0, 40))},i{item},{category[item]},{tags},{recent},"
                        f"{int(rng.random() < 0.3)}\n")
        spec = draft(path, label="clicked", time="ts", user="user", item="item")
        self.assertEqual((spec["columns"]["category"]["type"], spec["columns"]["category"]["role"]), ("categorical", "cand"))
        self.assertIn("constant per item", spec["notes"]["category"])
        self.assertEqual(spec["columns"]["genres"], {"role": "cand", "type": "tags", "separator": "|", "max_tags": 4,
                                                     "min_count": 1, "max_size": None, "hash_buckets": None,
                                                     "feature": "genres", "embedding_dim": 8})  # not a history
        self.assertIn("multi-valued", spec["notes"]["genres"])
        processed = prepare(spec, path, cache_dir=os.path.join(self.folder, "cache"), verbose=False)
        self.assertEqual(processed.schema.feature("cand_genres").tags, 4)
        batch, _ = processed.take("train", np.arange(4))
        lines = open(path).read().splitlines()
        vocabulary = [None] + processed.preprocessing()["fitted"]["genres"]["tokens"]
        for row, line in zip(batch["cand_genres"][:, 0], processed.source_lines("train")[:4]):
            self.assertEqual(sorted(vocabulary[i] for i in row if i), lines[line - 1].split(",")[4].split("|"))
        self.assertEqual(spec["columns"]["recent_items"]["type"], "list")  # its name says a sequence
        tabular = draft(path, label="clicked")  # no item: the row's fields are the candidate's
        self.assertTrue(all(o["role"] == "cand" for o in tabular["columns"].values() if o["role"] not in ("num", "hist")))
        self.assertIn("interaction models", tabular["notes"]["item"])

    def test_a_file_without_a_header_is_detected_and_named_by_columns(self):
        bare = write_log(os.path.join(self.folder, "bare.csv"), header=False)
        with self.assertRaisesRegex(ZooError, r"the first line holds data .* name the columns with --columns a,b,c"):
            draft(bare, label="liked")
        names = ["user", "item", "kind", "stars", "liked", "answer", "price", "ts"]
        spec = draft(bare, label="liked", time="ts", user="user", item="item", columns=names, sequence_length=8)
        self.assertEqual(spec["source"]["header"], False)
        self.assertEqual(spec["source"]["column_names"], names)
        processed = prepare(spec, bare, cache_dir=os.path.join(self.folder, "cache"), verbose=False)
        self.assertEqual(sum(processed.rows.values()), 600)
        with self.assertRaisesRegex(ZooError, "--columns names 2 column"):
            draft(bare, columns=["a", "b"])

    def test_the_labels_own_column_as_a_feature_is_refused_unless_allowed(self):
        spec = draft(self.log, label="stars", time="ts", user="user", item="item", sequence_length=8)
        spec["columns"]["stars"] = {"role": "ctx"}
        with self.assertRaisesRegex(ZooError, r"column 'stars': the label's own column is a feature of its row"):
            DataSpec(spec)
        spec["columns"]["stars"]["allow_label_column"] = True
        self.assertTrue(DataSpec(spec).columns["stars"]["allow_label_column"])

    def test_per_position_columns_become_one_list(self):
        path = os.path.join(self.folder, "positions.csv")
        rng = np.random.default_rng(2)
        rows = []
        with open(path, "w") as f:  # Alimama's DMR form: one header name per position, 0 as padding
            f.write(",".join(["his_cate"] * 5 + ["uid", "cate_id", "target"]) + "\n")
            for i in range(300):
                filled = int(rng.integers(0, 6))
                history = [0] * (5 - filled) + [int(v) for v in rng.integers(1, 40, size=filled)]
                rows.append(history)
                f.write(",".join(str(v) for v in history) + f",{i % 50},{int(rng.integers(1, 40))},{int(rng.random() < 0.4)}\n")
        spec = draft(path, label="target")
        self.assertEqual(spec["columns"]["his_cate"], dict(spec["columns"]["his_cate"], role="hist", type="list",
                                                           positions=5, padding="0"))
        self.assertEqual(spec["history"], {"from": "columns"})
        def built(spec):
            return prepare(spec, path, cache_dir=os.path.join(self.folder, "cache"), verbose=False)

        processed = built(dict(spec, split={"by": "order", "fractions": [0.8, 0.1, 0.1]}))
        tokens = processed.preprocessing()["fitted"]["his_cate"]["tokens"]
        features, _ = processed.take("train", np.arange(processed.rows["train"]))
        for k, line in enumerate(processed.source_lines("train")):
            expected = [tokens.index(str(v)) + 1 for v in rows[line - 2] if v]  # oldest first, padding skipped
            got = features["hist_his_cate"][k]
            self.assertEqual(list(got[len(got) - len(expected):]) if expected else [], expected)
            self.assertTrue(np.all(got[: len(got) - len(expected)] == 0))
        named = dict(spec, columns={k: v for k, v in spec["columns"].items() if k != "his_cate"} | {
            "his_cate": {"role": "hist", "type": "list"}})
        with self.assertRaisesRegex(ZooError, r"column 'his_cate' appears 5 times in the header: a per-position list\? "
                                              r"give it \"type\": \"list\", \"positions\": 5$"):
            built(named)
