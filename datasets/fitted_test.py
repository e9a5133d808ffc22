import json
import os
import unittest

import numpy as np

from tests.testing import SHARED_DATA, TestCase
from zoo.datasets import fitted, load, prepare, read_preprocessing, save_preprocessing
from zoo.errors import ZooError

ML100K = SHARED_DATA / "movielens-100k" / "u.data"
DAY = 1511539200 + 3600  # 2017-11-25 in Beijing time, inside Taobao's date range


def write(folder, name, lines):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return folder


def by_key(processed, split, positives_only=False):
    """{(user id, time): (cand_item_id, hist_item_id row)} of a split's samples (or its positives: Taobao's
    sampled negatives share their positive's user and time)."""
    features, labels = processed.take(split, np.arange(processed.num_rows(split)))
    rows = {}
    for i in np.flatnonzero(labels[:, 0] > 0) if positives_only else range(labels.shape[0]):
        key = (int(features["user_user_id"][i]), int(features["cand_time"][i, 0]))
        rows[key] = (int(features["cand_item_id"][i, 0]), features["hist_item_id"][i].tolist())
    return rows


class MovieLensScoringTest(TestCase):
    # 6 users x 8 ratings of items m1..m8 (each seen 6 times: none falls to the 5-core), times unique per user.
    RATINGS = [
        f"u{u}\tm{(u + k) % 8 + 1}\t{1 + (u + k) % 5}\t{880000000 + 1000 * k + u}" for u in range(6) for k in range(8)
    ]

    def fit(self):
        self.folder = write(self.get_temp_dir(), "u.data", self.RATINGS)
        return prepare("movielens", self.folder, cache_dir=self.get_temp_dir(), sequence_length=4, verbose=False)

    def test_a_presets_preprocessing_is_checked_against_its_metadata(self):
        import zoo
        from tests.model_configs import SMALL
        from tests.testing import small_simulator

        state = self.fit().preprocessing()
        folder = os.path.join(self.get_temp_dir(), "preset")
        model = zoo.get("din", schema=small_simulator().schema, **SMALL["din"])
        zoo.save(model, folder, preprocessing=state)
        with open(os.path.join(folder, "metadata.json")) as f:
            recorded = json.load(f)["preprocessing_sha256"]
        self.assertEqual(len(recorded), 64)
        self.assertEqual(read_preprocessing(folder), state)
        self.assertEqual(zoo.load(folder).count_params(), model.count_params())
        # One id renamed in the vocabulary: the file still parses, but no longer matches its checksum.
        path = os.path.join(folder, "preprocessing.json")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('"m1"', '"m9"', 1))
        self.assertNotEqual(text, open(path).read())
        for read in (lambda: read_preprocessing(folder), lambda: read_preprocessing(path), lambda: zoo.load(folder)):
            with self.assertRaisesRegex(ZooError, r"^\S*preprocessing.json: sha256 does not match \S*metadata.json "
                                                  r"\(edited after saving\)$"):
                read()
        os.remove(path)
        missing = r"preprocessing.json: missing \(\S*metadata.json records a preprocessing\)"
        with self.assertRaisesRegex(ZooError, missing):
            zoo.load(folder)
        # Saving again without a preprocessing removes the file and its checksum.
        zoo.save(model, folder)
        with open(os.path.join(folder, "metadata.json")) as f:
            self.assertNotIn("preprocessing_sha256", json.load(f))
        self.assertEqual(zoo.load(folder).count_params(), model.count_params())

    def test_the_fitted_vocabularies_are_applied_to_new_rows(self):
        fit = self.fit()
        state = fit.preprocessing()
        self.assertEqual((state["dataset"], state["protocol"], state["version"]), ("movielens", "rest", 1))
        self.assertEqual(state["options"], {"sequence_length": 4, "embedding_dim": 32, "core": 5})
        path = save_preprocessing(state, self.get_temp_dir())
        self.assertEqual(os.path.basename(path), "preprocessing.json")
        self.assertEqual(read_preprocessing(path), state)
        tokens = state["fitted"]["item_id"]["tokens"]  # token i has id i + 1
        item_id = {token: i + 1 for i, token in enumerate(tokens)}
        oov = fit.schema.feature("cand_item_id").vocabulary_size - 1

        # Applied to the fitted file itself: every rating is a sample with the fit's ids and histories.
        again = prepare("movielens", self.folder, cache_dir=self.get_temp_dir(), preprocessing=path)
        self.assertEqual(again.rows, {"all": 48})
        self.assertEqual(again.schema, fit.schema)
        fitted_rows = {}
        for split in ("train", "validation", "test"):
            fitted_rows.update(by_key(fit, split))
        self.assertEqual(len(fitted_rows), 48)
        self.assertEqual(by_key(again, "all"), fitted_rows)

        # One user's raw rows: two known items, one item and the user unknown to the fit, one user known.
        known_user = "u2"
        scored = write(self.get_temp_dir(), "u.data", [
            f"{known_user}\tm3\t5\t890000300", f"{known_user}\tm99\t4\t890000100", f"{known_user}\tm5\t2\t890000200",
        ])
        processed = prepare("movielens", scored, cache_dir=self.get_temp_dir(), preprocessing=state)
        self.assertEqual(processed.rows, {"all": 3})  # no 5-core, no split
        self.assertEqual(processed.schema, fit.schema)
        self.assertEqual(processed.info["unknown_ids"], {"item_id": {"rows": 1, "values": 1},
                                                         "user_id": {"rows": 0, "values": 0}})
        self.assertIn("mapped the item_id of 1 row(s) to the OOV id", processed.info["repairs"])
        features, labels = processed.take("all", np.arange(3))
        processed.schema.validate(features, labels)
        self.assertEqual(processed.source_lines("all").tolist(), [2, 3, 1])  # time order
        self.assertEqual(features["cand_item_id"][:, 0].tolist(), [oov, item_id["m5"], item_id["m3"]])
        self.assertEqual(features["hist_item_id"][2].tolist(), [0, 0, oov, item_id["m5"]])
        user_ids = {key[0] for key in fitted_rows}
        self.assertEqual(len(set(features["user_user_id"].tolist()) & user_ids), 1)
        self.assertEqual(labels[:, 0].tolist(), [1.0, 0.0, 1.0])

        # A user the fit never saw, through load(): the default split is "all", the info counts it.
        stranger = write(self.get_temp_dir(), "u.data", ["nobody\tm1\t4\t890000000", "nobody\tm2\t3\t890000001"])
        dataset, schema, info = load("movielens", stranger, cache_dir=self.get_temp_dir(), preprocessing=path,
                                     with_info=True, batch_size=8)
        self.assertEqual(info["unknown_ids"]["user_id"], {"rows": 2, "values": 1})
        self.assertEqual(info["accounting"]["u.data"]["kept"], 2)
        batch, _ = next(iter(dataset))
        user_oov = schema.feature("user_user_id").vocabulary_size - 1
        self.assertEqual(np.asarray(batch["user_user_id"]).tolist(), [user_oov] * 2)

    def test_arguments_that_contradict_the_fit_are_refused(self):
        fit = self.fit()
        state = fit.preprocessing()
        folder = os.path.dirname(save_preprocessing(state, self.get_temp_dir()))
        write(folder, "u.data", self.RATINGS[:3])
        cache = self.get_temp_dir()
        with self.assertRaisesRegex(ZooError, "option sequence_length=8 differs from the fitted preprocessing's 4"):
            prepare("movielens", folder, cache_dir=cache, preprocessing=state, sequence_length=8)
        with self.assertRaisesRegex(ZooError, "every row of the file is a sample of split 'all'.*got split='train'"):
            load("movielens", folder, cache_dir=cache, preprocessing=state, split="train")
        with self.assertRaisesRegex(ZooError, "the preprocessing was fitted on movielens, not taobao"):
            prepare("taobao", folder, cache_dir=cache, preprocessing=state)
        with self.assertRaisesRegex(ZooError, "avazu/deres cannot apply a fitted preprocessing"):
            prepare("avazu", folder, cache_dir=cache, preprocessing=dict(state, dataset="avazu", protocol="deres"))
        write(folder, "train.txt", ["\t".join(["1"] * 40)])
        with self.assertRaisesRegex(ZooError, "^the criteo preprocessing carries no data spec"):
            prepare("criteo", folder, cache_dir=cache, preprocessing=dict(state, dataset="criteo", protocol="deres"))
        with self.assertRaisesRegex(ZooError, "keeps no fitted preprocessing"):
            prepare("movielens", folder, cache_dir=cache, preprocessing=state).preprocessing()
        with self.assertRaisesRegex(ZooError, "keeps no source lines"):
            fit.source_lines("train")

    @unittest.skipUnless(ML100K.exists(), "shared ML-100K not available")
    def test_real_rows_of_one_user(self):
        with open(ML100K) as f:
            lines = [line.rstrip("\n") for line in f][:4000]
        fit = prepare("movielens", write(self.get_temp_dir(), "u.data", lines[:3000]), cache_dir=self.get_temp_dir(),
                      sequence_length=8, verbose=False)
        state = fit.preprocessing()
        user = lines[3000].split("\t")[0]
        rows = [line for line in lines[3000:] if line.split("\t")[0] == user]
        scored = prepare("movielens", write(self.get_temp_dir(), "u.data", rows), cache_dir=self.get_temp_dir(),
                         preprocessing=state)
        known = set(state["fitted"]["item_id"]["tokens"])
        unknown = [line for line in rows if line.split("\t")[1] not in known]
        self.assertEqual(scored.rows, {"all": len(rows)})
        self.assertEqual(scored.schema, fit.schema)
        self.assertEqual(scored.info["unknown_ids"]["item_id"]["rows"], len(unknown))


