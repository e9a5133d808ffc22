import json
import os

import keras
import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase, run_cli, small_simulator
from zoo.errors import ZooError
from zoo.recipes.warm_start import carry_weights
from zoo.schema import Schema


def grown_schema(schema, extra):
    """`schema` with `extra` more ids in the item table (its hist_ and cand_ features)."""
    config = schema.to_dict()
    for feature in config["features"]:
        if feature["name"] == "item_id":
            feature["vocabulary_size"] += extra
    return Schema.from_dict(config)


def vocabulary_state(tokens):
    """A fitted state whose item_id vocabulary holds `tokens` tokens ("0", "1", ...; a list: those)."""
    tokens = [str(t) for t in range(tokens)] if isinstance(tokens, int) else tokens
    return {"fitted": {"item_id": {"kind": "vocabulary", "tokens": tokens}},
            "spec": {"columns": {"item_id": {"role": "cand", "feature": "item_id"}}}}


class CarryWeightsTest(TestCase):
    def test_a_grown_table_keeps_its_rows_moves_its_oov_row_and_initialises_the_new_ids(self):
        schema = small_simulator().schema
        n = schema.feature("cand_item_id").vocabulary_size  # tokens + padding + OOV
        parent = zoo.get("din", schema=schema, **SMALL["din"])
        rng = np.random.default_rng(0)
        for weight in parent.weights:  # every weight distinct from any fresh model's
            weight.assign(rng.normal(size=weight.shape).astype("float32"))
        model = zoo.get("din", schema=grown_schema(schema, 5), **SMALL["din"])
        initial = {weight.path: np.array(weight.numpy()) for weight in model.weights}
        carry_weights(parent, model, vocabulary_state(n - 2), vocabulary_state(n + 3))
        grown = 0
        for old, new in zip(parent.weights, model.weights):
            old_value, value = np.asarray(old.numpy()), np.asarray(new.numpy())
            if old_value.shape == value.shape:
                np.testing.assert_array_equal(value, old_value, err_msg=new.path)
                continue
            grown += 1
            self.assertEqual((old_value.shape[0], value.shape[0]), (n, n + 5), new.path)
            np.testing.assert_array_equal(value[: n - 1], old_value[: n - 1])  # padding and ids 1..n-2
            np.testing.assert_array_equal(value[-1], old_value[-1])  # the trained OOV row, now the last id
            np.testing.assert_array_equal(value[n - 1: -1], initial[new.path][n - 1: -1])  # the 5 new ids
        self.assertEqual(grown, 2)  # the item table and FM's first-order weights of the item
        np.testing.assert_allclose(model.predict(small_simulator().sample(8, seed=1)[0], verbose=0).shape, (8, 1))

    def test_an_evicted_tokens_id_given_to_a_new_value_starts_from_the_initialiser(self):
        schema = small_simulator().schema
        n = schema.feature("cand_item_id").vocabulary_size
        parent = zoo.get("din", schema=schema, **SMALL["din"])
        rng = np.random.default_rng(1)
        for weight in parent.weights:
            weight.assign(rng.normal(size=weight.shape).astype("float32"))
        model = zoo.get("din", schema=schema, **SMALL["din"])  # the same size: a full table that evicted
        initial = {weight.path: np.array(weight.numpy()) for weight in model.weights}
        before = [str(t) for t in range(n - 2)]
        after = list(before)
        after[2], after[5] = "new-a", "new-b"  # tokens "2" and "5" evicted; their ids 3 and 6 reused
        carry_weights(parent, model, vocabulary_state(before), vocabulary_state(after))
        for old, new in zip(parent.weights, model.weights):
            old_value, value = np.asarray(old.numpy()), np.asarray(new.numpy())
            if "item_id/embeddings" not in new.path:
                np.testing.assert_array_equal(value, old_value, err_msg=new.path)
                continue
            reused = np.isin(np.arange(n), [3, 6])
            np.testing.assert_array_equal(value[~reused], old_value[~reused], err_msg=new.path)
            np.testing.assert_array_equal(value[reused], initial[new.path][reused], err_msg=new.path)
        moved = list(reversed(before))  # the same tokens under other ids: each keeps its trained row
        model = zoo.get("din", schema=schema, **SMALL["din"])
        carry_weights(parent, model, vocabulary_state(before), vocabulary_state(moved))
        table = next(w for w in model.weights if w.path.endswith("embedding_item_id/embeddings"))
        source = next(w for w in parent.weights if w.path.endswith("embedding_item_id/embeddings"))
        np.testing.assert_array_equal(np.asarray(table.numpy())[1:-1], np.asarray(source.numpy())[1:-1][::-1])

    def test_a_shape_other_than_a_grown_vocabulary_is_one_line(self):
        schema = small_simulator().schema
        n = schema.feature("cand_item_id").vocabulary_size
        parent = zoo.get("din", schema=schema, **SMALL["din"])
        wider = zoo.get("din", schema=schema, **dict(SMALL["din"], mlp_units=(7,)))
        with self.assertRaisesRegex(ZooError, r"^--from: the preset's weight \S+ has shape \[\d+, \d+\], this model's "
                                              r"\[\d+, 7\]: only a grown vocabulary's table may change size$"):
            carry_weights(parent, wider, vocabulary_state(n - 2), vocabulary_state(n - 2))
        grown = zoo.get("din", schema=grown_schema(schema, 5), **SMALL["din"])
        with self.assertRaisesRegex(ZooError, "only a grown vocabulary's table may change size"):
            carry_weights(parent, grown, vocabulary_state(n - 2), vocabulary_state(n - 2))  # no vocabulary grew


