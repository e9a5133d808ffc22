import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

import keras
import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import ROOT, TestCase, small_simulator
from zoo.errors import ZooError


def saved_model_cli(path):
    """`saved_model_cli show --all` of an export, as text."""
    cli = Path(sys.executable).with_name("saved_model_cli")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [str(cli), "show", "--dir", str(path), "--all"]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout


# Out-of-range ids (as a function of the vocabulary size) and bad numerics a guarded signature repairs.
BAD_IDS = (lambda v: v, lambda v: -1, lambda v: -2, lambda v: v + 7, lambda v: 2**31 - 1, lambda v: -(2**31))
BAD_NUMERICS = ((np.nan, 0.0), (np.inf, 0.0), (-5e12, -1e9), (-np.inf, 0.0), (1e9, 1e9))  # (sent, repaired)


def guarded_request(schema, features):
    """(a request with bad ids and numerics, the request the guard must turn it into, expected
    repaired_ids [B], expected repaired_numerics [B]), built from a valid request of B >= 4 rows.

    Id feature k gets BAD_IDS[k % 6] at the last position of row k % B (the OOV id in the repaired
    request); numeric feature j gets BAD_NUMERICS[(r + j) % 5] in row r (1e9 is the bound: kept)."""
    bad = {k: np.array(v) for k, v in features.items()}
    repaired = {k: np.array(v) for k, v in features.items()}
    batch = len(next(iter(features.values())))
    ids, numerics = np.zeros(batch, "int32"), np.zeros(batch, "int32")
    id_features = [f for f in schema.features if f.group != "num" and f.key in features]
    for k, feature in enumerate(id_features):
        row, vocab = k % batch, feature.vocabulary_size
        index = (row, -1) if bad[feature.key].ndim == 2 else (row,)
        bad[feature.key][index] = BAD_IDS[k % len(BAD_IDS)](vocab)
        repaired[feature.key][index] = vocab - 1
        ids[row] += 1
    for j, feature in enumerate(f for f in schema.group("num") if f.key in features):
        for row in range(batch):
            sent, fixed = BAD_NUMERICS[(row + j) % len(BAD_NUMERICS)]
            bad[feature.key][row], repaired[feature.key][row] = sent, fixed
            numerics[row] += sent != fixed
    return bad, repaired, ids, numerics


def guard_cases(signature, bad, expected, ids, numerics):
    """serving_check cases "<signature>@guarded/...": the bad request and what it must return."""
    cases = {f"{signature}@guarded/in/{k}": v for k, v in bad.items()}
    cases.update({f"{signature}@guarded/out/{k}": v for k, v in expected.items()})
    cases.update({f"{signature}@guarded/out/repaired_ids": ids, f"{signature}@guarded/out/repaired_numerics": numerics})
    return cases


def serving_check(export_dir, cases):
    """Runs tests/serving_check.py in a fresh interpreter (TensorFlow only) and returns its report."""
    path = Path(export_dir).parent / "cases.npz"
    np.savez(path, **cases)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "serving_check.py"), str(export_dir), str(path)],
        capture_output=True, text=True, env=env, cwd="/",
    )
    if result.returncode:
        raise AssertionError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


ROUTES = ("direct", "predict_request", "rest_json")

# An export is always traced under TensorFlow: under JAX or torch `zoo.export` saves a preset and
# re-exports it in a TensorFlow subprocess. That hop is tested on every backend (din below); the other
# signatures build the same graph whatever backend asked for them (and presets load equally on every
# backend: tests/cross_backend_test.py), so they run in the TensorFlow suite only.
tensorflow_only = unittest.skipUnless(
    keras.backend.backend() == "tensorflow", "the export graph is TensorFlow's; the backend hop is tested with din"
)


def assert_every_route(test, report, names):
    """Each signature in `names` matched the expected outputs within 1e-5 on every client route."""
    for name in names:
        for route in ROUTES:
            test.assertLess(report["signatures"][name][route], 1e-5, (name, route))


