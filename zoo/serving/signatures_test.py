"""Every id signature enforces its declared shapes or handles any size, never truncates or pads
silently (issue #26), called from a TensorFlow-only process two ways: the loaded signature, as a Python
client calls it, and Session::Run on the SavedModel's graph, as TF Serving runs a request (past the
server's own check of the keys); the status message of the latter is what a TF Serving client reads.

    1. LightSUAN's serving_default scores any M candidates (ceil(M / m2) passes), as score_all does.
    2. score_all (and serving_default) with M = 0 return pctr [B, 0].
    3. A history of another length than L is refused with one line naming the key (din; ReST's encode
       and decode, whose memory has L slots too).
    4. Wrong rank, mismatched batch sizes or candidate counts are refused with one line naming the key;
       a missing or extra key never reaches the graph: the Python client's TypeError names it first.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.serving.export_test import tensorflow_only

CLIENT = r'''
import json
import sys

sys.modules["keras"] = None  # the export must need neither
sys.modules["zoo"] = None

import numpy as np
import tensorflow as tf

export_dir, cases_path = sys.argv[1:]
cases = np.load(cases_path)
requests = {}
for name in cases.files:  # "<case>/<signature>/<key>"
    case, signature, key = name.split("/")
    requests.setdefault(case, (signature, {}))[1][key] = cases[name]


def outcome(call):
    try:
        return {"outputs": {k: np.asarray(v).tolist() for k, v in call().items()}}
    except (TypeError, tf.errors.OpError) as error:
        return {"error": type(error).__name__, "message": getattr(error, "message", str(error))}


report = {}
loaded = tf.saved_model.load(export_dir)
for case, (signature, inputs) in requests.items():
    function = loaded.signatures[signature]
    specs = function.structured_input_signature[1]
    tensors = {k: tf.constant(v, dtype=specs[k].dtype if k in specs else None) for k, v in inputs.items()}
    report[case] = {"python": outcome(lambda: function(**tensors))}

with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
    for case, (signature, inputs) in requests.items():
        definition = meta.signature_def[signature]
        if set(inputs) != set(definition.inputs):
            continue  # TF Serving refuses a missing or extra key itself, before the graph
        feeds = {graph.get_tensor_by_name(definition.inputs[k].name)._as_tf_output():
                 np.asarray(v, tf.as_dtype(definition.inputs[k].dtype).as_numpy_dtype) for k, v in inputs.items()}
        names = sorted(definition.outputs)
        fetches = [graph.get_tensor_by_name(definition.outputs[k].name)._as_tf_output() for k in names]
        # Session::Run as the server calls it (tf.Session.run would compare the shapes in Python first).
        run = lambda: dict(zip(names, session._call_tf_sessionrun(None, feeds, fetches, [], None)))  # noqa: E731
        report[case]["server"] = outcome(run)
print(json.dumps(report))
'''


def call_export(export_dir, cases):
    """Runs CLIENT on `export_dir` with `cases` ({case: (signature, request)}) in a fresh interpreter that
    can import TensorFlow only; returns {case: {"python": outcome, "server": outcome}}."""
    scratch = Path(export_dir).parent
    arrays = {f"{case}/{signature}/{key}": value for case, (signature, request) in cases.items()
              for key, value in request.items()}
    np.savez(scratch / "cases.npz", **arrays)
    (scratch / "client.py").write_text(CLIENT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    result = subprocess.run([sys.executable, str(scratch / "client.py"), str(export_dir), str(scratch / "cases.npz")],
                            capture_output=True, text=True, env=env, cwd="/")
    if result.returncode:
        raise AssertionError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def with_candidates(simulator, features, m, seed=7):
    """`features` with M = m candidates per row (cand_* [B, m]), all exposed at the row's cand_time."""
    rows = len(features["cand_time"])
    many, _ = simulator.sample(max(rows * m, 1), seed=seed)
    request = dict(features)
    for key in features:
        if key.startswith("cand_") and key != "cand_time":
            request[key] = many[key][: rows * m].reshape(rows, m)
    request["cand_time"] = np.repeat(features["cand_time"], m, axis=1)
    return request


def with_history_length(features, length):
    """`features` with every hist_* cut to the newest `length` entries or left-padded to `length`."""
    request = dict(features)
    for key, value in features.items():
        if key.startswith("hist_"):
            width = value.shape[1]
            cut = value[:, max(width - length, 0):]
            request[key] = np.pad(cut, [(0, 0), (length - cut.shape[1], 0)])
    return request


