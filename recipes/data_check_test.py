import dataclasses

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.recipes.data_check import check_dataset, check_schema, schema_differences


class DataCheckTest(TestCase):
    def setUp(self):
        super().setUp()
        self.schema = small_simulator().schema
        self.model = zoo.get("din", schema=self.schema, attention_units=(4,), mlp_units=(8,))

    def test_matching_data_and_a_subset_model_pass(self):
        check_schema(self.model, self.schema)
        check_dataset(self.model, small_simulator().dataset(8, batch_size=8, seed=0))
        wider = dataclasses.replace(self.schema, features=self.schema.features + (Feature("weekday", "ctx", 9, 4),))
        self.assertEqual(schema_differences(self.schema, wider), [])  # a feature the model does not read is fine

    def test_each_difference_is_named(self):
        fewer = [f for f in self.schema.features if f.key != "num_price"] + [Feature("shop", "ctx", 9, 4)]
        bigger = [dataclasses.replace(f, vocabulary_size=500) if f.key.endswith("item_id") else f for f in fewer]
        data = dataclasses.replace(self.schema, features=tuple(bigger), sequence_length=20)
        self.assertEqual(schema_differences(self.schema, data), [
            "the data lacks num_price",
            "the history has length 20 in the data but 8 in the model",
            "vocabularies too small: hist_item_id (500 ids in the data, 62 in the model), "
            "cand_item_id (500 ids in the data, 62 in the model)",
        ])
        with self.assertRaises(ZooError) as raised:
            check_schema(self.model, data)
        message = str(raised.exception)
        self.assertEqual(len(message.splitlines()), 1)
        self.assertTrue(message.startswith("din was built for another schema than this data: the data lacks num_price"))
        self.assertIn("; the model does not read ctx_shop. Build a model for this data: zoo.get('din', schema=schema)",
                      message)

    def test_datasets_are_checked_by_their_keys_and_history_length(self):
        longer = small_simulator(sequence_length=12).dataset(8, batch_size=8, seed=0)
        with self.assertRaisesRegex(ZooError, "the history has length 12 in the data but 8 in the model"):
            check_dataset(self.model, longer)
        without_price = longer.map(lambda features, labels: (
            {k: v for k, v in features.items() if k != "num_price"}, labels))
        with self.assertRaisesRegex(ZooError, "the data lacks num_price; the history has length 12"):
            check_dataset(self.model, without_price, hint="python -m zoo fit din")
        with self.assertRaisesRegex(ZooError, "Build a model for this data: python -m zoo fit din$"):
            check_dataset(self.model, without_price, hint="python -m zoo fit din")

    def test_a_tags_feature_of_another_size_is_named(self):
        import numpy as np
        import tensorflow as tf

        genres = Feature("genres", "cand", 7, 4, tags=3)
        schema = dataclasses.replace(self.schema, features=self.schema.features + (genres,))
        model = zoo.get("din", schema=schema, attention_units=(4,), mlp_units=(8,))
        wider = dataclasses.replace(schema, features=self.schema.features + (dataclasses.replace(genres, tags=5),))
        self.assertEqual(schema_differences(schema, wider), ["cand_genres holds 5 value(s) a row in the data but 3 in "
                                                             "the model"])
        one = dataclasses.replace(schema, features=self.schema.features + (dataclasses.replace(genres, tags=0),))
        self.assertEqual(schema_differences(schema, one), ["cand_genres holds 1 value(s) a row in the data but 3 in "
                                                           "the model"])
        features, labels = small_simulator().sample(8, seed=0)
        for ids, message in ((np.zeros((8, 1, 5), "int32"), r"cand_genres has shape \[None, 1, 5\] in the data but the "
                                                             r"model reads \[B, M, S=3\]"),
                             (np.zeros((8, 1), "int32"), r"cand_genres has shape \[None, 1\] in the data but the "
                                                         r"model reads \[B, M, S=3\]")):
            dataset = tf.data.Dataset.from_tensor_slices((dict(features, cand_genres=ids), labels)).batch(4)
            with self.assertRaisesRegex(ZooError, message):
                check_dataset(model, dataset)
        right = tf.data.Dataset.from_tensor_slices((dict(features, cand_genres=np.zeros((8, 1, 3), "int32")), labels))
        check_dataset(model, right.batch(4))
