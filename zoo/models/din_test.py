import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.din import DIN
from zoo.schema import Schema


class DINTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.features, self.labels = self.simulator.sample(16)

    def test_output_is_pctr_per_candidate(self):
        model = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        pctr = model.predict(self.features, verbose=0)
        self.assertEqual(pctr.shape, (16, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["mlp_units"], [16])

    def test_several_candidates_score_independently(self):
        schema = self.simulator.schema.with_candidates(3)
        model = DIN(schema, attention_units=(8,), mlp_units=(16,))
        features = dict(self.features)
        for key in ("cand_item_id", "cand_category", "cand_time"):
            features[key] = np.repeat(features[key], 3, axis=1)
        features["cand_item_id"][:, 1] = 1  # change the middle candidate only
        pctr = model.predict(features, verbose=0)
        self.assertAllClose(pctr[:, 0], pctr[:, 2])

    def test_trains_and_round_trips(self):
        model = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        history = model.fit(self.features, self.labels, epochs=2, batch_size=8, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][-1]))
        self.run_model_saving_test(model, self.features, self.get_temp_dir())

    def test_first_order_adds_each_fields_weight_to_the_logit(self):
        """logit(first_order=True) - logit(first_order=False) = sum_i w_i x_i (FM eq 1's first-order sum) in
        NumPy, with the other weights equal: an id field's w at its id (hist_ and cand_ of one name share the
        table), a history field the mean w of its behaviours visible to the candidate, a numeric w_f x_f."""
        rng = np.random.default_rng(0)
        wide = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        narrow = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,), first_order=False)
        for layer in narrow.layers:
            if layer.weights:
                layer.set_weights(wide.get_layer(layer.name).get_weights())
        tables = {}
        for weight in wide.get_layer("first_order_embedding").weights + wide.get_layer("first_order_tokens").weights:
            weight.assign(rng.normal(scale=0.3, size=weight.shape).astype("float32"))  # (logits where float32 p is exact)
            tables[weight.path.split("/")[1]] = np.asarray(weight.numpy())[:, 0]
        f = self.features
        expected = (tables["embedding_item_id"][f["cand_item_id"][:, 0]] + tables["embedding_category"][f["cand_category"][:, 0]]
                    + sum(tables[f"embedding_user_{name}"][f[f"user_{name}"]] for name in ("user_id", "age", "gender", "city"))
                    + tables["embedding_ctx_hour"][f["ctx_hour"]] + tables["numeric_scale"][0] * f["num_price"])
        valid = (f["hist_item_id"] != 0) | (f["hist_category"] != 0) | (f["hist_behavior"] != 0)
        visible = valid & (f["hist_time"] < f["cand_time"])  # [B, L] (one candidate)
        for name in ("item_id", "category", "behavior"):
            w = tables[f"embedding_{name}"][f[f"hist_{name}"]]
            expected += (w * visible).sum(axis=1) / np.maximum(visible.sum(axis=1), 1)
        self.assertTrue(visible.any() and not visible.all())

        def logit(model):
            p = np.asarray(model.predict(f, verbose=0), np.float64)[:, 0]
            return np.log(p) - np.log1p(-p)

        self.assertAllClose(logit(wide) - logit(narrow), expected, atol=1e-4)

    def test_a_preset_written_before_first_order_builds_without_it(self):
        """A preset folder whose config.json has no `first_order` (written before it) loads the graph its
        weights fit, as does Keras' from_config; a fresh model (zoo.get, fit) has it."""
        import json
        import os

        model = DIN(self.simulator.schema, attention_units=(8,), mlp_units=(16,), first_order=False)
        folder = os.path.join(self.get_temp_dir(), "old_din")
        zoo.save(model, folder)
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            written = json.load(f)
        written["config"].pop("first_order")
        with open(path, "w") as f:
            json.dump(written, f)
        metadata = os.path.join(folder, "metadata.json")
        if os.path.exists(metadata):  # (the config's checksum, recomputed as a preset written before had it)
            with open(metadata) as f:
                meta = json.load(f)
            if "config_sha256" in meta:
                meta["config_sha256"] = zoo.presets.file_sha256(path)
                with open(metadata, "w") as f:
                    json.dump(meta, f)
        loaded = zoo.load(folder)
        self.assertFalse(loaded.first_order)
        self.assertAllClose(loaded.predict(self.features, verbose=0), model.predict(self.features, verbose=0))
        config = model.get_config()
        config.pop("first_order")
        self.assertFalse(DIN.from_config(config).first_order)
        fresh = zoo.get("din", schema=self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        self.assertTrue(fresh.first_order)

    def test_needs_a_history_and_a_candidate(self):
        schema = Schema(features=(Feature("age", "user", 4), Feature("item_id", "cand", 9)))
        with self.assertRaisesRegex(ZooError, "din needs at least one hist_ feature"):
            DIN(schema)

    def test_score_validates_the_batch(self):
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(8,), mlp_units=(16,))
        bad = dict(self.features, hist_item_id=-self.features["hist_item_id"] - 1)
        with self.assertRaisesRegex(ZooError, "hist_item_id has a negative value"):
            model.score(bad)
        many = {k: (np.repeat(v, 2, axis=1) if k.startswith("cand") else v) for k, v in self.features.items()}
        with self.assertRaisesRegex(ZooError, "built for 1 candidate"):
            model.score(many)
        self.assertEqual(model.score(self.features).shape, (16, 1))

    def test_no_leakage(self):
        self.run_leakage_test("din", attention_units=(8,), mlp_units=(16,))