class PlainExportTest(TestCase):
    def test_din_serving_default_in_tf_only_process(self):
        simulator = small_simulator()
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        features, _ = simulator.sample(5, seed=9)
        expected = model.predict(features, verbose=0)
        bad, repaired, ids, numerics = guarded_request(simulator.schema, features)
        path = Path(self.get_temp_dir()) / "din" / "1"
        zoo.export(model, path)
        self.assertTrue((path / "saved_model.pb").is_file() and (path / "variables").is_dir())
        cases = {f"serving_default/in/{k}": v for k, v in features.items()}
        cases["serving_default/out/pctr"] = expected
        cases["serving_default/out/repaired_ids"] = cases["serving_default/out/repaired_numerics"] = np.zeros(5)
        # Out-of-range and negative ids, NaN, inf and huge numerics score as their repaired request.
        cases.update(guard_cases("serving_default", bad, {"pctr": model.predict(repaired, verbose=0)}, ids, numerics))
        report = serving_check(path, cases)
        self.assertEqual(report["modules"], [])  # the client imported neither keras nor zoo
        assert_every_route(self, report, ["serving_default", "serving_default@guarded"])
        result = report["signatures"]["serving_default"]
        self.assertEqual(result["input_dtypes"]["hist_item_id"], "int32")
        self.assertEqual(result["input_dtypes"]["hist_time"], "int64")
        self.assertEqual(result["outputs"], ["pctr", "repaired_ids", "repaired_numerics"])

        shown = saved_model_cli(path)
        self.assertIn("Method name is: tensorflow/serving/predict", shown)
        self.assertNotIn("XlaCallModule", shown)
        for key, (shape, dtype) in simulator.schema.input_spec().items():
            block = shown.split(f"inputs['{key}'] tensor_info:")[1].split("name:")[0]
            self.assertIn(f"dtype: DT_{dict(int64='INT64', int32='INT32', float32='FLOAT')[dtype]}", block)
            self.assertIn(f"shape: ({', '.join(['-1'] + [str(s) for s in shape])})" if shape else "shape: (-1)", block)
        self.assertIn("outputs['pctr']", shown)

    @tensorflow_only
    def test_every_registered_model_serves_its_predictions(self):
        """serving_default of every registered model (small config) equals `predict` (1e-5), and a
        request with bad ids and numerics equals `predict` of its repaired request."""
        import tensorflow as tf

        from tests.cross_backend_test import build_small

        for name in zoo.registry.names():
            with self.subTest(model=name):
                model, simulator = build_small(name)
                features, _ = simulator.sample(4, seed=9)
                bad, repaired, ids, numerics = guarded_request(model.schema, features)
                path = Path(self.get_temp_dir()) / name / "1"
                zoo.export(model, path)
                serve = tf.saved_model.load(str(path)).signatures["serving_default"]
                served = serve(**{k: tf.constant(v) for k, v in features.items()})
                scored = lambda batch: keras.ops.convert_to_numpy(  # noqa: E731  (predict's own scores, uncompiled)
                    model(model.checked(batch), training=False))
                self.assertAllClose(served["pctr"], scored(features), atol=1e-5)
                self.assertEqual(served["repaired_ids"].numpy().tolist(), [0] * 4)
                served = serve(**{k: tf.constant(v) for k, v in bad.items()})
                self.assertAllClose(served["pctr"], scored(repaired), atol=1e-5)
                self.assertEqual(served["repaired_ids"].numpy().tolist(), ids.tolist())
                self.assertEqual(served["repaired_numerics"].numpy().tolist(), numerics.tolist())

    @tensorflow_only
    def test_no_device_pins_in_the_serving_graph(self):
        from tensorflow.core.protobuf import saved_model_pb2

        simulator = small_simulator()
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        path = Path(self.get_temp_dir()) / "1"
        zoo.export(model, path)
        proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
        graph = proto.meta_graphs[0].graph_def
        # The checkpoint save/restore functions TF adds are pinned to CPU by TF itself; the model's
        # own computation must carry no device.
        pinned = [
            (f.signature.name, n.op, n.device)
            for f in graph.library.function
            if "_traced_save" not in f.signature.name and "_traced_restore" not in f.signature.name
            for n in f.node_def
            if n.device
        ]
        self.assertEqual(pinned, [])

    def test_bad_requests_give_one_line_errors(self):
        simulator = small_simulator()
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        base = Path(self.get_temp_dir())
        with self.assertRaisesRegex(ZooError, "numeric version"):
            zoo.export(model, base / "din")
        (base / "din" / "1").mkdir(parents=True)
        (base / "din" / "1" / "saved_model.pb").write_bytes(b"x")
        with self.assertRaisesRegex(ZooError, "not empty"):
            zoo.export(model, base / "din" / "1")
        with self.assertRaisesRegex(ZooError, "unknown signature 'beam'"):
            zoo.export(model, base / "din" / "2", signature="beam")
        with self.assertRaisesRegex(ZooError, "takes no option"):
            zoo.export(model, base / "din" / "3", m2=4)
        zoo.save(model, base / "nowt", weights=False)
        with self.assertRaisesRegex(ZooError, "has no weights"):
            zoo.export(base / "nowt", base / "x" / "1")
        with self.assertRaisesRegex(ZooError, "unknown model 'dinx'"):
            zoo.export("dinx", base / "y" / "1")


