from unittest import mock

import keras
import numpy as np
from keras import ops

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.backend_kernels import gather_rows
from zoo.errors import ZooError
from zoo.recipes import sparse_table_adam
from zoo.recipes.sparse_table_adam import SparseTableAdam

V, D, B = 12, 3, 2
BATCHES = [np.array([[1, 2, 2], [5, 1, 7]], "int32"), np.array([[2, 9, 9], [2, 2, 1]], "int32")]


class LookupModel(keras.Model):
    """s_b = sum_j <e[ids_bj], u>: the loss mean_b s_b has d/de_r = count_r / B * u and d/du = mean_b sum_j e[ids_bj]."""

    def __init__(self, table, u, train_u):
        super().__init__()
        self.table = keras.layers.Embedding(V, D, embeddings_initializer=keras.initializers.Constant(table))
        self.table.build(None)
        self.u = self.add_weight(shape=(D,), initializer=keras.initializers.Constant(u), trainable=train_u, name="u")

    def call(self, ids):
        return ops.sum(ops.sum(gather_rows(self.table, ids) * self.u, axis=-1), axis=-1, keepdims=True)


def _mean_prediction(y_true, y_pred):
    return ops.mean(y_pred)


def _gradients(table, u, ids):
    counts = np.bincount(ids.reshape(-1), minlength=V).astype(np.float64)
    return counts[:, None] / B * u[None, :], table[ids].sum(axis=(0, 1)) / B


def _reference(rule, table, u, lr=0.05, b1=0.9, b2=0.999, eps=1e-7, table_eps=1e-8):
    """NumPy: Adam on u; the table's rows with a nonzero gradient by `rule`, the others untouched."""
    table, u = table.astype(np.float64).copy(), u.astype(np.float64).copy()
    m, v, a = np.zeros_like(table), np.zeros_like(table), np.zeros(V)
    mu, vu = np.zeros_like(u), np.zeros_like(u)
    for t, ids in enumerate(BATCHES, start=1):
        g, gu = _gradients(table, u, ids)
        alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        rows = np.flatnonzero(np.any(g != 0, axis=1))
        if rule == "lazy_adam":
            m[rows] = b1 * m[rows] + (1 - b1) * g[rows]
            v[rows] = b2 * v[rows] + (1 - b2) * g[rows] ** 2
            table[rows] -= alpha * m[rows] / (np.sqrt(v[rows]) + eps)
        elif rule == "rowwise_adagrad":
            a[rows] += np.mean(g[rows] ** 2, axis=1)
            table[rows] -= lr * g[rows] / (np.sqrt(a[rows])[:, None] + table_eps)
        else:
            table[rows] -= lr * g[rows]
        mu, vu = b1 * mu + (1 - b1) * gu, b2 * vu + (1 - b2) * gu**2
        u -= alpha * mu / (np.sqrt(vu) + eps)
    return table, u, {"lazy_adam": (m, v), "rowwise_adagrad": (a,), "sgd": ()}[rule]


class SparseTableAdamTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.table = rng.normal(size=(V, D)).astype("float32")
        self.u = rng.normal(size=(D,)).astype("float32")

    def trained(self, optimizer, train_u=True):
        model = LookupModel(self.table, self.u, train_u)
        model.compile(optimizer=optimizer, loss=_mean_prediction)
        for ids in BATCHES:
            model.train_on_batch(ids, np.zeros((B, 1), "float32"))
        return model

    def test_each_rule_matches_its_numpy_reference(self):
        for rule in sparse_table_adam.TABLE_UPDATES:
            found = []
            original = sparse_table_adam._sparse_rows

            def spy(gradient):
                rows = original(gradient)
                found.append(rows is not None)
                return rows

            optimizer = SparseTableAdam(learning_rate=0.05, table_update=rule)
            with mock.patch.object(sparse_table_adam, "_sparse_rows", spy):
                model = self.trained(optimizer)
            # TensorFlow's and torch's table gradients arrive sparse (the batch's rows); JAX's dense
            self.assertEqual(set(found), {keras.backend.backend() != "jax"}, rule)
            table, u, state = _reference(rule, self.table, self.u)
            self.assertAllClose(to_numpy(model.table.embeddings), table, atol=1e-5, msg=rule)
            self.assertAllClose(to_numpy(model.u), u, atol=1e-5, msg=rule)
            index = optimizer._get_variable_index(model.table.embeddings)
            slots = {"lazy_adam": (optimizer._momentums, optimizer._velocities),
                     "rowwise_adagrad": (optimizer._accumulators,), "sgd": ()}[rule]
            for slot, expected in zip(slots, state):
                self.assertAllClose(to_numpy(slot[index]), expected, atol=1e-6, msg=rule)
            untouched = sorted(set(range(V)) - set(np.concatenate(BATCHES).reshape(-1)))
            self.assertAllClose(to_numpy(model.table.embeddings)[untouched], self.table[untouched], atol=0)
            # a table's rule keeps only the state it reads: row-wise Adagrad one value a row, no moments
            accumulator = optimizer._accumulators[index]
            self.assertEqual(None if accumulator is None else tuple(accumulator.shape),
                             (V,) if rule == "rowwise_adagrad" else None)
            self.assertEqual(optimizer._momentums[index] is not None, rule == "lazy_adam")
            self.assertEqual(sum(int(np.prod(v.shape)) for v in optimizer.variables),
                             2 + 2 * D + {"lazy_adam": 2 * V * D, "rowwise_adagrad": V, "sgd": 0}[rule])

    def test_sgd_rule_equals_dense_sgd(self):
        sparse = self.trained(SparseTableAdam(learning_rate=0.05, table_update="sgd"), train_u=False)
        dense = self.trained(keras.optimizers.SGD(learning_rate=0.05), train_u=False)
        self.assertAllClose(to_numpy(sparse.table.embeddings), to_numpy(dense.table.embeddings), atol=1e-6)

    def test_config_round_trip_and_refusals(self):
        optimizer = SparseTableAdam(learning_rate=0.01, table_update="rowwise_adagrad", table_learning_rate=0.1)
        again = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
        self.assertIsInstance(again, SparseTableAdam)
        self.assertEqual((again.table_update, again.table_learning_rate), ("rowwise_adagrad", 0.1))
        with self.assertRaisesRegex(ZooError, "^table_update is 'adam'; it must be one of lazy_adam, "):
            SparseTableAdam(table_update="adam")
        with self.assertRaisesRegex(ZooError, "^SparseTableAdam: amsgrad is not supported"):
            SparseTableAdam(amsgrad=True)
        with self.assertRaisesRegex(ZooError, "^SparseTableAdam: gradient_accumulation_steps is not supported"):
            SparseTableAdam(gradient_accumulation_steps=2)
        # decoupled weight decay skips the tables, and what the caller excluded stays excluded
        model = LookupModel(self.table, self.u, True)
        decayed = SparseTableAdam(weight_decay=0.1)
        decayed.exclude_from_weight_decay(var_names=["u"])
        decayed.build([model.table.embeddings, model.u])
        self.assertFalse(decayed._use_weight_decay(model.table.embeddings))
        self.assertFalse(decayed._use_weight_decay(model.u))

    def test_clipping_is_the_dense_gradients(self):
        """Keras' clipping of the table's gradient summed per row, i.e. of the dense gradient (row 2's gradient
        sums three lookups: it is clipped after summing; TensorFlow's dense optimizers clip an IndexedSlices
        before, by the norm of its unsummed values)."""
        for name, c in (("clipnorm", 0.3), ("global_clipnorm", 0.3), ("clipvalue", 0.1)):
            model = self.trained(SparseTableAdam(learning_rate=0.05, table_update="sgd", **{name: c}), train_u=False)
            table = self.table.astype(np.float64).copy()
            for ids in BATCHES:
                g, _ = _gradients(table, self.u, ids)
                norm = np.sqrt(np.sum(g**2))
                table -= 0.05 * (np.clip(g, -c, c) if name == "clipvalue" else g * c / max(norm, c))
            self.assertGreater(np.abs(table - self.table).max(), 1e-3)
            self.assertAllClose(to_numpy(model.table.embeddings), table, atol=1e-6, msg=name)

    def assert_only_seen_rows_change(self, models, train, tables, schema):
        seen = {}
        for features, _ in train.as_numpy_iterator():
            for feature in schema.features:
                if feature.group != "num":
                    table = feature.name if feature.group in ("hist", "cand") else feature.key
                    seen.setdefault(table, set()).update(np.asarray(features[feature.key]).reshape(-1).tolist())
        weights = {w.path: w for model in models for w in model.weights}
        for path, before in tables.items():
            name = path.split("/")[-2][len("embedding_"):]
            changed = set(np.flatnonzero(np.any(to_numpy(weights[path]) != before, axis=1)).tolist())
            self.assertLessEqual(changed, seen[name], path)
        self.assertTrue(any(np.any(to_numpy(weights[p]) != b) for p, b in tables.items()))

    def test_recipes_train_every_trainer_with_it(self):
        """zoo.recipes.fit with table_update, plain, with ReST's auxiliary losses (and AdamW's decay, which
        skips the tables) and with online distillation: each model's tables change only at rows its batches
        hold (a run killed mid-epoch resumes with the optimizer's rows: recipes/resume_test.py)."""
        simulator = small_simulator()
        train = simulator.dataset(64, batch_size=16, seed=1)
        small = {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "dice_momentum": 0.9}
        for recipe, name, hyperparameters in (("suan", "deepfm", SMALL["deepfm"]), ("rest", "rest", SMALL["rest"]),
                                              ("distill", "lightsuan", dict(small, window_size=2, dilation=2))):
            keras.utils.set_random_seed(0)
            model = zoo.get(name, schema=simulator.schema, **hyperparameters)
            options = {"trainer_options": dict(zoo.recipes.get_recipe("distill").trainer_options,
                                               teacher_hyperparameters=small)} if recipe == "distill" else {}
            before = {w.path: to_numpy(w).copy() for w in model.weights if w.name == "embeddings"}
            history = zoo.recipes.fit(model, train, recipe=recipe, epochs=1, batch_size=16, table_update="lazy_adam",
                                      verbose=0, **options)
            self.assertIsInstance(history.trainer.optimizer, SparseTableAdam, recipe)
            self.assertTrue(np.isfinite(history.history["loss"]).all(), recipe)
            self.assertTrue(history.trainer.optimizer._tables, recipe)
            with self.subTest(recipe=recipe):
                self.assert_only_seen_rows_change([model], train, before, simulator.schema)

    def test_jax_row_steps_equal_the_rule_over_every_row(self):
        """Under JAX the models' train step differentiates only the batch's rows of each table
        (zoo.backend_kernels.jax_rows_train_step); its weights equal those of the same rule applied to the
        dense gradient over every row (checked against NumPy above) after several steps."""
        if keras.backend.backend() != "jax":
            self.skipTest("the row step is JAX's; TensorFlow's and torch's gradients arrive sparse (above)")
        import zoo.backend_kernels as backend_kernels

        simulator = small_simulator()
        # batches of 4: the item (62 rows) and user (44) tables hold more rows than a batch looks up, so they
        # take the row step; the category table (8 rows) does not, and is updated whole
        train = simulator.dataset(64, batch_size=4, seed=1, shuffle=False)  # the same steps in both runs
        plans = []
        planned = backend_kernels.row_plan

        def recorded(model, x):
            plan = planned(model, x)
            plans.append(sorted(model.trainable_variables[i].path for i in plan))
            return plan

        results = {}
        for row_steps in (True, False):
            keras.utils.set_random_seed(0)
            model = zoo.get("deepfm", schema=simulator.schema, **SMALL["deepfm"])
            calls = []
            original = backend_kernels.jax_rows_train_step

            def counted(*args, **kwargs):
                calls.append(1)
                return original(*args, **kwargs)

            with mock.patch.object(backend_kernels, "uses_row_steps", lambda model: row_steps), \
                    mock.patch.object(backend_kernels, "jax_rows_train_step", counted), \
                    mock.patch.object(backend_kernels, "row_plan", recorded):
                zoo.recipes.fit(model, train, recipe="suan", batch_size=4, table_update="lazy_adam", verbose=0)
            self.assertEqual(bool(calls), row_steps)
            results[row_steps] = {w.path: to_numpy(w) for w in model.weights}
        self.assertIn("embedding/embedding_item_id/embeddings", plans[0])
        self.assertIn("embedding/embedding_user_user_id/embeddings", plans[0])
        self.assertNotIn("embedding/embedding_category/embeddings", plans[0])
        # (the bias of a Dense feeding BatchNorm has a zero gradient in exact arithmetic; Adam turns its rounding
        # noise into full steps, as recipes/distributed_test.py notes, so it and the mean that tracks it differ)
        cancelled = [p for p in results[True] if "/dense_" in p and p.endswith("/bias") or "batch_norm" in p and
                     p.endswith("moving_mean")]
        self.assertTrue(cancelled)
        for path in set(results[True]) - set(cancelled):
            self.assertAllClose(results[True][path], results[False][path], atol=1e-5, msg=path)

    def test_a_model_compiled_again_trains_with_dense_gradients(self):
        """A model that trained with SparseTableAdam (still alive) and is compiled again with Keras' Adam gets
        dense table gradients again (torch's Adam cannot read sparse ones)."""
        simulator = small_simulator()
        keras.utils.set_random_seed(0)
        model = zoo.get("deepfm", schema=simulator.schema, **SMALL["deepfm"])
        train = simulator.dataset(32, batch_size=16, seed=1)
        history = zoo.recipes.fit(model, train, recipe="suan", batch_size=16, table_update="lazy_adam", verbose=0)
        self.assertIsInstance(history.trainer.optimizer, SparseTableAdam)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy")
        features, labels = simulator.sample(16, seed=3)
        self.assertTrue(np.all(np.isfinite(model.train_on_batch(features, labels))))
