import csv
import os
import tempfile
import unittest

import keras
import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase
from zoo.datasets import prepare
from zoo.datasets.pipeline import make_dataset
from zoo.datasets.spec import DataSpec
from zoo.errors import ZooError
from zoo.serving.export_test import serving_check
from zoo.serving.raw import RawPreprocessing
from zoo.serving.request import build_request

tensorflow_only = unittest.skipUnless(keras.backend.backend() == "tensorflow",
                                      "the raw graph is TensorFlow's (export re-runs under TF on other backends)")


@tensorflow_only
class RawSignatureTest(TestCase):
    """A preset trained on a string-keyed CSV, served from its raw signature by a TensorFlow-only process,
    gives the scores of `python -m zoo score` on the same rows (unseen keys, empty histories, histories
    longer than L included)."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="zoo-test-")
        cls.log = write_impression_log(os.path.join(cls.folder, "log.csv"), rows=300)
        cls.later = write_impression_log(os.path.join(cls.folder, "later.csv"), rows=60, users=8, seed=1,
                                         start="2024-03-11T08:00:00Z", days=2, unseen_from=70)
        cls.cache = os.path.join(cls.folder, "cache")
        spec = impression_spec(sequence_length=4)
        spec["columns"] = {"tags": spec["columns"].pop("tags"), **spec["columns"]}  # cand_tags [B, M, S] first
        spec["columns"]["price"]["scale"] = "minmax"
        cls.processed = prepare(spec, cls.log, cache_dir=cls.cache, verbose=False)
        cls.state = cls.processed.preprocessing()

    @classmethod
    def tearDownClass(cls):
        import shutil

        shutil.rmtree(cls.folder, ignore_errors=True)

    def trained_preset(self, name):
        keras.utils.set_random_seed(0)
        train, schema = make_dataset(self.processed, "train", batch_size=64)
        model = zoo.get(name, schema=schema, **SMALL[name])
        model.compile(optimizer="adam", loss="binary_crossentropy")
        model.fit(train, epochs=1, verbose=0)
        preset = os.path.join(self.folder, f"{name}_preset")
        model.save_to_preset(preset, preprocessing=self.state)
        return model, preset

    def keras_scores(self, model, history_from=None):
        """`python -m zoo score`'s scores of later.csv (`--history-from`: `history_from`), by file line."""
        processed = prepare(None, self.later, preprocessing=self.state, cache_dir=self.cache, verbose=False,
                            **({"history_from": history_from} if history_from else {}))
        dataset, _ = make_dataset(processed, "all", batch_size=1024, shuffle=False)
        scores = np.concatenate([np.asarray(model.score(f)).reshape(-1) for f, _ in dataset.as_numpy_iterator()])
        return dict(zip(processed.source_lines("all").tolist(), scores))

    def check(self, name, candidates=(1,)):
        model, preset = self.trained_preset(name)
        path = os.path.join(self.folder, f"{name}_export", "1")
        # din exports the model zoo.load returns (its preprocessor is the contract); the others the folder
        zoo.export(zoo.load(preset) if name == "din" else preset, path, signature="raw")
        body, lines = build_request(self.state, self.later, 60)
        inputs = {k: np.asarray(v, dtype=str) for k, v in body["inputs"].items()}
        histories = np.sum(inputs["history_item_id"] != "", axis=1)
        self.assertTrue((histories == 0).any() and (histories > 4).any())  # empty and longer than L
        self.assertTrue(np.char.startswith(inputs["item_id"][:, 0], "new-").any())  # unseen keys
        scores = self.keras_scores(model)
        expected = np.array([scores[line] for line in lines], np.float32)[:, None]
        cases = {}
        for m in candidates:
            tag = "raw" if m == 1 else f"raw@m{m}"
            for key, value in inputs.items():
                is_cand = value.ndim == 2 and not key.startswith("history_")
                cases[f"{tag}/in/{key}"] = np.repeat(value, m, axis=1) if is_cand else value
            cases[f"{tag}/out/pctr"] = np.repeat(expected, m, axis=1)
        report = serving_check(path, cases)
        self.assertEqual(report["modules"], [])
        for tag, errors in report["signatures"].items():
            for route in ("direct", "predict_request", "rest_json"):
                self.assertLess(errors[route], 1e-5, f"{name} {tag} {route}")
            self.assertIn("unknown_ids", errors["outputs"])
            self.assertIn("history_cut", errors["outputs"])

    def call_raw(self, path, inputs):
        """{"shapes": {output: shape}, "values": {output: list}} or {"error": the refusal's line}, from a
        TensorFlow-only process."""
        return self.call_raw_each(path, [inputs])[0]

    def call_raw_each(self, path, requests):
        """`call_raw`'s answer to each of `requests`, from one TensorFlow-only process (the export loads once)."""
        import json
        import subprocess
        import sys

        files = []
        for k, inputs in enumerate(requests):
            files.append(os.path.join(self.folder, f"raw_inputs_{k}.npz"))
            np.savez(files[-1], **inputs)
        code = f"""
import json, sys
sys.modules["keras"] = None; sys.modules["zoo"] = None
import numpy as np, tensorflow as tf
f = tf.saved_model.load({path!r}).signatures["raw"]
for cases in {files!r}:
    inputs = {{k: tf.constant(v, tf.string) for k, v in np.load(cases).items()}}
    try:
        out = f(**inputs)
        print(json.dumps({{"shapes": {{k: v.shape.as_list() for k, v in out.items()}},
                          "values": {{k: v.numpy().tolist() for k, v in out.items()}}}}))
    except tf.errors.InvalidArgumentError as error:
        print(json.dumps({{"error": [l for l in str(error).splitlines() if "assertion failed" in l][0]}}))
"""
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
        answers = [json.loads(line) for line in done.stdout.strip().splitlines() if line.startswith("{")]
        self.assertEqual(len(answers), len(requests), done.stderr[-2000:])
        return answers

    def test_din(self):
        self.check("din")
        path = os.path.join(self.folder, "din_export", "1")
        # request --history-from: the training log's rows join the histories (not sent), and the raw signature
        # gives score --history-from's scores
        model = zoo.load(os.path.join(self.folder, "din_preset"))
        body, lines = build_request(self.state, self.later, 60, history_from=[self.log])
        alone, alone_lines = build_request(self.state, self.later, 60)
        self.assertEqual(lines, alone_lines)
        longer = np.sum(np.asarray(body["inputs"]["history_item_id"]) != "", axis=1)
        shorter = np.sum(np.asarray(alone["inputs"]["history_item_id"]) != "", axis=1)
        self.assertTrue(np.all(longer >= shorter) and np.any(longer > shorter))
        scores = self.keras_scores(model, history_from=[self.log])
        served = self.call_raw(path, {k: np.asarray(v, dtype=str) for k, v in body["inputs"].items()})["values"]
        np.testing.assert_allclose(np.asarray(served["pctr"])[:, 0], [scores[line] for line in lines], atol=1e-5)
        alone_scores = self.keras_scores(model)
        self.assertGreater(max(abs(scores[line] - alone_scores[line]) for line in lines), 1e-4)  # histories count
        # a request file without the label column (the usual one) and a labelled earlier log: the log's feedback
        # still reaches the histories, the request file's own earlier rows carry none
        import csv

        unlabelled = os.path.join(self.folder, "later_unlabelled.csv")
        with open(self.later) as source, open(unlabelled, "w", newline="") as out:
            rows = list(csv.DictReader(source))
            label = self.state["spec"]["label"]["column"]
            writer = csv.DictWriter(out, [k for k in rows[0] if k != label])
            writer.writeheader()
            writer.writerows({k: v for k, v in row.items() if k != label} for row in rows)
        bare, _ = build_request(self.state, unlabelled, 60, history_from=[self.log])
        from zoo.datasets.spec import feature_name

        feedback = f"history_{feature_name(label)}"
        np.testing.assert_array_equal(bare["inputs"]["history_item_id"], body["inputs"]["history_item_id"])
        given, full = np.asarray(bare["inputs"][feedback]), np.asarray(body["inputs"][feedback])
        self.assertTrue((given != "").any())
        np.testing.assert_array_equal(given[given != ""], full[given != ""])
        self.assertLess((given != "").sum(), (full != "").sum())
        # as strict as the engine: numbers that are not finite are filled and counted, a request time that is
        # not a time stops the call in one line naming the input
        body, _ = build_request(self.state, self.later, 4)
        inputs = {k: np.asarray(v, dtype=str) for k, v in body["inputs"].items()}
        bad = dict(inputs, price=np.array(["inf", "1e400", "abc", " "]))
        filled = dict(inputs, price=np.array(["", "", "", ""]))
        done, done_filled = (answer["values"] for answer in self.call_raw_each(path, [bad, filled]))
        self.assertEqual(done["repaired"], [1, 1, 1, 0])
        self.assertTrue(np.all(np.isfinite(done["pctr"])))
        np.testing.assert_allclose(done["pctr"], done_filled["pctr"], rtol=1e-6)
        # a number past +-1e9 once transformed is clipped and counted, as the engine does (the graph's own step,
        # on a state whose price is neither log1p'd nor standardised)
        import copy

        import tensorflow as tf

        from zoo.serving.raw import RawPreprocessing

        state = copy.deepcopy(self.state)
        state["fitted"]["price"] = {"kind": "numeric", "log1p": False, "fill": 0.0}
        graph = RawPreprocessing(state, self.processed.schema)
        graph.repaired = []
        values = graph.numeric("price", tf.constant(["1e12", "-1e300", "5", "abc"]))
        np.testing.assert_allclose(values.numpy(), [1e9, -1e9, 5, 0])
        self.assertEqual(tf.add_n(graph.repaired).numpy().tolist(), [1, 1, 0, 1])
        # another rank: one line, though every axis is dynamic (the rank check once folded into a constant)
        ranks = (("ts", inputs["ts"][:, None]), ("item_id", inputs["item_id"][:, 0]),
                 ("history_item_id", inputs["history_item_id"][:, :, None]))
        times = ("", "-5", "1e20", "12345678901234567890", "abc", "2600-01-01T00:00:00Z", "1985-06-01T00:00:00Z",
                 "2024-13-45T00:00:00Z", "2023-02-29T08:00:00Z", "2024-03-11T25:00:00Z")
        answers = self.call_raw_each(path, [dict(inputs, **{key: value}) for key, value in ranks] +
                                     [dict(inputs, ts=np.array([inputs["ts"][0]] * 3 + [time])) for time in times])
        for (key, _), answer in zip(ranks, answers):
            self.assertTrue(answer["error"].startswith(f"assertion failed: [{key} has shape "), answer)
        for time, answer in zip(times, answers[len(ranks):]):
            self.assertEqual(answer["error"], "assertion failed: [the request time ts holds a value that is not an "
                                              "ISO 8601 time from 1990 to 2100]", time)
        # history entries sent without their labels (a client that read its history from rows lacking the
        # label column): one line, where feedback and the user's statistics would read nothing
        body, _ = build_request(self.state, self.later, 4, history_from=[self.log])
        inputs = {k: np.asarray(v, dtype=str) for k, v in body["inputs"].items()}
        self.assertTrue((inputs["history_ts"][0] != "").any())
        unlabelled = dict(inputs, history_clicked=np.full_like(inputs["history_clicked"], ""))
        some = inputs["history_clicked"].copy()
        some[0, :] = ""  # one row's labels unknown: scored, as a log's empty labels are
        refused, scored = self.call_raw_each(path, [unlabelled, dict(inputs, history_clicked=some)])
        self.assertEqual(refused["error"], "assertion failed: [history_clicked is empty on every history entry of the "
                         "request: the history of this preset reads the label of each earlier row (clicked, as the log "
                         "writes it); send it with the rows]")
        self.assertIn("values", scored)

    def test_lightsuan_any_number_of_candidates(self):
        self.check("lightsuan", candidates=(1, 3, 9))
        path = os.path.join(self.folder, "lightsuan_export", "1")
        body, _ = build_request(self.state, self.later, 3)
        inputs = {k: np.asarray(v, dtype=str) for k, v in body["inputs"].items()}
        empty = {k: (v[:, :0] if k in ("item_id", "category", "title", "tags") else v) for k, v in inputs.items()}
        mixed = dict(inputs, category=np.repeat(inputs["category"], 2, axis=1))
        short = dict(inputs, user_id=inputs["user_id"][:2])
        # more scores than the request budget (zoo/budget.py): refused before the model (once ~18 KB a candidate)
        many = {k: (np.repeat(v[:1], 65_537, axis=1) if k in ("item_id", "category", "title", "tags") else v[:1])
                for k, v in inputs.items()}
        empty, mixed, short, many = self.call_raw_each(path, [empty, mixed, short, many])
        self.assertEqual(empty["shapes"]["pctr"], [3, 0])  # no candidate: [B, 0]
        self.assertEqual(mixed["error"],
                         "assertion failed: [category has shape [3, 2] but tags has [3, 1]: the cand inputs share M]")
        self.assertIn("user_id has 2 rows but tags has 3: every input needs the same B", short["error"])
        self.assertEqual(many["error"],
                         "assertion failed: [tags asks for 65537 scores (rows x candidates), past the budget of "
                         "65,536 per request (request_scores in zoo/budget.py): send fewer rows or candidates per "
                         "request]")

    def test_rest(self):
        self.check("rest", candidates=(1, 2))

    def test_unknown_values_and_the_history_cut_are_counted(self):
        import tensorflow as tf

        schema = self.processed.schema
        graph = RawPreprocessing(self.state, schema)
        body, lines = build_request(self.state, self.later, 60)
        with open(self.later, newline="", encoding="utf-8") as f:  # the tags as the file writes them: padded with
            written = {line: row["tags"] for line, row in enumerate(csv.DictReader(f), 2)}  # white space, some
        body["inputs"]["tags"] = [[written[line]] for line in lines]
        self.assertTrue(any("\u00a0" in row[0] for row in body["inputs"]["tags"]))
        features, unknown, cut, repaired = graph({k: tf.constant(np.asarray(v, dtype=str))
                                                  for k, v in body["inputs"].items()})
        # the file's numbers are all readable; a tag list longer than the spec's max_tags of 4 is cut to it
        tags = np.asarray([[len(t.split("|")) if t else 0 for t in row] for row in body["inputs"]["tags"]])
        np.testing.assert_array_equal(repaired.numpy(), (tags > 4).sum(1))
        self.assertGreater(repaired.numpy().sum(), 0)
        processed = prepare(None, self.later, preprocessing=self.state, cache_dir=self.cache, verbose=False)
        engine, _ = processed.take("all", np.arange(60))
        position = {line: i for i, line in enumerate(processed.source_lines("all").tolist())}
        rows = [position[line] for line in lines]
        for key in schema.keys():
            np.testing.assert_allclose(features[key].numpy(), engine[key][rows], rtol=1e-6, err_msg=key)
        made = {"feedback"} | {n for _, _, names in DataSpec(self.state["spec"]).statistics_features() for n in names}
        ids = [f for f in schema.features if f.group != "num" and f.name not in made]  # vocabularies, not buckets
        expected = sum((engine[f.key][rows] == f.vocabulary_size - 1).reshape(60, -1).sum(1) for f in ids)
        np.testing.assert_array_equal(unknown.numpy(), expected)
        self.assertGreater(unknown.numpy().sum(), 0)
        histories = np.sum(np.asarray(body["inputs"]["history_item_id"]) != "", axis=1)
        np.testing.assert_array_equal(cut.numpy(), np.maximum(histories - 4, 0))

    def test_a_preset_without_a_spec_is_refused_in_one_line(self):
        with self.assertRaisesRegex(ZooError, r"^.*no preprocessing\.json; the raw signature serves presets trained "
                                              r"on a data spec$"):
            zoo.export("din", os.path.join(self.folder, "plain", "1"), signature="raw")


if __name__ == "__main__":
    unittest.main()