class EncodeDecodeExportTest(TestCase):
    @tensorflow_only
    def test_rest_encode_once_decode_many_in_tf_only_process(self):
        simulator = small_simulator()
        model = zoo.get("rest", schema=simulator.schema, **SMALL["rest"])
        features, _ = simulator.sample(4, seed=4)
        state = model.encode(features)
        # Decode 5 candidates per request against one encoded history.
        many, _ = simulator.sample(20, seed=5)
        candidates = {k: v for k, v in features.items() if not k.startswith("hist")}
        for key in ("cand_item_id", "cand_category"):
            candidates[key] = many[key].reshape(4, 5)
        candidates["cand_time"] = features["cand_time"] + np.arange(5)[None, :]
        expected = model.decode(state, candidates)
        path = Path(self.get_temp_dir()) / "rest" / "1"
        zoo.export(model, path, signature="encode_decode")
        hist = {k: v for k, v in features.items() if k.startswith("hist")}
        cases = {f"encode/in/{k}": v for k, v in hist.items()}
        cases["encode/out/memory"] = state["memory"]
        cases.update({f"decode/in/{k}": v for k, v in candidates.items()})
        cases.update({"decode/in/memory": state["memory"], "decode/in/memory_valid": state["memory_valid"],
                      "decode/in/hist_time": features["hist_time"], "decode/out/pctr": expected})
        cases.update({f"serving_default/in/{k}": v for k, v in features.items()})
        cases["serving_default/out/pctr"] = model.predict(features, verbose=0)
        for name in ("encode", "decode", "serving_default"):
            cases[f"{name}/out/repaired_ids"] = cases[f"{name}/out/repaired_numerics"] = np.zeros(4)

        # Every signature guarded: bad ids (and numerics, and decode's memory) as their repaired values.
        bad, repaired, ids, numerics = guarded_request(simulator.schema, features)
        cases.update(guard_cases("serving_default", bad, {"pctr": model.predict(repaired, verbose=0)}, ids, numerics))
        bad, repaired, ids, numerics = guarded_request(simulator.schema, hist)
        expected = {"memory": model.encode(repaired)["memory"]}
        cases.update(guard_cases("encode", bad, expected, ids, numerics))
        bad, repaired, ids, numerics = guarded_request(simulator.schema, candidates)
        memory, fixed = state["memory"].copy(), state["memory"].copy()
        memory[1, -1, :2], fixed[1, -1, :2] = (np.nan, -np.inf), 0.0
        memory[2, 0, 0], fixed[2, 0, 0] = 3e20, 1e9
        numerics += np.array([0, 2, 1, 0], "int32")
        expected = {"pctr": model.decode(dict(state, memory=fixed), repaired)}
        bad.update(memory=memory, memory_valid=state["memory_valid"], hist_time=features["hist_time"])
        cases.update(guard_cases("decode", bad, expected, ids, numerics))
        report = serving_check(path, cases)
        assert_every_route(self, report, ["encode", "decode", "serving_default"])
        assert_every_route(self, report, ["encode@guarded", "decode@guarded", "serving_default@guarded"])
        self.assertEqual(report["signatures"]["decode"]["input_dtypes"]["memory_valid"], "bool")
        shown = saved_model_cli(path)
        self.assertIn("signature_def['decode']", shown)
        decode = shown.split("signature_def['decode']")[1]
        self.assertIn("shape: (-1, -1)", decode.split("inputs['cand_time']")[1])

    def test_unsupported_model_signature_pair(self):
        simulator = small_simulator()
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        with self.assertRaisesRegex(ZooError, "'encode_decode' serves rest; din exports with serving_default"):
            zoo.export(model, Path(self.get_temp_dir()) / "1", signature="encode_decode")


