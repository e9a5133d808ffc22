import math

import keras
import numpy as np

from tests.testing import TestCase, small_simulator
import zoo
from zoo.errors import ZooError
from zoo.recipes import RECIPES, fit, get_recipe, model_overrides
from zoo.recipes.fit import learning_rate_schedule


class FitTest(TestCase):
    def test_recipes_are_printable_overridable_data(self):
        recipe = get_recipe("deres", epochs=2)
        self.assertEqual(recipe.epochs, 2)
        self.assertEqual(RECIPES["deres"].epochs, 20)
        self.assertIn("clipnorm=1.0", repr(recipe))
        with self.assertRaisesRegex(ZooError, "unknown recipe 'sauna'"):
            get_recipe("sauna")
        with self.assertRaisesRegex(ZooError, "recipe has no field colour"):
            get_recipe("suan", colour=1)

    def test_warmup_cosine_matches_its_formula(self):
        recipe = get_recipe("deres")
        total, peak = 200, recipe.learning_rate
        schedule = learning_rate_schedule(recipe, total)
        warmup = 10  # 5 % of 200
        for step in (0, 3, 10, 57, 120, 199):
            if step < warmup:
                expected = peak * step / warmup
            else:
                expected = peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
            self.assertAlmostEqual(float(keras.ops.convert_to_numpy(schedule(step))), expected, places=7)
        with self.assertRaisesRegex(ZooError, "number of steps is unknown"):
            learning_rate_schedule(recipe, None)

    def test_each_recipe_trains_a_few_steps_on_the_simulator(self):
        simulator = small_simulator()
        train = simulator.dataset(64, batch_size=16, seed=1)
        val = simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        for name in ("suan", "rest", "deres"):
            model = zoo.get("din", schema=simulator.schema, attention_units=(4,), mlp_units=(8,))
            history = fit(model, train, val, recipe=name, epochs=2, verbose=0)
            self.assertEqual(len(history.history["val_auc"]), 2, name)
            self.assertTrue(np.isfinite(history.history["loss"]).all(), name)
        optimizer = model.optimizer
        self.assertEqual(optimizer.clipnorm, 1.0)  # the deres recipe clips gradients

    def test_a_recipes_model_overrides_apply(self):
        from zoo.models import DIN, DeResP

        self.assertEqual(model_overrides("deres", DeResP), {"dropout": 0.1})  # what `python -m zoo fit` builds with
        self.assertEqual(model_overrides("deres", DIN), {})  # DIN has no dropout hyperparameter
        simulator = small_simulator()
        small = dict(num_layers=2, width=8, num_heads=2, num_blocks=2)
        self.assertEqual(zoo.get("deres_p", schema=simulator.schema, **small).dropout, 0.1)
        other = zoo.get("deres_p", schema=simulator.schema, dropout=0.0, **small)
        train = simulator.dataset(32, batch_size=16, seed=1)
        with self.assertRaisesRegex(ZooError, "recipe 'deres' trains with dropout=0.1 but this deres_p has dropout=0.0"):
            fit(other, train, recipe="deres", steps_per_epoch=2, epochs=1, verbose=0)
        history = fit(other, train, recipe="deres", steps_per_epoch=2, epochs=1, verbose=0, model_overrides={})
        self.assertTrue(np.isfinite(history.history["loss"]).all())
        # A training wrapper is checked through the zoo model it trains; a plain Keras model has nothing to check.
        import types

        import keras

        from zoo.recipes.fit import check_model_overrides

        with self.assertRaisesRegex(ZooError, "this deres_p has dropout=0.0"):
            check_model_overrides(types.SimpleNamespace(student=other), get_recipe("deres"))
        check_model_overrides(keras.Sequential([keras.layers.Dense(1)]), get_recipe("deres"))

    def test_backup_and_checkpoint_callbacks(self):
        simulator = small_simulator()
        train = simulator.dataset(32, batch_size=16, seed=1)
        val = simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        model = zoo.get("din", schema=simulator.schema, attention_units=(4,), mlp_units=(8,))
        directory = self.get_temp_dir()
        fit(model, train, val, recipe="suan", backup_dir=f"{directory}/backup",
            checkpoint_path=f"{directory}/best.weights.h5", verbose=0)
        import os

        self.assertTrue(os.path.exists(f"{directory}/best.weights.h5"))
