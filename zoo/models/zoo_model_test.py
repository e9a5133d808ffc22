import inspect
import re
import warnings

import keras
import numpy as np

from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo import registry
from zoo.errors import ZooError
from zoo.models.zoo_model import ZooModel
from zoo.schema import Schema


class _Tiny(ZooModel):
    """A model declared as the zoo's are: the signature gives names and defaults, RULES the checks."""

    registered_name = "tiny"

    def __init__(self, schema, mlp_units=(4,), dropout=0.0, num_heads=2, extra=None, **kwargs):
        self.seen = {"schema": schema, "mlp_units": mlp_units, "dropout": dropout, "num_heads": num_heads}
        inputs = schema.inputs()
        embedded = keras.layers.Concatenate()([keras.ops.cast(inputs[k], "float32") for k in ("cand_item_id",)])
        pctr = keras.layers.Dense(1, activation="sigmoid")(embedded)
        super().__init__(inputs=inputs, outputs=pctr, **kwargs)


class ZooModelTest(TestCase):
    """The base model's bookkeeping: every hyperparameter checked by its rule, normalised, kept as the
    attribute of its name and returned by get_config, from the signature alone."""

    def setUp(self):
        self.schema = small_simulator().schema

    def test_arguments_are_checked_normalised_and_kept(self):
        model = _Tiny(self.schema.to_dict(), mlp_units=[np.int64(8), 3], dropout=0, num_heads=np.int32(1))
        self.assertIsInstance(model.seen["schema"], Schema)  # the body receives what was checked
        self.assertEqual(model.seen["mlp_units"], (8, 3))
        self.assertEqual([type(v) for v in model.seen["mlp_units"]], [int, int])
        self.assertIs(type(model.seen["dropout"]), float)
        self.assertIs(type(model.num_heads), int)
        self.assertEqual((model.mlp_units, model.dropout, model.num_heads, model.extra), ((8, 3), 0.0, 1, None))
        config = model.get_config()
        self.assertEqual({k: config[k] for k in ("mlp_units", "dropout", "num_heads", "extra")},
                         {"mlp_units": [8, 3], "dropout": 0.0, "num_heads": 1, "extra": None})
        self.assertEqual(config["schema"], self.schema.to_dict())
        self.assertEqual(_Tiny.from_config(config).get_config(), config)
        self.assertEqual(list(inspect.signature(_Tiny.__init__).parameters)[:3], ["self", "schema", "mlp_units"])

    def test_a_bad_value_is_one_line_naming_the_model_and_the_key(self):
        cases = [({"dropout": float("nan")}, "tiny: dropout is nan; it must be a finite number in [0, 1)"),
                 ({"num_heads": "2"}, "tiny: num_heads is '2' (text); it must be an integer >= 1"),
                 ({"mlp_units": (8, -1)}, "tiny: mlp_units is -1 (in (8, -1)); it must be a list of integers >= 1"),
                 ({"mlp_units": 8}, "tiny: mlp_units is 8; it must be a list of integers >= 1")]
        for change, message in cases:
            with self.subTest(change=change), self.assertRaisesRegex(ZooError, "^" + re.escape(message) + "$"):
                _Tiny(self.schema, **change)

    def test_every_registered_model_keeps_its_arguments(self):
        """For every model of the registry, built from its small test config: each hyperparameter is the
        attribute of its name, equal to the argument (normalised), and get_config round-trips."""
        for name in registry.names():
            with self.subTest(model=name):
                cls = registry.entry(name).cls
                model = cls(self.schema, **SMALL[name])
                for key, value in SMALL[name].items():
                    kept = getattr(model, key)
                    self.assertEqual(list(kept) if isinstance(kept, tuple) else kept,
                                     list(value) if isinstance(value, tuple) else value, key)
                self.assertEqual(cls.from_config(model.get_config()).get_config(), model.get_config())