class ParallelCandidatesExportTest(TestCase):
    @tensorflow_only
    def test_lightsuan_parallel_and_score_all_in_tf_only_process(self):
        simulator = small_simulator()
        config = dict(SMALL["lightsuan"], parallel_candidates=4, sample_rate=0.25)
        model = zoo.get("lightsuan", schema=simulator.schema, **config)
        features, _ = simulator.sample(4, seed=6)
        many, _ = simulator.sample(28, seed=7)
        m1 = 7  # two passes of m2 = 4, the second with one placeholder
        request = dict(features)
        request["cand_item_id"] = many["cand_item_id"].reshape(4, m1)
        request["cand_category"] = many["cand_category"].reshape(4, m1)
        request["cand_time"] = np.repeat(features["cand_time"], m1, axis=1)

        def outputs(request):  # each candidate scored alone
            pctr = model.score_candidates(request, use_cache=False)
            return {"pctr": pctr, "rectified_pctr": pctr / (pctr + (1 - pctr) / 0.25)}

        path = Path(self.get_temp_dir()) / "lightsuan" / "1"
        zoo.export(model, path, signature="parallel_candidates")
        cases = {}
        for name in ("serving_default", "score_all"):  # both score any M, in passes of m2
            cases.update({f"{name}/in/{k}": v for k, v in request.items()})
            cases.update({f"{name}/out/{k}": v for k, v in outputs(request).items()})
            cases[f"{name}/out/repaired_ids"] = cases[f"{name}/out/repaired_numerics"] = np.zeros(4)
            bad, repaired, ids, numerics = guarded_request(simulator.schema, request)
            cases.update(guard_cases(name, bad, outputs(repaired), ids, numerics))
        report = serving_check(path, cases)
        for name in ("serving_default", "score_all"):
            served = ["pctr", "rectified_pctr", "repaired_ids", "repaired_numerics"]
            self.assertEqual(report["signatures"][name]["outputs"], served)
            assert_every_route(self, report, [name, f"{name}@guarded"])
        shown = saved_model_cli(path)
        for name in ("serving_default", "score_all"):
            signature = shown.split(f"signature_def['{name}']")[1]
            self.assertIn("shape: (-1, -1)", signature.split("inputs['cand_item_id']")[1])

    def test_suan_has_no_parallel_signature(self):
        simulator = small_simulator()
        model = zoo.get("suan", schema=simulator.schema, **SMALL["suan"])
        with self.assertRaisesRegex(ZooError, "serves lightsuan; suan exports with serving_default"):
            zoo.export(model, Path(self.get_temp_dir()) / "1", signature="parallel_candidates")
