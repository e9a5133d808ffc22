import keras
import numpy as np
import tensorflow as tf

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.recipes.evaluate import predict_rows
from zoo.recipes.metrics import auc
from zoo.recipes.validation_auc import ExactValidationAUC


class Clustered(keras.Model):
    """Scores 0.5 + 1e-5 x, all inside one of Keras' 1000 AUC buckets."""

    def call(self, features):
        return 0.5 + 1e-5 * features["x"]


class ExactValidationAUCTest(TestCase):
    def test_val_auc_is_the_exact_auc_where_keras_buckets_it(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=400).astype("float32")
        labels = (x + rng.normal(size=400) > 0).astype("float32")
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).batch(64)
        model = Clustered()
        keras_auc = keras.metrics.AUC(num_thresholds=1000)
        keras_auc.update_state(labels, 0.5 + 1e-5 * x)
        scores = np.float32(0.5) + np.float32(1e-5) * x  # the model's float32 scores (some tie)
        positives, negatives = scores[labels == 1], scores[labels == 0]  # independent: every (positive, negative) pair
        pairs = positives[:, None] - negatives[None, :]
        exact = float(np.mean((pairs > 0) + 0.5 * (pairs == 0)))
        self.assertGreater(exact, 0.8)
        self.assertLess(float(keras_auc.result()), 0.6)  # every score in one bucket: near 0.5
        callback = ExactValidationAUC(data)
        callback.set_model(model)
        logs = {"val_auc": float(keras_auc.result()), "val_loss": 0.7}
        callback.on_epoch_end(0, logs)
        self.assertAlmostEqual(logs["val_auc"], exact, places=9)
        self.assertEqual(logs["val_loss"], 0.7)
        one_class = tf.data.Dataset.from_tensor_slices(({"x": x}, np.ones(400, "float32"))).batch(64)
        logs = {"val_auc": 0.5}
        ExactValidationAUC(one_class, model=model).on_epoch_end(0, logs)
        self.assertEqual(logs["val_auc"], 0.5)  # nothing to rank: Keras' value kept

    def test_fit_keeps_the_epoch_with_the_best_exact_auc(self):
        simulator = small_simulator()
        keras.utils.set_random_seed(0)
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        train = simulator.dataset(num_rows=256, batch_size=32, seed=1)
        val = simulator.dataset(num_rows=128, batch_size=64, seed=2, shuffle=False)
        history = zoo.recipes.fit(model, train, val, recipe="suan", epochs=4, early_stopping_patience=1, verbose=0)
        labels, scores, _ = predict_rows(model, val)
        self.assertAlmostEqual(auc(labels, scores), max(history.history["val_auc"]), places=6)