class ExportCase(TestCase):
    """Exports one model (setUpClass), calls it with `cases()` once, keeps the report in `cls.report`."""

    @classmethod
    def export(cls, name, signature="serving_default", **config):
        import keras

        keras.utils.set_random_seed(1234)
        cls.scratch = tempfile.mkdtemp(prefix="zoo-test-")
        cls.addClassCleanup(shutil.rmtree, cls.scratch, True)
        cls.simulator = small_simulator()
        cls.model = zoo.get(name, schema=cls.simulator.schema, **dict(SMALL[name], **config))
        cls.features, _ = cls.simulator.sample(3, seed=4)
        path = Path(cls.scratch) / name / "1"
        zoo.export(cls.model, path, signature=signature)
        return path

    def assert_refused(self, case, line):
        """Both clients got InvalidArgumentError whose line is "assertion failed: [<line>]": the server's
        status message is that line and TF's node line; the Python text holds it among TF's 6 lines."""
        expected = f"assertion failed: [{line}]"
        python, server = self.report[case]["python"], self.report[case]["server"]
        self.assertEqual(python.get("error"), "InvalidArgumentError", (case, python))
        self.assertIn(expected, python["message"].splitlines(), case)
        self.assertLessEqual(len(python["message"].splitlines()), 6, case)
        self.assertEqual(server.get("error"), "InvalidArgumentError", (case, server))
        self.assertEqual(server["message"].splitlines()[0], expected, case)
        self.assertEqual(len(server["message"].splitlines()), 2, case)

    def assert_served(self, case, expected, atol=1e-5):
        """Both clients got the `expected` outputs (each key's values and shape) and nothing repaired."""
        for route in ("python", "server"):
            outputs = self.report[case][route].get("outputs")
            self.assertIsNotNone(outputs, (case, route, self.report[case][route]))
            for key, value in expected.items():
                got = np.asarray(outputs[key], "float32")
                self.assertEqual(got.shape, np.shape(value), (case, route, key))
                self.assertAllClose(got, value, atol=atol, msg=f"{case} {route} {key}")
            self.assertEqual(outputs["repaired_ids"], [0] * len(outputs["repaired_ids"]), (case, route))


@tensorflow_only
class ParallelCandidatesShapesTest(ExportCase):
    M = (4, 3, 9, 300)  # one pass of m2 = 4; fewer; three passes, the last with 3 placeholders; 75 passes

    @classmethod
    def setUpClass(cls):
        from unittest import mock

        from zoo.budget import BUDGET

        with mock.patch.dict(BUDGET, request_scores=900):  # 3 rows x 300 candidates: the budget itself
            path = cls.export("lightsuan", "parallel_candidates", parallel_candidates=4, sample_rate=0.25)
        cases = {"over_budget": ("score_all", with_candidates(cls.simulator, cls.features, 301))}
        for signature in ("serving_default", "score_all"):
            for m in cls.M + (0,):
                cases[f"{signature}_m{m}"] = (signature, with_candidates(cls.simulator, cls.features, m))
        request = with_candidates(cls.simulator, cls.features, 4)
        cases["cand_mismatch"] = ("score_all", dict(request, cand_category=request["cand_category"][:, :3]))
        cases["batch_mismatch"] = ("serving_default", dict(request, num_price=request["num_price"][:2]))
        cls.report = call_export(path, cases)

    def outputs(self, m):
        request = with_candidates(self.simulator, self.features, m)
        pctr = self.model.score_candidates(request, use_cache=False)  # m2 = 4 passes without the cache
        return {"pctr": pctr, "rectified_pctr": pctr / (pctr + (1 - pctr) / 0.25)}

    def test_serving_default_scores_any_number_of_candidates(self):  # 1
        for m in self.M:
            with self.subTest(m=m):
                expected = self.outputs(m)
                self.assert_served(f"serving_default_m{m}", expected)
                self.assert_served(f"score_all_m{m}", expected)

    def test_no_candidates_give_b_by_0(self):  # 2
        for signature in ("score_all", "serving_default"):
            with self.subTest(signature=signature):
                empty = np.zeros((3, 0), "float32")
                self.assert_served(f"{signature}_m0", {"pctr": empty, "rectified_pctr": empty})

    def test_scores_past_the_budget_refused_in_one_line(self):
        """B x M past BUDGET["request_scores"] (read when the export traced the graph) is refused before the
        model runs; 3 x 300, the budget itself, was served above."""
        self.assert_refused("over_budget", "cand_item_id asks for 903 scores (rows x candidates), past the budget of "
                                           "900 per request (request_scores in zoo/budget.py): send fewer "
                                           "rows or candidates per request")

    def test_mismatched_candidates_and_batch_refused_in_one_line(self):  # 4
        self.assert_refused("cand_mismatch", "cand_category has shape [3, 3] but cand_item_id has [3, 4]: "
                                             "the cand_* inputs share M")
        self.assert_refused("batch_mismatch",
                            "num_price has 2 rows but hist_item_id has 3: every input needs the same B")


