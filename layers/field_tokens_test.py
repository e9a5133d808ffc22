import numpy as np

from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.layers.field_tokens import FieldTokens
from zoo.schema import Schema

K = 4
SCHEMA = Schema(
    features=(
        Feature("item_id", "hist", 10, K),
        Feature("behavior", "hist", 5, K),
        Feature("age", "user", 6, K),
        Feature("item_id", "cand", 10, K),
        Feature("hour", "ctx", 25, K),
        Feature("price", "num"),
        Feature("clicks", "num"),
    ),
    sequence_length=5,
    num_candidates=2,
    time=True,
)


def embedded_arrays(seed, b=3, m=2, length=5):
    rng = np.random.RandomState(seed)
    visible = rng.rand(b, m, length) > 0.4
    visible[0, 1] = False  # a candidate that sees no behaviour
    return {
        "cand_item_id": rng.normal(size=(b, m, K)).astype("float32"),
        "hist_item_id": rng.normal(size=(b, length, K)).astype("float32"),
        "hist_behavior": rng.normal(size=(b, length, K)).astype("float32"),
        "user_age": rng.normal(size=(b, K)).astype("float32"),
        "ctx_hour": rng.normal(size=(b, K)).astype("float32"),
        "num": rng.normal(size=(b, 2)).astype("float32"),
        "hist_visible": visible,
    }


class FieldTokensTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            FieldTokens, {"schema": SCHEMA.to_dict()}, embedded_arrays(0), (3, 2, 7, K),
            expected_num_trainable_weights=1,
        )

    def test_matches_the_field_definitions(self):
        embedded = embedded_arrays(1)
        layer = FieldTokens(SCHEMA)
        layer(embedded)
        scale = np.random.RandomState(2).normal(size=(2, K)).astype("float32")
        layer.set_weights([scale])
        self.assertEqual(
            layer.field_keys,
            ["cand_item_id", "hist_item_id", "hist_behavior", "user_age", "ctx_hour", "num_price", "num_clicks"],
        )
        expected = np.zeros((3, 2, 7, K), "float32")
        for b in range(3):
            for m in range(2):
                seen = [l for l in range(5) if embedded["hist_visible"][b, m, l]]
                expected[b, m, 0] = embedded["cand_item_id"][b, m]
                for f, key in ((1, "hist_item_id"), (2, "hist_behavior")):
                    expected[b, m, f] = np.mean(embedded[key][b, seen], axis=0) if seen else 0.0
                expected[b, m, 3] = embedded["user_age"][b]
                expected[b, m, 4] = embedded["ctx_hour"][b]
                for j in range(2):
                    expected[b, m, 5 + j] = embedded["num"][b, j] * scale[j]
        self.assertAllClose(layer(embedded), expected, atol=1e-5)
        self.assertAllClose(expected[0, 1, 1:3], np.zeros((2, K)))

    def test_one_embedding_dim(self):
        schema = Schema(features=(Feature("item_id", "cand", 10, 4), Feature("age", "user", 6, 8)))
        with self.assertRaisesRegex(ZooError, "one embedding_dim k .* cand_item_id has 4 and user_age has 8"):
            FieldTokens(schema)
        with self.assertRaisesRegex(ZooError, "at least one cand_ feature"):
            FieldTokens(Schema(features=(Feature("age", "user", 6, 8),)))
        first_order = FieldTokens.first_order_schema(schema)
        self.assertEqual({f.embedding_dim for f in first_order.features}, {1})
        self.assertEqual(FieldTokens(first_order).dim, 1)
