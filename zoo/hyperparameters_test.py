import inspect
import json

import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import ROOT, TestCase, run_cli, small_simulator
from zoo import hyperparameters, registry
from zoo.errors import ZooError


def defaults(model_name):
    parameters = inspect.signature(registry.entry(model_name).cls.__init__).parameters
    return {name: p.default for name, p in parameters.items()
            if name not in ("self", "schema") and p.default is not inspect.Parameter.empty}


class HyperparametersTest(TestCase):
    def test_every_hyperparameter_has_a_rule_its_default_and_the_presets_keep(self):
        for model_name in registry.names():
            names = set(registry.entry(model_name).cls.hyperparameter_names()) - {"schema"}
            self.assertEqual(sorted(names - set(hyperparameters.RULES)), [], model_name)
            required = registry.entry(model_name).cls.required
            hyperparameters.declared(model_name, defaults(model_name), required)
            hyperparameters.declared(model_name, SMALL[model_name], required)
        for path in sorted((ROOT / "saved").glob("*/config.json")):
            config = json.loads(path.read_text())
            hyperparameters.declared(config["model"], config["config"], registry.entry(config["model"]).cls.required)

    def test_a_bad_value_is_one_line_naming_the_key_for_every_model_alike(self):
        """Text where a number belongs (never cast), booleans, 8.0 for an integer, NaN, infinities and
        values out of range are refused before anything is built, for every model and hyperparameter."""
        schema = small_simulator().schema
        for model_name in registry.names():
            for name, value in defaults(model_name).items():
                rule = hyperparameters.RULES[name]
                bad = ["8", True] if rule.kind != "bool" else ["yes", 1]
                if rule.kind in ("int", "number"):
                    bad += [float("nan"), float("inf"), -1]
                if rule.kind == "int":
                    bad.append(8.0)
                if rule.kind == "units":
                    bad += [[8, "8"], [-1], 8]
                if rule.kind == "text":
                    bad = [8, None]
                for value in bad:
                    with self.subTest(model=model_name, hyperparameter=name, value=value):
                        with self.assertRaises(ZooError) as caught:
                            zoo.get(model_name, schema=schema, **{name: value})
                        message = str(caught.exception)
                        self.assertEqual(len(message.splitlines()), 1)
                        self.assertTrue(message.startswith(f"{model_name} hyperparameters: {name} is "), message)
                        self.assertIn(repr(value), message)  # (a list's bad item first: "is '8' (text) (in [8, '8'])")

    def test_the_messages(self):
        schema = small_simulator().schema
        cases = [
            ("din", {"dice_momentum": float("nan")},
             "din hyperparameters: dice_momentum is nan; it must be a finite number in [0, 1)"),
            ("lightsuan", {"window_size": "8"},
             "lightsuan hyperparameters: window_size is '8' (text); it must be an integer >= 1 or None"),
            ("suan", {"sample_rate": 0},
             "suan hyperparameters: sample_rate is 0; it must be a finite number in (0, 1]"),
            ("rest", {"time_granularities": [60, -1]},
             "rest hyperparameters: time_granularities is -1 (in [60, -1]); it must be a list of integers >= 0 or None"),
            ("din", {"mlp_units": (64, 0)},
             "din hyperparameters: mlp_units is 0 (in (64, 0)); it must be a list of integers >= 1"),
            ("lightsuan", {"window": 8}, "lightsuan has no hyperparameter window (hyperparameters: schema, "),
            ("lightsuan", {"window": 8}, "; did you mean 'window_size'?"),
        ]
        for model_name, values, message in cases:
            with self.subTest(values=values):
                with self.assertRaises(ZooError) as caught:
                    zoo.get(model_name, schema=schema, **values)
                self.assertIn(message, str(caught.exception))
        self.assertEqual(zoo.get("lightsuan", schema=schema, window_size=np.int64(3), mlp_units=[8]).window_size, 3)

    def test_a_preset_config_is_checked_before_building(self):
        import hashlib
        import tempfile
        from pathlib import Path

        cases = (({"dice_momentum": "0.9"}, "dice_momentum is '0.9' (text); it must be a finite number in [0, 1)"),
                 ({"mlp_unit": [8]}, "unknown hyperparameter(s) mlp_unit; did you mean 'mlp_units'?"))
        for change, message in cases:
            with self.subTest(change=change), tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp) / "preset"
                zoo.save(zoo.get("din", schema=small_simulator().schema, **SMALL["din"]), folder)
                config = json.loads((folder / "config.json").read_text())
                config["config"].update(change)
                (folder / "config.json").write_text(json.dumps(config))
                metadata = json.loads((folder / "metadata.json").read_text())
                metadata["config_sha256"] = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
                (folder / "metadata.json").write_text(json.dumps(metadata))
                with self.assertRaises(ZooError) as caught:
                    zoo.load(folder)
                self.assertTrue(str(caught.exception).startswith(f"{folder / 'config.json'}: "))
                self.assertIn(message, str(caught.exception))

    def test_set_on_the_command_line(self):
        """`--set` values are checked before the model is built (nothing is trained), in one line naming
        the key; an unknown key offers the closest one."""
        cases = [
            (("fit", "din", "--rows", "10", "--set", "dice_momentum=nan"),
             "error: din hyperparameters: dice_momentum is nan; it must be a finite number in [0, 1)"),
            (("fit", "lightsuan", "--rows", "10", "--set", "window_size=eight"),
             "error: lightsuan hyperparameters: window_size is 'eight' (text); it must be an integer >= 1 or None"),
            (("fit", "lightsuan", "--rows", "10", "--set", "window=8"), "did you mean 'window_size'?"),
            (("fit", "din", "--rows", "10", "--set", "=3"), "bad override '=3': the key before '=' is empty"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                status, out, err = run_cli(*argv)
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(message, err)
                self.assertNotIn("Epoch", out)
