"""`spec draft` on logs written as teams export them: integer ids, text labels, an event kind, no header, a
column that is the label in another form; each draft builds (zoo.datasets.prepare) with no edit."""

import json
import os
from unittest import mock

import numpy as np

from tests.testing import TestCase, run_cli
from zoo.datasets import prepare
from zoo.datasets.spec import DataSpec
from zoo.datasets.spec_draft import draft, left_out
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


def write_leaky_log(path, rows=2000, seed=0):
    """user,item,click_ts,ts,dismissed_id,echo,skipped,grade,note,is_test,device,clicked,clicked: a 0/1 click
    (about 20%) under its name twice (a copy), the click's time on clicked rows only, an id unique to each row
    not clicked (on those only), echo = yes/no of the click but 2% flipped, skipped = its opposite as 0/1,
    grade = 5 where clicked and 1 elsewhere but 4% flipped (a flag coded otherwise), a note on the first 3
    clicked rows only (too few to tell), a test flag 0 on every row; returns (path, the clicks)."""
    rng = np.random.default_rng(seed)
    clicks = (rng.random(rows) < 0.2).astype(int)
    lines = ["user,item,click_ts,ts,dismissed_id,echo,skipped,grade,note,is_test,device,clicked,clicked"]
    for i, click in enumerate(clicks):
        ts = 1_700_000_000 + 60 * i
        echo = click if rng.random() > 0.02 else 1 - click
        grade = 5 if (click if rng.random() > 0.04 else 1 - click) else 1
        note = "promo" if click and clicks[:i].sum() < 3 else ""
        lines.append(f"u{int(rng.integers(0, 90))},i{int(rng.integers(0, 300))},{ts + 5 if click else ''},{ts},"
                     f"{'' if click else f'd{i}'},{'yes' if echo else 'no'},{1 - click},{grade},{note},0,"
                     f"{['ios', 'web'][i % 2]},{click},{click}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, clicks


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
        for leak in ("liked", "answer"):  # stars >= 4 in two other forms: 0/1 and yes/no
            self.assertNotIn(leak, spec["columns"])
            self.assertEqual(spec["notes"][leak], "left out: agreeing with the label on 100.0% of the sampled rows (per "
                                                  "class, averaged) read as 0/1, the label in another form; add it back "
                                                  "by hand (with \"known_before_label\": true) only if it is known "
                                                  "before the label")
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

    def test_a_log_without_time_is_split_by_held_out_users_and_says_so(self):
        """No time column: the draft holds whole users out (a random split put a user's rows on both sides),
        notes it, and the build keeps every user in one split; with no user key either, a seeded random split
        that says what it mixes."""
        rng = np.random.default_rng(3)
        path = os.path.join(self.folder, "timeless.csv")
        with open(path, "w") as f:
            f.write("user,item,device,clicked\n")
            for _ in range(900):
                f.write(f"u{int(rng.integers(0, 120))},i{int(rng.integers(0, 60))},{['ios', 'web'][int(rng.integers(0, 2))]},"
                        f"{int(rng.random() < 0.3)}\n")
        spec = draft(path, label="clicked", user="user", item="item")
        self.assertIsNone(spec["time"])
        self.assertEqual(spec["split"], {"by": "held_out_users", "fractions": [0.8, 0.1, 0.1], "seed": 0})
        self.assertTrue(spec["notes"]["split"].startswith("by held-out users 80/10/10 (seeded): no time column"))
        processed = prepare(spec, path, cache_dir=os.path.join(self.folder, "cache"), verbose=False)
        lines = open(path).read().splitlines()
        users = {split: {lines[line - 1].split(",")[0] for line in processed.source_lines(split)}
                 for split in ("train", "validation", "test")}
        self.assertTrue(all(users.values()))
        self.assertFalse(users["train"] & (users["validation"] | users["test"]) or users["validation"] & users["test"])
        self.assertEqual(sum(processed.rows.values()), 900)
        bare = draft(path, label="clicked")
        self.assertEqual(bare["split"]["by"], "random")
        self.assertIn("no time column and no user key", bare["notes"]["split"])

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

    def test_columns_that_reveal_the_label_are_left_out_whatever_their_type_and_printed(self):
        """A click's time (numbers) and an id (text, unique: hashed were it kept) present on one class only,
        the label's name twice in the header (drafted as a two-position history, trained to AUC 1.0), a
        yes/no copy with 2% noise, an opposite 0/1 copy and a 5/1 copy with 4% noise: each left out, noted and printed in a line of its
        own; a note on 3 clicked rows (chance could do that) and a constant flag (it "agrees" with the 80%
        of negatives) stay; the spec builds."""
        log, clicks = write_leaky_log(os.path.join(self.folder, "leaky.csv"))
        spec = draft(log, label="clicked", time="ts", user="user", item="item", sequence_length=8)
        positives, negatives = int(clicks.sum()), int(clicks.size - clicks.sum())
        self.assertEqual(sorted(spec["columns"]), ["device", "is_test", "item", "note", "user"])
        self.assertFalse(any("positions" in options for options in spec["columns"].values()))  # (no label's list)
        tail = ", the label in another form; add it back by hand (with \"known_before_label\": true) only if it is " \
               "known before the label"
        expected = {
            "click_ts": f"present only on positive rows ({positives:,} of {positives:,} positives, 0 of {negatives:,} "
                        "negatives)",
            "dismissed_id": f"present only on negative rows (0 of {positives:,} positives, {negatives:,} of "
                            f"{negatives:,} negatives)",
            "echo": "agreeing with the label on 9",
            "skipped": "agreeing with the opposite of the label on 100.0% of the sampled rows (per class, averaged) "
                       "read as 0/1",
            "grade": "agreeing with the label on 9",
            "clicked.1": "equal to the label column 'clicked'",
        }
        for name, evidence in expected.items():
            self.assertTrue(spec["notes"][name].startswith("left out: " + evidence), spec["notes"][name])
            self.assertTrue(spec["notes"][name].endswith(tail), spec["notes"][name])
        self.assertEqual(left_out(spec), [f"left out {name}: {spec['notes'][name][len('left out: '):]}"
                                          for name in ("click_ts", "dismissed_id", "echo", "skipped", "grade", "clicked.1")])
        self.assertEqual(draft(log, label="clicked", user="user", item="item")["time"]["column"], "ts")  # (complete)
        processed = prepare(spec, log, cache_dir=os.path.join(self.folder, "cache"), verbose=False)
        self.assertEqual(sum(processed.rows.values()), 2000)
        self.assertEqual(sorted({f.name for f in processed.schema.features} - {"time", "feedback"}),
                         ["device", "is_test", "item", "item_positives", "item_rate", "item_seen", "note", "user",
                          "user_positives", "user_rate", "user_seen"])
        out = os.path.join(self.folder, "spec.json")
        status, printed, err = run_cli("spec", "draft", log, "--label", "clicked", "--time", "ts", "--user", "user",
                                       "--item", "item", "--sequence-length", "8", "--out", out)
        self.assertEqual(status, 0, err)
        self.assertEqual(printed.splitlines()[1:], left_out(spec))  # after "wrote ...", a line each
        status, printed, err = run_cli("spec", "draft", log, "--label", "clicked", "--time", "ts", "--user", "user",
                                       "--item", "item", "--sequence-length", "8")
        self.assertEqual((status, json.loads(printed)), (0, spec))  # the spec alone on stdout, the lines on stderr
        self.assertEqual([line for line in err.splitlines() if line.startswith("left out")], left_out(spec))

    def test_a_probability_label_is_refused_asking_for_a_threshold(self):
        """Floats in [0, 1] that are not all 0/1 were drafted as `p >= 0.97` (their largest value), no note: the
        cut is the user's to choose."""
        path = os.path.join(self.folder, "scores.csv")
        rng = np.random.default_rng(3)
        with open(path, "w") as f:
            f.write("user,item,p\n" + "".join(f"u{i % 20},i{i % 50},{rng.uniform(0.03, 0.97):.2f}\n"
                                              for i in range(300)))
        with self.assertRaisesRegex(ZooError, r"^label p holds probabilities \(0\.0\d+ \.\. 0\.9\d+\), not 0/1: choose "
                                              r"the threshold and write it into the spec's label, e\.g\. \{\"column\": "
                                              r"\"p\", \"op\": \">=\", \"value\": 0\.5\}"):
            draft(path, label="p")

    def test_unix_seconds_or_milliseconds_by_magnitude_and_a_time_outside_1990_to_2100_is_refused(self):
        """The draft reads numbers as unix seconds or milliseconds by their magnitude (a time of 1990 .. 2100 in
        that unit); a spec whose format puts the times elsewhere (unix_ms on seconds: January 1970) is refused
        where the engine reads times (zoo.datasets.transforms.times.read), in memory and streaming, naming the column, the
        format, the value and what it reads as; with on_error "drop", no row is left, said why."""
        from zoo.datasets import spec_engine

        lines = open(self.log).read().splitlines()
        for name, scale, expected in (("ms.csv", 1000, "unix_ms"), ("seconds.csv", 1, "unix_s")):
            path = os.path.join(self.folder, name)
            with open(path, "w") as f:
                f.write("\n".join([lines[0]] + [f"{line.rsplit(',', 1)[0]},{int(line.rsplit(',', 1)[1]) * scale}"
                                                for line in lines[1:]]) + "\n")
            self.assertEqual(draft(path, label="liked", time="ts", user="user", item="item")["time"]["format"], expected)
        old = os.path.join(self.folder, "1973.csv")  # 1e8 s: 1973, no log's time
        with open(old, "w") as f:
            f.write("\n".join([lines[0]] + [f"{line.rsplit(',', 1)[0]},{100_000_000 + k}"
                                            for k, line in enumerate(lines[1:])]) + "\n")
        with self.assertRaisesRegex(ZooError, r"^--time ts: its values are not unix seconds or milliseconds of 1990 \.\. "
                                              r"2100, nor ISO 8601 times \('100000000' \.\.\.\)"):
            draft(old, label="liked", time="ts")
        spec = draft(self.log, label="liked", time="ts", user="user", item="item", sequence_length=8)
        spec.pop("statistics")  # (built in memory only)
        spec["time"]["format"] = "unix_ms"
        message = (r"log\.csv, line 2: column 'ts' \(time\.format unix_ms\) holds '1700000000', which reads as "
                   r"1970-01-20 16:13:20 UTC, outside 1990-01-01 \.\. 2100-01-01: check time\.format \(as unix_s it "
                   r"reads 2023-11-14 22:13:20 UTC\) \(or set time\.on_error to 'drop'\)$")
        for stream in (False, True):
            with self.assertRaisesRegex(ZooError, message):
                spec_engine.build(spec, [self.log], self.get_temp_dir(), verbose=False, stream=stream)
        spec["time"].update(format="unix_s")
        with open(old, "w") as f:  # one stray time among good ones: its line named
            f.write("\n".join(lines[:3] + [lines[3].rsplit(",", 1)[0] + ",4102444800"] + lines[4:]) + "\n")
        with self.assertRaisesRegex(ZooError, r"1973\.csv, line 4: column 'ts' \(time\.format unix_s\) holds "
                                              r"'4102444800', which reads as 2100-01-01 00:00:00 UTC, outside"):
            prepare(spec, old, cache_dir=os.path.join(self.folder, "cache"), verbose=False)
        spec["time"].update(format="unix_ms", on_error="drop")
        with self.assertRaisesRegex(ZooError, r"log\.csv: no row is left \(.*dropped 600 row\(s\) whose 'ts' reads "
                                              r"outside 1990-01-01 \.\. 2100-01-01"):
            prepare(spec, self.log, cache_dir=os.path.join(self.folder, "cache"), verbose=False)

    def test_a_file_too_wide_or_with_a_line_too_long_is_refused_before_its_sample_is_read(self):
        """A 9.9 MB CSV of 1,000,000 columns passed 6 GB in 88 s, a single 10 MB line 3 GB in 87 s: the draft
        reads at most MAX_COLUMNS columns and lines of MAX_LINE_BYTES, refused in one line past them; a wide
        file within them samples fewer rows (MAX_SAMPLE_VALUES values), noted."""
        from zoo.datasets import spec_draft

        wide = os.path.join(self.folder, "wide.csv")
        with open(wide, "w") as f:
            f.write(",".join(f"c{k}" for k in range(20_001)) + "\n" + ",".join("1" for _ in range(20_001)) + "\n")
        with self.assertRaisesRegex(ZooError, r"^.*wide\.csv: 20,001 columns, more than the 10,000 spec draft reads "
                                              r"\(spec_draft\.MAX_COLUMNS\)"):
            draft(wide)
        self.assertEqual((spec_draft.MAX_COLUMNS, spec_draft.MAX_LINE_BYTES), (10_000, 2**20))
        long_line = "x" * (2 * 2**20)
        for name, text in (("one_line.csv", long_line), ("long_row.csv", f"a,b\n1,2\n3,{long_line}\n5,6\n"),
                           ("long.jsonl", '{"a": 1}\n{"a": "' + long_line + '"}\n')):
            path = os.path.join(self.folder, name)
            with open(path, "w") as f:
                f.write(text)
            line = 1 if name == "one_line.csv" else 3 if name == "long_row.csv" else 2
            with self.assertRaisesRegex(ZooError, rf"^.*{name}, line {line}: longer than 1,048,576 bytes, the most "
                                                  r"spec draft reads of a line \(spec_draft\.MAX_LINE_BYTES\)"):
                draft(path)
        with mock.patch.object(spec_draft, "MAX_SAMPLE_VALUES", 8 * 150):  # 8 columns: 150 of the 600 rows
            spec = draft(self.log, label="liked", time="ts", user="user", item="item")
        self.assertEqual(spec["notes"]["sample"], "the first 150 rows, not 10,000: 8 columns, and the draft reads at "
                                                  "most 1,200 values (spec_draft.MAX_SAMPLE_VALUES)")
        self.assertIn("of 150 sampled", spec["notes"]["kind"])
        self.assertNotIn("sample", draft(self.log, label="liked", time="ts", user="user", item="item")["notes"])
        fits = os.path.join(self.folder, "fits.csv")  # a line of exactly MAX_LINE_BYTES (and CRLF) is read
        with open(fits, "w", newline="") as f:
            f.write("item,b,clicked\r\n" + "1," + "y" * (2**20 - 4) + ",1\r\n2,z,0\r\n")
        self.assertIn("b", draft(fits, item="item")["columns"])
        with open(fits, "w", newline="") as f:  # one byte more
            f.write("item,b,clicked\r\n" + "1," + "y" * (2**20 - 3) + ",1\r\n2,z,0\r\n")
        with self.assertRaisesRegex(ZooError, r"fits\.csv, line 2: longer than 1,048,576 bytes"):
            draft(fits, item="item")
