from unittest import mock

import keras
import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.schema import Schema


class FeatureEmbeddingTest(TestCase):
    def test_layer_basics(self):
        simulator = small_simulator()
        features, _ = simulator.sample(4)
        layer = FeatureEmbedding(simulator.schema)
        outputs = layer(features)
        d = 3 * simulator.embedding_dim  # item_id, category, behavior
        self.assertEqual(tuple(outputs["hist"].shape), (4, 8, d))
        self.assertEqual(tuple(outputs["cand"].shape), (4, 1, d))
        self.assertEqual(tuple(outputs["user"].shape), (4, 4 * simulator.embedding_dim))
        self.assertEqual(tuple(outputs["num"].shape), (4, 1))
        clone = FeatureEmbedding.from_config(layer.get_config())
        clone(features)
        clone.set_weights(layer.get_weights())
        self.assertAllClose(clone(features)["hist"], outputs["hist"])

    def test_run_layer_test(self):
        simulator = small_simulator()
        features, _ = simulator.sample(4)
        d = 3 * simulator.embedding_dim
        # The first output in keras.tree order is "cand" [B, M, D].
        self.run_layer_test(FeatureEmbedding, {"schema": simulator.schema.to_dict()}, dict(features), (4, 1, d))

    def test_a_subset_of_the_keys_embeds_the_groups_it_completes(self):
        simulator = small_simulator()
        features, _ = simulator.sample(3)
        layer = FeatureEmbedding(simulator.schema)
        full = layer(features)
        hist_only = layer({k: v for k, v in features.items() if k.startswith("hist")})
        self.assertEqual(sorted(k for k in hist_only if "_" not in k or k == "hist_valid"), ["hist", "hist_valid"])
        self.assertAllClose(hist_only["hist"], full["hist"])
        no_hist = layer({k: v for k, v in features.items() if not k.startswith("hist")})
        self.assertNotIn("hist", no_hist)
        for group in ("cand", "user", "ctx", "num"):
            self.assertAllClose(no_hist[group], full[group])
        with self.assertRaisesRegex(ZooError, "the batch has some user_ features but not user_age"):
            layer({k: v for k, v in features.items() if k != "user_age"})

    def test_tokens_share_tables_and_zero_fill_missing_fields(self):
        schema = Schema(
            features=(
                Feature("item_id", "hist", 5, 2),
                Feature("behavior", "hist", 3, 1),
                Feature("item_id", "cand", 5, 2),
                Feature("price_level", "cand", 4, 1),
            ),
            sequence_length=2,
        )
        layer = FeatureEmbedding(schema)
        features = {
            "hist_item_id": np.array([[0, 3]], "int32"),
            "hist_behavior": np.array([[0, 2]], "int32"),
            "cand_item_id": np.array([[4]], "int32"),
            "cand_price_level": np.array([[1]], "int32"),
        }
        layer(features)
        item = np.arange(10, dtype="float32").reshape(5, 2)
        behavior = np.array([[100.0], [101.0], [102.0]], "float32")
        price = np.array([[200.0], [201.0], [202.0], [203.0]], "float32")
        layer.tables["item_id"].embeddings.assign(item)
        layer.tables["behavior"].embeddings.assign(behavior)
        layer.tables["price_level"].embeddings.assign(price)
        out = layer(features)
        self.assertEqual(len(layer.tables), 3)  # hist_item_id and cand_item_id share one table
        # Layout: item_id (2), behavior (1), price_level (1); absent fields are zero.
        self.assertAllClose(out["hist"], [[[0, 1, 100, 0], [6, 7, 102, 0]]])
        self.assertAllClose(out["cand"], [[[8, 9, 0, 201]]])
        self.assertAllClose(out["hist_valid"], [[False, True]])

    def test_a_tags_feature_is_the_mean_of_its_present_ids_embeddings(self):
        schema = Schema(
            features=(
                Feature("item_id", "hist", 5, 2),
                Feature("item_id", "cand", 5, 2),
                Feature("genres", "cand", 6, 2, tags=3),  # first in the cand layout's absent-field reference
                Feature("likes", "user", 6, 2, tags=2),
            ),
            sequence_length=2,
        )
        layer = FeatureEmbedding(schema)
        genres = np.array([[[1, 4, 0], [0, 0, 0]], [[5, 5, 2], [3, 0, 0]]], "int32")  # [B=2, M=2, S=3]
        likes = np.array([[2, 0], [1, 3]], "int32")  # [B, S=2]
        features = {"hist_item_id": np.array([[0, 3], [1, 2]], "int32"), "cand_item_id": np.array([[4, 1], [2, 3]], "int32"),
                    "cand_genres": genres, "user_likes": likes}
        layer(features)
        rng = np.random.default_rng(0)
        tables = {name: rng.normal(size=layer.tables[name].embeddings.shape).astype("float32")
                  for name in ("item_id", "genres", "user_likes")}
        for name, value in tables.items():
            layer.tables[name].embeddings.assign(value)
        out = layer(features)

        def pooled(table, ids):  # sum over present slots / their count, zero when none
            present = (ids > 0)[..., None]
            return (table[ids] * present).sum(-2) / np.maximum(present.sum(-2), 1)

        expected_genres = pooled(tables["genres"], genres)
        self.assertAllClose(out["cand_genres"], expected_genres, atol=1e-6)
        self.assertAllClose(out["cand_genres"][0, 1], [0.0, 0.0])  # no tag: zero
        self.assertAllClose(out["cand_genres"][1, 0], (2 * tables["genres"][5] + tables["genres"][2]) / 3, atol=1e-6)
        self.assertAllClose(out["user"], pooled(tables["user_likes"], likes), atol=1e-6)
        self.assertAllClose(out["cand"], np.concatenate([tables["item_id"][features["cand_item_id"]], expected_genres],
                                                        -1), atol=1e-6)
        self.assertAllClose(out["hist"][..., 2:], np.zeros((2, 2, 2)))  # genres are candidate-only: zero-filled
        with self.assertRaisesRegex(ZooError, "^feature 'hist_genres' has tags 3: tags are features of a row"):
            Schema(features=(Feature("genres", "hist", 6, 2, tags=3),), sequence_length=2)
        with self.assertRaisesRegex(ZooError, r"^cand_genres holds 2 tags per row but the schema's feature holds 3"):
            schema.validate(dict(features, cand_genres=genres[..., :2]))
        with self.assertRaisesRegex(ZooError, r"^user_likes has shape \[2\] but the contract wants \['B', 'S'\]"):
            schema.validate(dict(features, user_likes=likes[:, 0]))
        self.assertEqual(Schema.from_dict(schema.to_dict()), schema)
        self.assertNotIn("tags", schema.feature("cand_item_id").to_dict())  # one-valued configs stay as they were

    def test_in_a_functional_model_with_typed_inputs(self):
        schema = small_simulator().schema
        inputs = schema.inputs()
        outputs = FeatureEmbedding(schema)(inputs)
        model = keras.Model(inputs, outputs["hist"])
        self.assertEqual(model.input["hist_time"].dtype, "int64")
        self.assertEqual(tuple(model.output.shape), (None, 8, 24))

    def test_hist_visible_hides_behaviours_at_or_after_each_candidates_time(self):
        schema = Schema(
            features=(Feature("item_id", "hist", 5, 2), Feature("item_id", "cand", 5, 2)),
            sequence_length=4,
            num_candidates=2,
            time=True,
        )
        features = {
            "hist_item_id": np.array([[0, 1, 2, 3]], "int32"),
            "hist_time": np.array([[0, 10, 20, 30]], "int64"),
            "cand_item_id": np.array([[4, 4]], "int32"),
            "cand_time": np.array([[20, 31]], "int64"),
        }
        out = FeatureEmbedding(schema)(features)
        # Candidate 0 (t = 20) sees behaviour 1 only (behaviour 2 has its time, 3 is later); padding never.
        self.assertAllClose(out["hist_visible"], [[[False, True, False, False], [False, True, True, True]]])
        untimed = Schema(features=schema.features, sequence_length=4, num_candidates=2)
        out = FeatureEmbedding(untimed)({k: v for k, v in features.items() if not k.endswith("_time")})
        self.assertAllClose(out["hist_visible"], [[[False, True, True, True]] * 2])

    def test_lookups_are_the_tables_rows_and_their_gradient_adds_per_id(self):
        simulator = small_simulator()
        features, _ = simulator.sample(6, seed=4)
        layer = FeatureEmbedding(simulator.schema)
        layer(features)
        key = "hist_item_id"
        table = layer.tables["item_id"]
        ids = np.asarray(features[key]).astype("int64")
        rows = keras.ops.convert_to_numpy(layer(features)[key])
        np.testing.assert_array_equal(rows, keras.ops.convert_to_numpy(table.embeddings)[ids])
        if keras.backend.backend() != "torch":
            return
        # torch: the rows come from index_select and the table's gradient is NumPy's add.at of the
        # upstream gradient per id (what F.embedding's backward gives), repeated ids included.
        import torch

        upstream = np.random.RandomState(5).normal(size=rows.shape).astype("float32")
        with mock.patch.object(torch, "index_select", wraps=torch.index_select) as gather:
            out = layer({k: v for k, v in features.items() if k.startswith("hist_")})[key]
        self.assertEqual(gather.call_args.args[2].dtype, torch.int64)
        (out * torch.tensor(upstream)).sum().backward()
        expected = np.zeros(tuple(table.embeddings.shape), "float32")
        np.add.at(expected, ids, upstream)
        self.assertGreater(len(np.unique(ids[ids > 0])), 1)
        self.assertLess(len(np.unique(ids)), ids.size)  # repeated ids: their gradients must add up
        self.assertAllClose(table.embeddings.value.grad.numpy(), expected, atol=1e-6)
        # a negative id reads the row Keras' Embedding layer reads (keras.ops.take wraps it)
        negative = dict(features, **{key: -np.asarray(features[key])})
        self.assertAllClose(layer(negative)[key], table(negative[key]))

    def test_without_sequence_tokens_the_rest_is_the_same(self):
        simulator = small_simulator()
        features, _ = simulator.sample(3, seed=2)
        layer = FeatureEmbedding(simulator.schema)
        full = layer(features)
        lean = FeatureEmbedding.from_config(dict(layer.get_config(), sequence_tokens=False))
        lean(features)
        lean.set_weights(layer.get_weights())
        outputs = lean(features)
        self.assertFalse(lean.get_config()["sequence_tokens"])
        self.assertEqual(sorted(full), sorted(list(outputs) + ["cand", "hist"]))
        for key, value in outputs.items():
            self.assertAllClose(value, full[key])
