import keras
import numpy as np

from tests.testing import TestCase, small_simulator, to_numpy
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.layers.ctr_transformer_tokens import CTRTransformerTokens
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.schema import Schema


class CTRTransformerTokensTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def tokens(self, schema, features, width=6):
        embedded = FeatureEmbedding(schema)(features)
        layer = CTRTransformerTokens(schema, width)
        return layer, embedded, layer(embedded)

    def test_layer_basics(self):
        schema = self.simulator.schema
        features, _ = self.simulator.sample(3, seed=0)
        embedded = {k: to_numpy(v) for k, v in FeatureEmbedding(schema)(features).items()}
        n = 1 + 2 + 4 + 1 + 1 + schema.sequence_length
        self.run_layer_test(CTRTransformerTokens, {"schema": schema.to_dict(), "width": 6}, embedded, (3, n, 6))

    def test_layout_and_mask(self):
        schema = self.simulator.schema  # cand: 2 fields, user: 4, ctx: 1, num: 1, L = 8
        features, _ = self.simulator.sample(3, seed=0)
        layer, embedded, (tokens, valid) = self.tokens(schema, features)
        n = 1 + 2 + 4 + 1 + 1 + schema.sequence_length
        self.assertEqual(tuple(tokens.shape), (3, n, 6))
        tokens, valid = to_numpy(tokens), to_numpy(valid)
        # [CLS], the target token: the learned vector plus the candidate's field tokens.
        self.assertAllClose(tokens[:, 0], to_numpy(layer.cls) + tokens[:, 1] + tokens[:, 2], atol=1e-5)
        self.assertAllClose(tokens[:, 1], layer.field_projections["cand_item_id"](embedded["cand_item_id"])[:, 0], atol=1e-5)
        price = features["num_price"][:, None]
        expected_num = price * to_numpy(layer.numeric_scale)[0] + to_numpy(layer.numeric_bias)[0]
        self.assertAllClose(tokens[:, 8], expected_num, atol=1e-5)  # the numeric token v a + b
        project = layer.field_projections["user_age"]
        self.assertAllClose(tokens[:, 4], project(embedded["user_age"]), atol=1e-5)
        hist_valid = features["hist_item_id"] != 0
        np.testing.assert_array_equal(valid[:, :9], True)
        np.testing.assert_array_equal(valid[:, 9:], hist_valid)
        self.assertTrue((~hist_valid).any())  # the sample has padding to mask

    def test_each_candidate_gets_its_own_pass(self):
        schema = self.simulator.schema.with_candidates(2)
        features, _ = self.simulator.sample(2, seed=1)
        features = dict(features)
        for key in ("cand_item_id", "cand_category", "cand_time"):
            features[key] = np.concatenate([features[key], features[key][::-1]], axis=1)
        _, embedded, (tokens, valid) = self.tokens(schema, features)
        tokens = to_numpy(tokens)
        self.assertEqual(tokens.shape[0], 4)  # rows b * M + m
        self.assertAllClose(tokens[0, 3:], tokens[1, 3:])  # candidates of row 0 share the context
        self.assertAllClose(tokens[0, 1:3], tokens[3, 1:3])  # row 0's candidate 0 is row 1's candidate 1
        self.assertFalse(np.allclose(tokens[0, 3:], tokens[2, 3:]))

    def test_config_round_trip(self):
        schema = self.simulator.schema
        layer = CTRTransformerTokens(schema, 4)
        clone = CTRTransformerTokens.from_config(layer.get_config())
        self.assertEqual(clone.schema, schema)
        self.assertEqual(clone.width, 4)
        keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))

    def test_needs_a_candidate(self):
        schema = Schema(features=(Feature("age", "user", 8, 4),))
        with self.assertRaisesRegex(ZooError, "cand_"):
            CTRTransformerTokens(schema, 4)
