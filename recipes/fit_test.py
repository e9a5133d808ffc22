import math
from unittest import mock

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
        self.assertEqual(optimizer.global_clipnorm, 1.0)  # the deres recipe clips the gradients' global norm
        self.assertIsNone(optimizer.clipnorm)

    def test_large_tables_are_updated_by_rows_unless_the_recipe_says(self):
        """With no table_update, fit updates the tables by rows ("lazy_adam") from SPARSE_TABLE_ROWS rows in the
        largest table and by dense Adam below; a recipe's own choice (or a distribution: dense) wins."""
        import dataclasses

        from zoo.recipes.fit import SPARSE_TABLE_ROWS, table_choice
        from zoo.recipes.sparse_table_adam import SparseTableAdam

        simulator = small_simulator()
        schema = simulator.schema
        big = dataclasses.replace(schema, features=tuple(
            dataclasses.replace(f, vocabulary_size=SPARSE_TABLE_ROWS) if f.name == "item_id" else f
            for f in schema.features))
        train = simulator.dataset(64, batch_size=32, seed=1)
        suan = get_recipe("suan")
        for table_schema, chosen, expected, why in (
                (schema, None, "dense", "largest table 62 rows < 100,000"),
                (big, None, "lazy_adam", "largest table 100,000 rows >= 100,000"),
                (big, "dense", "dense", "chosen"), (schema, "rowwise_adagrad", "rowwise_adagrad", "chosen")):
            with self.subTest(rows=table_schema.feature("cand_item_id").vocabulary_size, chosen=chosen):
                model = zoo.get("din", schema=table_schema, attention_units=(4,), mlp_units=(8,))
                recipe = dataclasses.replace(suan, table_update=chosen)
                self.assertEqual(table_choice(model, recipe), (expected, why))
                fit(model, train, recipe=recipe, epochs=1, verbose=0)
                sparse = isinstance(model.optimizer, SparseTableAdam)
                self.assertEqual(sparse, expected != "dense")
                if sparse:
                    self.assertEqual(model.optimizer.table_update, expected)
        self.assertEqual(table_choice(model, suan, distributed=True), ("dense", "a distributed run"))

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


