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
        from zoo.presets import preset_table
        from zoo.registry import names

        for name in names():
            self.assertIn(name, SMALL, f"add {name} to tests/model_configs.py")
            self.assertTrue(preset_table(name), f"{name} lists no preset in zoo/models/{name}_presets.py")

    def test_the_registry_imports_no_preset_model_or_serving_code(self):
        import ast

        from tests.testing import ROOT

        tree = ast.parse((ROOT / "zoo" / "registry.py").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        self.assertEqual({name for name in imported if name.startswith("zoo")}, {"zoo.errors"})

    def test_a_model_declares_its_export_signatures(self):
        from zoo.registry import entry

        self.assertEqual(entry("din").signatures, ("serving_default",))
        self.assertIn("parallel_candidates", entry("lightsuan").signatures)
        self.assertIn("encode_decode", entry("rest").signatures)

    def test_unknown_name_lists_the_known_ones_and_the_closest(self):
        with self.assertRaisesRegex(ZooError, r"unknown model 'nonexistent' \(known: .*din"):
            zoo.get("nonexistent")
        with self.assertRaisesRegex(ZooError, "did you mean 'din'"):
            zoo.get("dinn")

    def test_get_without_arguments_returns_the_default_preset_with_weights(self):
        from zoo.presets import resolve

        model = zoo.get("din")
        fresh = zoo.get("din", weights=None)
        preset = zoo.load(resolve("din"))
        features, _ = small_simulator(**_preset_simulator()).sample(4)
        self.assertAllClose(model.predict(features, verbose=0), preset.predict(features, verbose=0))
        self.assertFalse(np.allclose(model.predict(features, verbose=0), fresh.predict(features, verbose=0)))

    def test_get_with_schema_or_hyperparameters_builds_a_fresh_model_from_the_class_defaults(self):
        from zoo.models import DIN

        schema = small_simulator().schema
        model = zoo.get("din", schema=schema, **SMALL["din"])
        self.assertEqual(model.schema, schema)
        self.assertEqual(list(model.mlp_units), list(SMALL["din"]["mlp_units"]))
        default = zoo.get("din", schema=schema)  # the shipped preset has mlp_units (64, 32)
        self.assertEqual(tuple(default.mlp_units), DIN.__init__.__defaults__[1])
        with self.assertRaisesRegex(ZooError, "din has no hyperparameter depth"):
            zoo.get("din", depth=3)
        with self.assertRaisesRegex(ZooError, "hyperparameters build a fresh din from its class defaults: pass schema"):
            zoo.get("din", mlp_units=(8,))
        with self.assertRaisesRegex(ZooError, "pass one or the other"):
            zoo.get("lightsuan", preset="distilsuan", schema=schema)

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
    from zoo.presets import read_metadata, resolve

    config = read_metadata(resolve("din"))["training_data"]["simulator"]
    return {k: config[k] for k in ("num_users", "num_items", "num_categories", "sequence_length")}