class TaobaoScoringTest(TestCase):
    # 5 users x 8 behaviours over 8 days (so the fit has train, validation and test days).
    ROWS = [
        f"{u},{(u + k) % 9},c{(u + k) % 3},{('pv', 'fav', 'cart', 'buy')[k % 4]},{DAY + 86400 * k + 60 * u}"
        for u in range(5) for k in range(8)
    ]

    def test_the_fitted_vocabularies_are_applied_to_new_rows(self):
        folder = write(self.get_temp_dir(), "UserBehavior.csv", self.ROWS)
        fit = prepare("taobao", folder, cache_dir=self.get_temp_dir(), sequence_length=4, verbose=False)
        state = fit.preprocessing()
        self.assertEqual(sorted(state["fitted"]), ["category", "item_id", "user_id"])
        self.assertEqual(state["info"]["sample_rate"], fit.info["sample_rate"])
        path = save_preprocessing(state, os.path.join(self.get_temp_dir(), "state.json"))

        again = prepare("taobao", folder, cache_dir=self.get_temp_dir(), preprocessing=path)
        self.assertEqual(again.schema, fit.schema)
        self.assertEqual(again.rows, {"all": 35})  # every behaviour after a user's first, label 1, no negatives
        self.assertEqual(again.info["sample_rate"], fit.info["sample_rate"])
        fitted_rows = {}
        for split in ("train", "validation", "test"):
            fitted_rows.update(by_key(fit, split, positives_only=True))
        self.assertEqual(by_key(again, "all", positives_only=True), fitted_rows)

        # One user's rows on a later day: a known item, an unknown item and category; the first makes no sample.
        later = DAY + 30 * 86400
        items = {token: i + 1 for i, token in enumerate(state["fitted"]["item_id"]["tokens"])}
        scored = write(self.get_temp_dir(), "UserBehavior.csv", [
            f"3,5,c2,pv,{later}", f"3,777,c9,buy,{later + 60}", f"3,4,c1,cart,{later + 120}",
        ])
        processed = prepare("taobao", scored, cache_dir=self.get_temp_dir(), preprocessing=state)
        self.assertEqual(processed.rows, {"all": 2})
        unknown = processed.info["unknown_ids"]
        self.assertEqual((unknown["item_id"], unknown["category"], unknown["user_id"]["rows"]),
                         ({"rows": 1, "values": 1}, {"rows": 1, "values": 1}, 0))
        features, labels = processed.take("all", np.arange(2))
        processed.schema.validate(features, labels)
        oov = processed.schema.feature("cand_item_id").vocabulary_size - 1
        self.assertEqual(features["cand_item_id"][:, 0].tolist(), [oov, items["4"]])
        self.assertEqual(features["hist_item_id"][1].tolist(), [0, 0, items["5"], oov])
        self.assertEqual(processed.source_lines("all").tolist(), [2, 3])
        self.assertEqual(processed.info["accounting"]["UserBehavior.csv"]["kept"], 3)