class PlainShapesTest(ExportCase):
    """din's serving_default, exported under every backend (the JAX and torch ones through the
    TensorFlow subprocess), so the check is proven to survive that hop."""

    @classmethod
    def setUpClass(cls):
        from unittest import mock

        from zoo.budget import BUDGET

        length = small_simulator().schema.sequence_length
        with mock.patch.dict(BUDGET, request_values=3 * length):  # 3 rows of history: the budget itself
            path = cls.export("din")
        features = cls.features
        length = cls.simulator.schema.sequence_length
        cls.length = length
        cases = {
            "valid": ("serving_default", features),
            "shorter_history": ("serving_default", with_history_length(features, length - 1)),
            "longer_history": ("serving_default", with_history_length(features, length + 1)),
            "rank": ("serving_default", dict(features, hist_item_id=features["hist_item_id"][:, -1])),
            "batch": ("serving_default", dict(features, user_age=features["user_age"][:2])),
            "candidates": ("serving_default", with_candidates(cls.simulator, features, 2)),
            "missing": ("serving_default", {k: v for k, v in features.items() if k != "ctx_hour"}),
            "extra": ("serving_default", dict(features, hist_foo=features["hist_item_id"])),
            "over_budget": ("serving_default", {k: np.concatenate([v, v[:1]]) for k, v in features.items()}),
        }
        cls.report = call_export(path, cases)

    def test_valid_request_is_served(self):
        self.assert_served("valid", {"pctr": self.model.predict(self.features, verbose=0)})

    def test_history_of_another_length_refused_in_one_line(self):  # 3
        for case, length in (("shorter_history", self.length - 1), ("longer_history", self.length + 1)):
            with self.subTest(length=length):
                self.assert_refused(case, f"hist_item_id has shape [3, {length}] but the signature takes "
                                          f"[B, {self.length}]")

    def test_wrong_rank_batch_and_candidates_refused_in_one_line(self):  # 4
        self.assert_refused("rank", f"hist_item_id has shape [3] but the signature takes [B, {self.length}]")
        self.assert_refused("batch", "user_age has 2 rows but hist_item_id has 3: every input needs the same B")
        self.assert_refused("candidates", "cand_item_id has shape [3, 2] but the signature takes [B, 1]")

    def test_values_past_the_budget_refused_in_one_line(self):
        import keras

        if keras.backend.backend() != "tensorflow":  # the JAX and torch exports are traced in a TensorFlow process,
            self.skipTest("where this test's lowered budget does not reach")  # which keeps the default budget
        self.assert_refused("over_budget", f"hist_item_id holds {4 * self.length} values, past the budget of "
                                           f"{3 * self.length} per input (request_values in zoo/budget.py): "
                                           "send fewer rows per request")

    def test_missing_or_extra_key_named_by_the_caller(self):  # 4: TF's own error, before the graph
        for case, words in (("missing", "missing a required argument: 'ctx_hour'"),
                            ("extra", "got an unexpected keyword argument 'hist_foo'")):
            with self.subTest(case=case):
                python = self.report[case]["python"]
                self.assertEqual(python.get("error"), "TypeError", python)
                self.assertIn(words, python["message"].splitlines()[0])
                self.assertNotIn("server", self.report[case])  # TF Serving's own key check answers first


@tensorflow_only
class EncodeDecodeShapesTest(ExportCase):
    @classmethod
    def setUpClass(cls):
        path = cls.export("rest", "encode_decode")
        features, length = cls.features, cls.simulator.schema.sequence_length
        cls.length = length
        state = cls.model.encode(features)
        history = {k: v for k, v in features.items() if k.startswith("hist_")}
        candidates = {k: v for k, v in with_candidates(cls.simulator, features, 5).items() if not k.startswith("hist_")}
        decode = dict(candidates, memory=state["memory"], memory_valid=state["memory_valid"],
                      hist_time=features["hist_time"])
        cls.decode_request, cls.state = decode, state
        cases = {
            "encode_shorter": ("encode", with_history_length(history, length - 1)),
            "decode": ("decode", decode),
            "decode_memory_longer": ("decode", dict(decode, memory=np.pad(state["memory"], [(0, 0), (1, 0), (0, 0)]))),
            "decode_cand_mismatch": ("decode", dict(decode, cand_time=decode["cand_time"][:, :4])),
        }
        cls.report = call_export(path, cases)

    def test_encode_and_decode_refuse_another_length_in_one_line(self):  # 3
        width = self.model.model_dim
        self.assert_refused("encode_shorter", f"hist_item_id has shape [3, {self.length - 1}] but the signature "
                                              f"takes [B, {self.length}]")
        self.assert_refused("decode_memory_longer", f"memory has shape [3, {self.length + 1}, {width}] but the "
                                                    f"signature takes [B, {self.length}, {width}]")
        self.assert_refused("decode_cand_mismatch", "cand_time has shape [3, 4] but cand_item_id has [3, 5]: "
                                                    "the cand_* inputs share M")
        candidates = {k: v for k, v in self.decode_request.items() if k.startswith(("cand_", "user_", "ctx_", "num_"))}
        self.assert_served("decode", {"pctr": self.model.decode(self.state, candidates)})
