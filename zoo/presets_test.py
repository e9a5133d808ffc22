import json
from pathlib import Path

import keras

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.presets import CONFIG, METADATA, WEIGHTS


class PresetsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.features, _ = self.simulator.sample(6)
        self.model = zoo.get("din", schema=self.simulator.schema, **SMALL["din"])
        self.dir = Path(self.get_temp_dir()) / "preset"

    def test_round_trip_writes_readable_files(self):
        self.model.save_to_preset(self.dir, metadata={"metrics": {"auc": 0.7}})
        config = json.loads((self.dir / CONFIG).read_text())
        self.assertEqual(config["model"], "din")
        self.assertEqual(config["config"]["schema"], self.simulator.schema.to_dict())
        metadata = json.loads((self.dir / METADATA).read_text())
        for key in ("zoo_version", "keras_version", "backend", "date", "parameters", "weights_sha256"):
            self.assertIn(key, metadata)
        self.assertEqual(metadata["metrics"], {"auc": 0.7})
        restored = zoo.load(self.dir)
        self.assertAllClose(restored.predict(self.features, verbose=0), self.model.predict(self.features, verbose=0))

    def test_config_only_preset(self):
        zoo.save(self.model, self.dir, weights=False)
        self.assertFalse((self.dir / WEIGHTS).exists())
        self.assertEqual(zoo.load(self.dir).count_params(), self.model.count_params())

    def test_damaged_presets_give_one_line_errors_naming_the_file(self):
        def damaged(change):
            zoo.save(self.model, self.dir)
            change()
            with self.assertRaises(ZooError) as caught:
                zoo.load(self.dir)
            message = str(caught.exception)
            self.assertNotIn("\n", message)
            return message

        for name in (CONFIG, METADATA, WEIGHTS):
            path = self.dir / name
            message = damaged(lambda: path.unlink())
            self.assertRegex(message, f"{name}: missing")
            message = damaged(lambda: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]))
            self.assertIn(name, message)
            message = damaged(lambda: path.write_bytes(b"\x00garbage\xff" * 50))
            self.assertIn(name, message)

        def rewrite_config(config):
            """An edited config.json whose checksum metadata.json follows (to reach the deeper checks)."""
            (self.dir / CONFIG).write_text(json.dumps(config))
            metadata = json.loads((self.dir / METADATA).read_text())
            metadata["config_sha256"] = __import__("zoo.presets").presets.file_sha256(self.dir / CONFIG)
            (self.dir / METADATA).write_text(json.dumps(metadata))

        def rename_model():
            config = json.loads((self.dir / CONFIG).read_text())
            config["model"] = "dinx"
            rewrite_config(config)

        self.assertRegex(damaged(rename_model), "config.json: unknown model 'dinx'.*did you mean 'din'")

        def bad_hyperparameter():
            config = json.loads((self.dir / CONFIG).read_text())
            config["config"]["colour"] = "red"
            rewrite_config(config)

        self.assertRegex(damaged(bad_hyperparameter), "config.json: invalid configuration for 'din'")

        def code_instead_of_config():
            rewrite_config({"model": "din", "config": {"schema": "__import__('os')"}})

        self.assertRegex(damaged(code_instead_of_config), "config.json: a schema is a JSON object")

        def edited_hyperparameter_keeping_the_shapes():
            config = json.loads((self.dir / CONFIG).read_text())
            config["config"]["dice_momentum"] = 0.5
            (self.dir / CONFIG).write_text(json.dumps(config))

        self.assertRegex(damaged(edited_hyperparameter_keeping_the_shapes),
                         "config.json: sha256 does not match .*metadata.json \\(edited after saving\\)")

        def deeply_nested():
            (self.dir / CONFIG).write_text("[" * 100_000 + "]" * 100_000)
            metadata = json.loads((self.dir / METADATA).read_text())
            metadata["config_sha256"] = __import__("zoo.presets").presets.file_sha256(self.dir / CONFIG)
            (self.dir / METADATA).write_text(json.dumps(metadata))

        self.assertRegex(damaged(deeply_nested), "config.json: not valid JSON")

    def test_a_parameter_count_other_than_the_recorded_one(self):
        zoo.save(self.model, self.dir)
        metadata = json.loads((self.dir / METADATA).read_text())
        metadata["parameters"] += 1
        (self.dir / METADATA).write_text(json.dumps(metadata))
        message = "config.json: builds a model of .* parameters but .*metadata.json records"
        with self.assertRaisesRegex(ZooError, message):
            zoo.load(self.dir)

    def _replace_weights(self, model):
        """The preset's weights file becomes `model`'s, with a checksum metadata.json follows."""
        model.save_weights(str(self.dir / WEIGHTS))
        metadata = json.loads((self.dir / METADATA).read_text())
        metadata["weights_sha256"] = __import__("zoo.presets").presets.file_sha256(self.dir / WEIGHTS)
        (self.dir / METADATA).write_text(json.dumps(metadata))

    def test_weights_that_do_not_fit_the_config(self):
        zoo.save(self.model, self.dir)
        self._replace_weights(zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(16,)))
        message = r"model.weights.h5: weights do not fit the config: 3 of another shape \(layers/target_attention/"
        with self.assertRaisesRegex(ZooError, message):
            zoo.load(self.dir)

    def test_every_stored_weight_is_read_and_every_model_weight_stored(self):
        """A 2-layer SUAN's weights under a 1-layer LightSUAN's config, every checksum recomputed: Keras
        alone loads them and ignores the second layer's entries; the preset check refuses, as it
        refuses the reverse (weights missing), naming counts and the first names; the model is untouched."""
        schema = self.simulator.schema
        two = zoo.get("suan", schema=schema, num_layers=2, num_heads=2, mlp_units=(8,))
        one = zoo.get("lightsuan", schema=schema, **SMALL["lightsuan"])
        self.assertEqual((len(two.weights), len(one.weights)), (58, 41))
        zoo.save(one, self.dir)
        self._replace_weights(two)
        before = [w.numpy() if hasattr(w, "numpy") else w for w in one.get_weights()]
        message = (r"model.weights.h5: weights do not fit the config: 17 stored weight\(s\) the model has no "
                   r"place for \(layers/suan_encoder/blocks/uab_1/\S+, \S+, \S+, \.\.\.\)$")
        with self.assertRaisesRegex(ZooError, message):
            zoo.load(self.dir)
        with self.assertRaisesRegex(ZooError, message):
            zoo.get("lightsuan", schema=schema, weights=self.dir / WEIGHTS, **SMALL["lightsuan"])
        with self.assertRaisesRegex(ZooError, "17 stored weight"):
            __import__("zoo.presets").presets.load_weights_file(one, self.dir / WEIGHTS)
        for got, want in zip(one.get_weights(), before):
            self.assertAllClose(got, want, atol=0)

        zoo.save(two, self.dir)
        self._replace_weights(one)
        with self.assertRaisesRegex(ZooError, r"weights do not fit the config: 17 model weight\(s\) not stored"):
            zoo.load(self.dir)

    def test_loading_a_preset_writes_no_file(self):
        """The weights check compares the file with Keras' writer's entries made in memory: no scratch copy
        of the weights (a write that fails there ended a process in a segmentation fault)."""
        import tempfile
        from unittest import mock

        refuse = AssertionError("loading a preset wrote a file")
        with mock.patch.object(keras.Model, "save_weights", side_effect=refuse), \
                mock.patch.object(tempfile, "TemporaryDirectory", side_effect=refuse), \
                mock.patch.object(tempfile, "mkstemp", side_effect=refuse):
            model = zoo.load(zoo.presets.resolve("din"))
        self.assertEqual(model.count_params(), zoo.presets.read_metadata(zoo.presets.resolve("din"))["parameters"])

    def test_a_weights_write_that_fails_is_one_line_and_leaves_no_file(self):
        """A write past the disk (here: a 64 KB file size limit, EFBIG) while saving a preset or fit's backup
        is one line naming the file, in a process that ends normally (HDF5 writing the file itself had left
        it open and broken: a segmentation fault at exit)."""
        import os
        import resource
        import subprocess
        import sys

        def limited():
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

        folder = Path(self.get_temp_dir())
        code = ("import zoo\nfrom zoo.presets import write_weights\nfrom tests.testing import small_simulator\n"
                "model = zoo.get('din', schema=small_simulator().schema, mlp_units=(512, 256))\n"
                f"write_weights(model, {str(folder / 'w.weights.h5')!r})\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limited,
                              env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
        self.assertEqual(done.returncode, 1, done.stderr[-2000:])  # an OSError, not a signal
        self.assertTrue(done.stderr.strip().splitlines()[-1].startswith(
            f"OSError: [Errno 27] File too large: '{folder / 'w.weights.h5'}'"), done.stderr[-500:])
        self.assertEqual(sorted(os.listdir(folder)), [])  # no partial file
        run = folder / "run"
        done = subprocess.run([sys.executable, "-m", "zoo", "fit", "din", "--rows", "512", "--epochs", "2",
                               "--out", str(run)], capture_output=True, text=True, preexec_fn=limited)
        self.assertEqual(done.returncode, 2, done.stderr[-2000:])
        self.assertEqual(done.stderr.strip().splitlines()[-1],  # (JAX may warn first that its own cache
                         f"error: {run / 'backup' / 'latest.weights.h5'}: File too large")  # write failed too)
        self.assertNotIn("Traceback", done.stderr)

    def test_missing_directory_and_unregistered_models(self):
        with self.assertRaisesRegex(ZooError, "no such preset directory"):
            zoo.load(self.dir / "nowhere")
        import keras

        with self.assertRaisesRegex(ZooError, "not a registered zoo model"):
            zoo.save(keras.Sequential([keras.layers.Dense(1)]), self.dir)


class PresetResolutionTest(TestCase):
    """One resolver: a path, a model name (its default preset, or preset=...), or a preset name."""

    def test_list_presets_reads_each_table_and_its_metadata(self):
        from zoo.presets import preset_table

        rows = {row["preset"]: row for row in zoo.list_presets()}
        self.assertEqual(rows["distilsuan"]["model"], "lightsuan")
        self.assertTrue(rows["lightsuan"]["default"])
        self.assertFalse(rows["distilsuan"]["default"])
        for row in rows.values():
            self.assertTrue(row["description"])
            self.assertGreater(row["parameters"], 0, row["preset"])
            self.assertIn("test_auc", row["metrics"])
            self.assertTrue(row["training_data"])
            config = json.loads((Path(row["path"]) / CONFIG).read_text())
            self.assertEqual(config["model"], row["model"], f"{row['path']} is not a {row['model']} preset")
            self.assertIn(row["preset"], preset_table(row["model"]))
        models = {row["name"]: row for row in zoo.list_models()}
        self.assertEqual(models["lightsuan"]["presets"], ["lightsuan", "distilsuan", "distilsuan_userbehavior"])
        self.assertEqual(models["lightsuan"]["parameters"], rows["lightsuan"]["parameters"])

    def test_names_resolve_one_way(self):
        from zoo.presets import resolve

        self.assertEqual(resolve("lightsuan").name, "lightsuan")  # the model's default preset
        self.assertEqual(resolve("distilsuan"), resolve("lightsuan", preset="distilsuan"))
        self.assertEqual(resolve(str(resolve("din"))), resolve("din"))  # a folder stays a folder
        with self.assertRaisesRegex(ZooError, r"preset 'nope' is not a shipped preset \(din presets: din\)"):
            resolve("din", preset="nope")
        with self.assertRaisesRegex(ZooError, r"preset 'distilsuan' is a lightsuan preset \(din presets: din\)"):
            resolve("din", preset="distilsuan")
        with self.assertRaisesRegex(ZooError, "unknown model 'distilsaun'.*did you mean"):
            resolve("distilsaun")

    def test_a_folder_named_like_a_shipped_preset_is_not_shadowed(self):
        import os

        from zoo.presets import resolve

        here = os.getcwd()
        os.chdir(self.get_temp_dir())
        self.addCleanup(os.chdir, here)
        zoo.save(zoo.get("din", schema=small_simulator().schema, **SMALL["din"]), "./din")
        with self.assertRaisesRegex(ZooError, "'din' names a shipped preset and a folder here: write ./din"):
            zoo.load("din")
        self.assertEqual(resolve("./din"), Path("./din"))

    def test_get_loads_another_preset_by_name(self):
        distilled = zoo.get("lightsuan", preset="distilsuan")
        self.assertEqual(distilled.registered_name, "lightsuan")
        self.assertEqual(zoo.get("distilsuan").count_params(), distilled.count_params())