class StateFileTest(TestCase):
    def state(self):
        vocabulary = fitted.preprocess.Vocabulary.from_tokens(["a", "b"])
        schema = fitted.Schema.from_dict({"features": [{"name": "item_id", "group": "cand", "vocabulary_size": 4}]})
        return fitted.make_state("movielens", "rest", {"core": 5}, schema, {"item_id": vocabulary})

    def test_bad_files_name_what_is_wrong(self):
        folder = self.get_temp_dir()
        path = os.path.join(folder, "preprocessing.json")
        self.assertEqual(save_preprocessing(self.state(), folder), path)
        self.assertEqual(read_preprocessing(folder), self.state())
        for change, message in (
            ({"format": "something"}, "not a zoo.datasets preprocessing"),
            ({"version": 2}, "preprocessing format version 2; this zoo reads 1"),
            ({"fitted": None}, "the preprocessing's 'fitted' and 'options' should be objects"),
        ):
            with open(path, "w") as f:
                json.dump(dict(self.state(), **change), f)
            with self.assertRaisesRegex(ZooError, f"^{path}: {message}"):
                read_preprocessing(path)
        state = self.state()
        del state["schema"]
        with self.assertRaisesRegex(ZooError, "^preprocessing: the preprocessing lacks schema"):
            read_preprocessing(state)
        with open(path, "w") as f:
            f.write("{not json")
        with self.assertRaisesRegex(ZooError, f"^{path}: not a JSON preprocessing file"):
            read_preprocessing(path)
        with self.assertRaisesRegex(ZooError, "no such preprocessing file"):
            read_preprocessing(os.path.join(folder, "missing.json"))
        with self.assertRaisesRegex(ZooError, "missing/state.json: cannot write the preprocessing"):
            save_preprocessing(self.state(), os.path.join(folder, "missing", "state.json"))
        state = self.state()
        state["fitted"]["item_id"]["tokens"].append("c")
        with self.assertRaisesRegex(ZooError, "'item_id' has 5 ids but its schema's cand_item_id has 4"):
            fitted.tables(state, ("item_id",))
        with self.assertRaisesRegex(ZooError, "has no fitted 'user_id'"):
            fitted.tables(self.state(), ("user_id",))


