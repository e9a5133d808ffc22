import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError


class RegistryTest(TestCase):
    def test_list_models_describes_every_model(self):
        rows = {row["name"]: row for row in zoo.list_models()}
        self.assertIn("din", rows)
        for row in rows.values():
            self.assertTrue(row["description"] and row["paper"])
        self.assertGreater(rows["din"]["parameters"], 0)

    def test_every_registered_model_has_a_small_test_config_and_a_preset(self):
        from zoo.registry import names, shipped_preset

        for name in names():
            self.assertIn(name, SMALL, f"add {name} to tests/model_configs.py")
            self.assertIsNotNone(shipped_preset(name), f"{name} ships no preset in saved/")

    def test_unknown_name_lists_the_known_ones_and_the_closest(self):
        with self.assertRaisesRegex(ZooError, r"unknown model 'nonexistent' \(known: .*din"):
            zoo.get("nonexistent")
        with self.assertRaisesRegex(ZooError, "did you mean 'din'"):
            zoo.get("dinn")

    def test_get_without_arguments_returns_the_shipped_preset_with_weights(self):
        from zoo.registry import shipped_preset

        model = zoo.get("din")
        fresh = zoo.get("din", weights=None)
        preset = zoo.load(shipped_preset("din"))
        features, _ = small_simulator(**_preset_simulator()).sample(4)
        self.assertAllClose(model.predict(features, verbose=0), preset.predict(features, verbose=0))
        self.assertFalse(np.allclose(model.predict(features, verbose=0), fresh.predict(features, verbose=0)))

    def test_get_with_schema_or_hyperparameters_builds_a_fresh_model(self):
        schema = small_simulator().schema
        model = zoo.get("din", schema=schema, **SMALL["din"])
        self.assertEqual(model.schema, schema)
        self.assertEqual(list(model.mlp_units), list(SMALL["din"]["mlp_units"]))
        with self.assertRaisesRegex(ZooError, "din has no hyperparameter depth"):
            zoo.get("din", depth=3)

    def test_get_loads_an_explicit_weights_file(self):
        schema = small_simulator().schema
        model = zoo.get("din", schema=schema, **SMALL["din"])
        path = f"{self.get_temp_dir()}/w.weights.h5"
        model.save_weights(path)
        again = zoo.get("din", schema=schema, weights=path, **SMALL["din"])
        features, _ = small_simulator().sample(3)
        self.assertAllClose(again.predict(features, verbose=0), model.predict(features, verbose=0))
        other = zoo.get("din", schema=schema, attention_units=(4,), mlp_units=(16,))
        other.save_weights(path)
        with self.assertRaisesRegex(ZooError, "weights do not fit the config"):
            zoo.get("din", schema=schema, weights=path, **SMALL["din"])


def _preset_simulator():
    """The simulator settings the shipped din preset was trained on (from its metadata)."""
    from zoo.presets import read_metadata
    from zoo.registry import shipped_preset

    config = read_metadata(shipped_preset("din"))["training_data"]["simulator"]
    return {k: config[k] for k in ("num_users", "num_items", "num_categories", "sequence_length")}