class KerasDataPathTest(TestCase):
    """fit, evaluate and predict on a tf.data.Dataset (or a dict of arrays) refuse a bad value in one line on
    every backend, where TensorFlow raised an 80-line InvalidArgumentError, JAX scored (and trained on) NaN
    and torch raised an IndexError; good data passes unchanged."""

    def setUp(self):
        import tensorflow as tf

        self.tf = tf
        self.simulator = small_simulator()
        self.model = registry.entry("din").cls(self.simulator.schema, **SMALL["din"])
        self.model.compile(optimizer="adam", loss="binary_crossentropy")
        self.features, self.labels = self.simulator.sample(8, seed=1)

    def dataset(self, features):
        return self.tf.data.Dataset.from_tensor_slices((features, self.labels)).batch(4)

    def test_a_bad_batch_is_one_line(self):
        vocab = self.simulator.schema.feature("cand_item_id").vocabulary_size
        cases = []
        for key, value, message in (
                ("cand_item_id", 10**6, f"cand_item_id has id 1000000 but its vocabulary_size is {vocab} (ids lie in "
                                        f"[0, {vocab}); map unknown values to {vocab - 1}, the OOV id)"),
                ("hist_item_id", -3, "hist_item_id has a negative value (-3); ids and times are >= 0"),
                ("num_price", np.nan, "num_price contains NaN or infinite values")):
            bad = {k: v.copy() for k, v in self.features.items()}
            bad[key][(5, 0)[:bad[key].ndim]] = value  # in the second batch
            cases.append((bad, message))
        for bad, message in cases:
            for name, call in (("fit", lambda d: self.model.fit(d, epochs=1, verbose=0)),
                               ("evaluate", lambda d: self.model.evaluate(d, verbose=0)),
                               ("predict", lambda d: self.model.predict(d, verbose=0))):
                with self.subTest(call=name, message=message[:30]):
                    with self.assertRaises(ZooError) as caught:
                        call(self.dataset(bad))
                    self.assertEqual(str(caught.exception), "a batch of the data: " + message)
            with self.subTest(call="fit on a dict"), self.assertRaises(ZooError) as caught:
                self.model.fit(bad, self.labels, epochs=1, verbose=0)
            self.assertEqual(len(str(caught.exception).splitlines()), 1)

    def test_good_data_passes_unchanged(self):
        guarded = self.model.predict(self.dataset(self.features), verbose=0)
        direct = self.model.predict_on_batch(self.features)
        self.assertAllClose(guarded, direct, atol=1e-6)
        history = self.model.fit(self.dataset(self.features), validation_data=self.dataset(self.features), epochs=1,
                                 verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))


class PlainCallTest(TestCase):
    """`model(tensors)`, Keras' plain call, scores bad values as a server's signature does (zoo/serving/guard.py):
    a negative or too large id reads the OOV row, a NaN numeric reads 0, with a warning counting them. (A -1
    read the last row Python-style but a -2 a real item's, NaN scored NaN and 10**6 raised a backend
    traceback.)"""

    def test_bad_ids_read_the_oov_row_and_nan_numerics_the_fill(self):
        simulator = small_simulator()
        model = registry.entry("din").cls(simulator.schema, **SMALL["din"])
        features, _ = simulator.sample(4, seed=1)
        oov = simulator.schema.feature("cand_item_id").vocabulary_size - 1
        expected = {k: v.copy() for k, v in features.items()}
        expected["cand_item_id"][:2] = oov
        expected["hist_item_id"][1, -1] = oov
        expected["num_price"][3] = 0.0
        reference = model.predict(expected, verbose=0)
        bad = {k: v.copy() for k, v in features.items()}
        bad["cand_item_id"][0] = -2
        bad["cand_item_id"][1] = 10**6
        bad["hist_item_id"][1, -1] = -1
        bad["num_price"][3] = np.nan
        with self.assertWarns(UserWarning) as caught:
            scores = model({k: keras.ops.convert_to_tensor(v) for k, v in bad.items()})
        self.assertIn("din: 3 id(s) outside their vocabulary read the OOV row and 1 non-finite", str(caught.warning))
        self.assertAllClose(keras.ops.convert_to_numpy(scores), reference, atol=1e-6)
        self.assertEqual(model.predict(features, verbose=0).shape, (4, 1))  # good values: no warning, no change
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            model({k: keras.ops.convert_to_tensor(v) for k, v in features.items()})
        self.assertEqual([str(w.message) for w in seen if "repaired" in str(w.message)], [])


