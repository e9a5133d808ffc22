import json
from pathlib import Path

import keras
import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.recipes.calibration import apply_calibration, calibrate, fit_calibration, mean_logloss


def miscalibrated(slope, intercept, rows=200_000, seed=0):
    """Labels drawn from sigmoid(z) and scores whose calibration (slope, intercept) is exactly the map back:
    sigmoid(slope * logit(score) + intercept) = sigmoid(z)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, rows)
    labels = (rng.random(rows) < 1 / (1 + np.exp(-z))).astype("float32")
    scores = 1 / (1 + np.exp(-(z - intercept) / slope))
    return labels, scores


class FitCalibrationTest(TestCase):
    def test_platt_recovers_the_map_that_generated_the_labels(self):
        labels, scores = miscalibrated(0.6, -0.4)
        fitted = fit_calibration(labels, scores)
        self.assertEqual(fitted["method"], "platt")
        self.assertAllClose([fitted["slope"], fitted["intercept"]], [0.6, -0.4], atol=0.03, rtol=0)

    def test_the_fit_is_the_log_loss_minimum(self):
        labels, scores = miscalibrated(1.7, 0.5, rows=20_000, seed=1)
        for method in ("platt", "temperature"):
            fitted = fit_calibration(labels, scores, method)
            best = mean_logloss(labels, apply_calibration(fitted, scores))
            for da, db in ((1e-3, 0), (-1e-3, 0), (0, 1e-3), (0, -1e-3)):
                if method == "temperature" and db:
                    continue
                moved = dict(fitted, slope=fitted["slope"] + da, intercept=fitted["intercept"] + db)
                with self.subTest(method=method, da=da, db=db):
                    self.assertGreater(mean_logloss(labels, apply_calibration(moved, scores)), best)

    def test_temperature_has_no_intercept(self):
        labels, scores = miscalibrated(2.0, 0.0, rows=50_000, seed=2)
        fitted = fit_calibration(labels, scores, "temperature")
        self.assertEqual(fitted["intercept"], 0.0)
        self.assertAllClose(fitted["slope"], 2.0, atol=0.06, rtol=0)

    def test_a_calibrated_model_of_its_own_labels_stays_the_identity(self):
        labels, scores = miscalibrated(1.0, 0.0, rows=200_000, seed=3)
        fitted = fit_calibration(labels, scores)
        self.assertAllClose([fitted["slope"], fitted["intercept"]], [1.0, 0.0], atol=0.03, rtol=0)

    def test_rows_that_cannot_identify_a_calibration_are_refused(self):
        for labels, scores, method, message in (
            ([1, 1, 1], [0.2, 0.5, 0.9], "platt", "needs both clicks and non-clicks; every validation label is 1"),
            ([0, 2], [0.2, 0.5], "platt", "labels must be 0 or 1"),
            ([0, 1], [0.2], "platt", "one score per label: 2 labels, 1 scores"),
            ([0, 1], [0.2, 0.5], "isotonic", "method is 'isotonic'"),
            ([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9], "platt", r"best slope on these rows is -\d"),
        ):
            with self.subTest(message=message), self.assertRaisesRegex(ZooError, message):
                fit_calibration(np.array(labels), np.array(scores), method)


class CalibrateModelTest(TestCase):
    """A calibrated copy scores apply_calibration(uncalibrated scores) on every scoring path and keeps it
    through a preset."""

    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.features, self.labels = self.simulator.sample(64, seed=5)

    def calibrated(self, name, schema=None):
        keras.utils.set_random_seed(0)
        model = zoo.get(name, schema=schema or self.simulator.schema, **SMALL[name])
        return model, model.with_calibration({"method": "platt", "slope": 0.7, "intercept": -0.5})

    def test_predict_score_and_a_preset_apply_the_calibration(self):
        model, copy = self.calibrated("din")
        base = model.predict(self.features, verbose=0)
        expected = apply_calibration(copy.calibration, base)
        self.assertAllClose(copy.predict(self.features, verbose=0), expected, atol=1e-5)
        self.assertAllClose(copy.score(self.features), expected, atol=1e-5)
        self.assertIsNone(copy.with_calibration(None).calibration)
        self.assertAllClose(copy.with_calibration(None).score(self.features), base, atol=1e-6)
        directory = Path(self.get_temp_dir())
        zoo.save(copy, directory)
        config = json.loads((directory / "config.json").read_text())["config"]
        self.assertEqual(config["calibration"], {"method": "platt", "slope": 0.7, "intercept": -0.5})
        self.assertAllClose(zoo.load(directory).score(self.features), expected, atol=1e-5)
        zoo.save(model, directory / "plain")
        self.assertNotIn("calibration", json.loads((directory / "plain" / "config.json").read_text())["config"])

    def test_lightsuan_score_candidates_and_rest_decode_apply_it(self):
        schema = self.simulator.schema.with_candidates(3)
        features = {k: (np.repeat(v, 3, axis=1) if k.startswith("cand") else v) for k, v in self.features.items()}
        model, copy = self.calibrated("lightsuan", schema)
        expected = apply_calibration(copy.calibration, model.score_candidates(features))
        self.assertAllClose(copy.score_candidates(features), expected, atol=1e-5)
        model, copy = self.calibrated("rest", schema)
        candidates = {k: v for k, v in features.items() if not k.startswith("hist")}
        expected = apply_calibration(copy.calibration, model.decode(model.encode(features), candidates))
        self.assertAllClose(copy.decode(copy.encode(features), candidates), expected, atol=1e-5)

    def test_calibrate_fits_on_validation_and_keeps_only_a_lower_logloss(self):
        model, _ = self.calibrated("din")
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
        model.fit(*self.simulator.sample(2048, seed=6), epochs=3, batch_size=256, verbose=0)  # scores that rank
        val = self.simulator.dataset(512, batch_size=128, seed=7, shuffle=False)
        calibrated, report = calibrate(model, val, keep="always")
        labels = np.concatenate([y for _, y in val.as_numpy_iterator()]).reshape(-1)
        scores = np.concatenate([model.predict_on_batch(x) for x, _ in val.as_numpy_iterator()]).reshape(-1)
        self.assertEqual(calibrated.calibration, fit_calibration(labels, scores))
        self.assertAlmostEqual(report["logloss_before"], mean_logloss(labels, scores), places=5)
        self.assertLess(report["logloss_after"], report["logloss_before"])  # the fit's own rows: never worse
        again, report = calibrate(calibrated, val)  # refitted from the raw scores, not stacked
        self.assertAlmostEqual(again.calibration["slope"], calibrated.calibration["slope"], places=5)
        self.assertTrue(report["kept"])
        with self.assertRaisesRegex(ZooError, "keep is 'sometimes'"):
            calibrate(model, val, keep="sometimes")
        flipped = val.map(lambda x, y: (x, 1 - y))  # scores that rank worse than chance: no calibration helps
        same, report = calibrate(model, flipped)
        self.assertIs(same, model)
        self.assertFalse(report["kept"])
        self.assertRegex(report["reason"], r"best slope on these rows is -")
        with self.assertRaisesRegex(ZooError, "best slope on these rows is -"):
            calibrate(model, flipped, keep="always")

    def test_fit_refuses_a_calibrated_model(self):
        _, copy = self.calibrated("din")
        train = self.simulator.dataset(64, batch_size=32, seed=1)
        with self.assertRaisesRegex(ZooError, r"din is calibrated .*with_calibration\(None\)"):
            zoo.recipes.fit(copy, train, recipe="suan", epochs=1, verbose=0)