class SpecVocabulariesTest(TestCase):
    """A spec's fitted vocabularies and statistics must make its schema's vocabulary sizes: a state that
    mixes two fits is refused in one line naming the column and the feature."""

    def test_a_state_from_two_fits_is_refused(self):
        from tests.impression_logs import impression_spec, write_impression_log

        log = write_impression_log(os.path.join(self.get_temp_dir(), "log.csv"), rows=200)
        state = prepare(impression_spec(sequence_length=4), log, verbose=False).preprocessing()
        read_preprocessing(state)  # consistent
        vocabulary = next(c for c, t in state["fitted"].items() if isinstance(t, dict) and t.get("kind") == "vocabulary")
        statistic = next(name for name in state["fitted"] if name.startswith("statistics:") and
                         state["fitted"][name].get("edges"))
        cases = [(lambda s: s["fitted"][vocabulary]["tokens"].pop(),
                  rf"^preprocessing: the fitted vocabulary of '{vocabulary}' makes \d+ ids but the schema's \w+ has "
                  r"vocabulary_size [\d,]+: the vocabulary and the schema come from different fits$"),
                 (lambda s: s["fitted"][statistic]["edges"][0].append(1e9),
                  rf"^preprocessing: the fitted statistics '{statistic}' make \d+ bucket ids for \w+ but the schema "
                  r"has vocabulary_size \d+: the statistics and the schema come from different fits$")]
        for change, message in cases:
            broken = json.loads(json.dumps(state))
            change(broken)
            with self.subTest(message=message[:40]), self.assertRaisesRegex(ZooError, message):
                read_preprocessing(broken)