class TrainFromPresetTest(TestCase):
    """`fit din --from PRESET --data NEW_LOG`: the new log under the preset's spec, its fit continued, the
    weights carried, the lineage recorded; the grown preset scores the new items through their own ids."""

    def test_fit_from_a_preset_grows_its_vocabularies_and_records_its_lineage(self):
        folder = self.get_temp_dir()
        first = write_impression_log(os.path.join(folder, "monday.csv"), rows=300, users=20, items=40)
        later = write_impression_log(os.path.join(folder, "tuesday.csv"), rows=200, users=20, items=40, seed=3,
                                     start="2024-03-20T00:00:00Z", days=2, unseen_from=30)
        spec = os.path.join(folder, "spec.json")
        with open(spec, "w") as f:
            written = impression_spec(sequence_length=4)
            written["columns"]["user_id"]["max_size"] = 15  # (20 users: a full table, so the next fit evicts)
            written["columns"]["price"]["scale"] = "standardize"  # (its drift measured against the preset's)
            json.dump(written, f)
        small = [f"--set={key}={json.dumps(value)}" for key, value in SMALL["din"].items()]
        status, _, err = run_cli("fit", "din", "--data", first, "--spec", spec, "--epochs", "1",
                                 "--out", os.path.join(folder, "monday"), *small)
        self.assertEqual(status, 0, err)
        parent = os.path.join(folder, "monday", "preset")
        status, out, err = run_cli("fit", "din", "--from", parent, "--data", later, "--history-from", first,
                                   "--epochs", "1", "--out", os.path.join(folder, "tuesday"))
        self.assertEqual(status, 0, err)
        self.assertIn(f"fit: din (the weights and hyperparameters of {parent})", out)
        child = os.path.join(folder, "tuesday", "preset")
        with open(os.path.join(parent, "preprocessing.json")) as f:
            before = json.load(f)["fitted"]["item_id"]["tokens"]
        with open(os.path.join(child, "preprocessing.json")) as f:
            after = json.load(f)["fitted"]["item_id"]["tokens"]
        self.assertEqual(after[: len(before)], before)
        new = [token for token in after if token.startswith("new-")]
        self.assertTrue(new)
        grown = next(line for line in out.splitlines() if line.startswith("vocabularies grown by the new log's values: "))
        self.assertIn(f"item_id {len(before):,} -> {len(after):,}", grown)
        with open(os.path.join(child, "metadata.json")) as f:
            lineage = json.load(f)["lineage"]
        with open(os.path.join(parent, "metadata.json")) as f:
            self.assertEqual(lineage["parent_weights_sha256"], json.load(f)["weights_sha256"])
        self.assertEqual(lineage["parent"], os.path.abspath(parent))
        self.assertEqual(lineage["vocabularies"]["item_id"], {"before": len(before), "after": len(after), "evicted": 0})
        with open(os.path.join(parent, "preprocessing.json")) as f:
            users_before = json.load(f)["fitted"]["user_id"]
        with open(os.path.join(child, "preprocessing.json")) as f:
            users_after = json.load(f)["fitted"]["user_id"]
        evicted = set(users_before["tokens"]) - set(users_after["tokens"])
        self.assertEqual(len(users_after["tokens"]), 15)
        self.assertTrue(evicted)
        self.assertEqual(lineage["vocabularies"]["user_id"], {"before": 15, "after": 15, "evicted": len(evicted)})
        self.assertIn(f"user_id 15 -> 15 ({len(evicted)} least recently seen evicted)", grown)
        for token, seen in zip(users_before["tokens"], users_before["last_seen"]):  # LRU: each evicted user was
            if token in evicted:                                                     # seen before every kept one
                self.assertLessEqual(seen, min(users_after["last_seen"]))
            else:
                self.assertEqual(users_after["tokens"].index(token), users_before["tokens"].index(token))
        self.assertEqual(sum(lineage["rows"].values()), 200)  # the new log's rows (the earlier log: history only)
        self.assertEqual(sorted(lineage["drift"]), ["price"])  # (the same generator: no move, no note)
        self.assertEqual(sorted(lineage["drift"]["price"]), ["mean_shift", "moved", "sd_ratio"])
        self.assertFalse(lineage["drift"]["price"]["moved"])
        self.assertNotIn("drift:", out)
        self.assertIn("read 300 row(s) for histories and statistics only", out + err)
        model = zoo.load(child)
        self.assertEqual(model.get_config()["mlp_units"], list(SMALL["din"]["mlp_units"]))  # the parent's
        self.assertEqual(model.schema.feature("cand_item_id").vocabulary_size, len(after) + 2)
        self.assertEqual(model.predict(later).shape[0], 200)  # raw rows through the grown preprocessor
        unknown = {preset: zoo.load(preset).preprocessor.processed(later, cache_dir=folder).info["unknown_ids"]
                   for preset in (parent, child)}
        self.assertGreater(unknown[parent]["item_id"]["rows"], unknown[child].get("item_id", {"rows": 0})["rows"])
        if keras.backend.backend() == "tensorflow":  # the grown preset served raw by a TensorFlow-only process
            from zoo.serving.export_test import serving_check
            from zoo.serving.request import build_request

            path = os.path.join(folder, "export", "1")
            zoo.export(model, path, signature="raw")
            body, lines = build_request(model.preprocessor.state, later, 200)
            scores = model.predict(later).reshape(-1)
            cases = {f"raw/in/{key}": np.asarray(value, dtype=str) for key, value in body["inputs"].items()}
            cases["raw/out/pctr"] = scores[np.asarray(lines) - 2][:, None]  # (line 2: the file's first row)
            report = serving_check(path, cases)
            for route in ("direct", "predict_request", "rest_json"):
                self.assertLess(report["signatures"]["raw"][route], 1e-6, (route, report["signatures"]["raw"]))
        for argv, message in (
                (("fit", "din", "--from", parent, "--data", later, "--spec", spec),
                 f"--from {parent}: the new log is read under the preset's own spec; leave --spec out"),
                (("fit", "din", "--from", os.path.join(folder, "nothing"), "--data", later),
                 f"--from {os.path.join(folder, 'nothing')}: no such preset folder"),
                (("fit", "din", "--data", later, "--spec", spec, "--history-from", first),
                 "--history-from in fit goes with --from (a fit that continues a preset's)"),
                (("fit", "deepfm", "--from", parent, "--data", later, "--out", os.path.join(folder, "x")),
                 f"--from {parent}: the preset is a din model, not deepfm: fit din --from {parent}")):
            status, _, err = run_cli(*argv)
            self.assertNotEqual(status, 0, err)
            self.assertEqual(err.strip().splitlines()[-1], f"error: {message}", err)