class TagsFeatureTest(TestCase):
    """A tags feature (Feature.tags: a film's genres, [B, M, S]) is read by every registered model through
    FeatureEmbedding's pooled mean, with no change to the model."""

    def test_every_registered_model_reads_a_tags_feature(self):
        """Every model under TensorFlow and torch; under JAX, whose op-by-op calls took 81 s for all 29 models,
        one of each family (the pooling is FeatureEmbedding's, the same for all)."""
        from tests.cross_backend_test import REPRESENTATIVES

        for name in REPRESENTATIVES if keras.backend.backend() == "jax" else registry.names():
            with self.subTest(model=name):
                config = dict(SMALL[name])
                schema, features, _ = self.tagged(**config.pop("simulator", {}))
                rng = np.random.default_rng(1)
                keras.utils.set_random_seed(7)
                model = registry.entry(name).cls(schema, **config)
                for table in (v for v in model.weights if v.path.endswith("embeddings")):  # off their +-0.05 init
                    table.assign(rng.normal(scale=0.5, size=table.shape).astype("float32"))
                before = keras.ops.convert_to_numpy(model(features, training=False))
                changed = dict(features, cand_genres=features["cand_genres"].copy())
                changed["cand_genres"][0] = [1, 2, 3]
                after = keras.ops.convert_to_numpy(model(changed, training=False))
                self.assertGreater(np.abs(after[0] - before[0]).max(), 0.0)  # row 0 read its new tags (else equal)
                self.assertAllClose(after[1:], before[1:], atol=1e-6)  # the other rows did not

    def tagged(self, **simulator):
        """(schema, features [B=6, M], labels) of the small simulator with cand_genres [B, M, 3] and user_likes
        [B, 2]."""
        import dataclasses

        from zoo.feature import Feature

        simulator = small_simulator(**simulator)
        features, labels = simulator.sample(6, seed=3)
        schema = simulator.schema
        dim = schema.feature("cand_item_id").embedding_dim
        schema = dataclasses.replace(schema, features=schema.features + (
            Feature("genres", "cand", 7, dim, tags=3), Feature("likes", "user", 5, dim, tags=2)))
        rng = np.random.default_rng(1)
        m = features["cand_item_id"].shape[1]
        return schema, dict(features, cand_genres=rng.integers(0, 7, (6, m, 3)).astype("int32"),
                            user_likes=rng.integers(0, 5, (6, 2)).astype("int32")), labels

    def test_lightsuan_scores_parallel_candidates_with_tags(self):
        from zoo.models.suan_test import with_candidates

        schema, features, _ = self.tagged()
        model = registry.entry("lightsuan").cls(schema, **dict(SMALL["lightsuan"], parallel_candidates=3))
        many = with_candidates(features, 7)  # 3 passes, the last with 2 placeholders: tags padded alike
        many["cand_genres"] = np.random.default_rng(2).integers(0, 7, (6, 7, 3)).astype("int32")
        alone = model.score_candidates(many, parallel_candidates=1, use_cache=False)
        parallel = model.score_candidates(many, use_cache=False)
        self.assertEqual(parallel.shape, (6, 7))
        self.assertAllClose(parallel, alone, atol=1e-5)
        changed = dict(many, cand_genres=many["cand_genres"].copy())
        changed["cand_genres"][:, 4] = [1, 2, 3]
        after = model.score_candidates(changed, use_cache=False)
        self.assertAllClose(np.delete(after, 4, axis=1), np.delete(parallel, 4, axis=1), atol=1e-6)
        self.assertGreater(np.abs(after[:, 4] - parallel[:, 4]).max(), 0.0)

    def test_rest_auxiliary_training_tells_users_apart_by_their_tags_too(self):
        from zoo.recipes.rest_training import ReSTTrainer

        schema, features, labels = self.tagged()
        model = registry.entry("rest").cls(schema, **SMALL["rest"])
        trainer = ReSTTrainer(model, aux_units=8)
        features["user_likes"][1] = features["user_likes"][0]
        for key in (f.key for f in schema.group("user") if f.key != "user_likes"):
            features[key][1] = features[key][0]  # rows 0 and 1: one user, but for row 2's likes
        features["user_likes"][2] = (features["user_likes"][0] % 4) + 1
        for key in (f.key for f in schema.group("user") if f.key != "user_likes"):
            features[key][2] = features[key][0]
        same = keras.ops.convert_to_numpy(trainer(features)["same_user"])
        self.assertTrue(same[0, 1] and not same[0, 2])
        trainer.compile(optimizer="adam", loss="binary_crossentropy")
        self.assertTrue(np.isfinite(np.asarray(trainer.train_on_batch(features, labels))).all())