class ProtocolTest(TestCase):
    """The recipes run the whole protocol: trainers, shared-prefix twins, counted steps, batch sizes."""

    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()

    def test_printing_a_recipe_shows_every_field(self):
        text = str(get_recipe("rest"))
        for field in ("batch_size", "4096", "rest_auxiliary", "seq_weight", "prefix", "grid", "seeds"):
            self.assertIn(field, text)

    def test_the_rest_recipe_trains_rest_with_both_auxiliary_losses(self):
        from zoo.recipes.fit import make_trainer
        from zoo.recipes.rest_training import ReSTTrainer
        from tests.model_configs import SMALL

        rest = zoo.get("rest", schema=self.simulator.schema, **SMALL["rest"])
        trainer = make_trainer(rest, get_recipe("rest"))
        self.assertIsInstance(trainer, ReSTTrainer)
        self.assertEqual((trainer.seq_weight, trainer.align_weight), (0.1, 0.1))
        din = zoo.get("din", schema=self.simulator.schema, **SMALL["din"])
        self.assertIs(make_trainer(din, get_recipe("rest")), din)  # the auxiliary heads are ReST's only
        train = self.simulator.dataset(32, batch_size=16, seed=1)
        history = fit(rest, train, recipe="rest", epochs=1, batch_size=16, verbose=0)
        self.assertIsInstance(history.trainer, ReSTTrainer)
        self.assertTrue(np.isfinite(history.history["loss"]).all())

    def test_shared_prefix_batches_train_a_twin_and_copy_its_weights_back(self):
        import tensorflow as tf

        from tests.model_configs import SMALL

        features, labels = self.simulator.sample(16, seed=2)
        wide = {k: (np.repeat(v, 4, axis=1) if k.startswith("cand") else v) for k, v in features.items()}
        wide["cand_time"] = wide["cand_time"] - np.arange(4)[::-1] * 10  # four samples of one user, in time
        train = tf.data.Dataset.from_tensor_slices((wide, np.repeat(labels, 4, axis=1))).batch(8)
        model = zoo.get("rest", schema=self.simulator.schema, **SMALL["rest"])
        before = [w.copy() for w in model.get_weights()]
        history = fit(model, train, recipe="rest", epochs=1, batch_size=16, verbose=0)
        self.assertEqual(history.trainer.model.schema.num_candidates, 4)  # the twin trained on M = 4 rows
        self.assertEqual(model.schema.num_candidates, 1)
        for got, want in zip(model.get_weights(), history.trainer.model.get_weights()):
            np.testing.assert_array_equal(got, want)
        self.assertFalse(all(np.array_equal(a, b) for a, b in zip(before, model.get_weights())))

    def test_the_deres_schedule_counts_the_steps_of_a_dataset_of_unknown_size(self):
        from tests.model_configs import SMALL

        train = self.simulator.dataset(48, batch_size=16, seed=1).unbatch().batch(16)  # cardinality unknown
        self.assertLess(int(train.cardinality()), 0)
        model = zoo.get("deres_p", schema=self.simulator.schema, **SMALL["deres_p"])
        history = fit(model, train, recipe="deres", epochs=2, batch_size=16, verbose=0)
        schedule = model.optimizer.learning_rate
        self.assertEqual(int(model.optimizer.iterations), 6)  # 3 counted steps x 2 epochs
        self.assertLen(history.history["loss"], 2)
        self.assertTrue(np.isfinite(history.history["loss"]).all())
        del schedule

    def test_steps_per_epoch_repeats_a_finite_dataset(self):
        train = self.simulator.dataset(32, batch_size=16, seed=1)  # 2 batches
        val = self.simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(8,))
        history = fit(model, train, val, recipe="suan", epochs=3, steps_per_epoch=3, batch_size=16, verbose=0)
        self.assertEqual(int(model.optimizer.iterations), 9)
        self.assertTrue(all(a > 0 for a in history.history["auc"]), history.history["auc"])

    def test_keras_gets_the_pipelines_without_tf_datas_autotuning_thread(self):
        train = self.simulator.dataset(32, batch_size=16, seed=1)
        val = self.simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        self.assertIsNot(train.options().autotune.enabled, False)  # the simulator's own pipelines keep it
        seen, original = [], keras.Model.fit

        def spy(trainer, x, validation_data=None, **options):
            seen.extend([x, validation_data])
            return original(trainer, x, validation_data=validation_data, **options)

        model = zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(8,))
        with mock.patch.object(keras.Model, "fit", spy):
            fit(model, train, val, recipe="suan", batch_size=16, verbose=0)
        self.assertEqual([dataset.options().autotune.enabled for dataset in seen], [False, False])

    def test_the_recipes_batch_size_reaches_the_training_batches(self):
        train = self.simulator.dataset(64, batch_size=8, seed=1)
        model = zoo.get("din", schema=self.simulator.schema, attention_units=(4,), mlp_units=(8,))
        fit(model, train, recipe="suan", batch_size=32, verbose=0)
        self.assertEqual(int(model.optimizer.iterations), 2)  # 64 rows in batches of 32, not 8

    def test_the_distill_recipe_trains_student_and_teacher_together(self):
        from zoo.recipes.distillation import OnlineDistillation

        small = {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "dice_momentum": 0.9}
        student = zoo.get("lightsuan", schema=self.simulator.schema, window_size=2, dilation=2, **small)
        train = self.simulator.dataset(32, batch_size=16, seed=1)
        options = dict(get_recipe("distill").trainer_options, teacher_hyperparameters=small)
        history = fit(student, train, recipe="distill", trainer_options=options, batch_size=16, verbose=0)
        self.assertIsInstance(history.trainer, OnlineDistillation)
        self.assertIs(history.trainer.student, student)
        self.assertEqual(history.trainer.teacher.registered_name, "suan")
