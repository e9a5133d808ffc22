import numpy as np

from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.calibration import Calibration


def reference(p, slope, intercept):
    """p' = sigmoid(a * logit(p) + b), p clipped to [1e-7, 1 - 1e-7] (NumPy, float64)."""
    p = np.clip(np.asarray(p, np.float64), 1e-7, 1 - 1e-7)
    return 1.0 / (1.0 + np.exp(-(slope * np.log(p / (1 - p)) + intercept)))


class CalibrationTest(TestCase):
    def setUp(self):
        super().setUp()
        self.p = np.array([[0.01, 0.2, 0.5], [0.7, 0.95, 0.999]], "float32")

    def test_platt_matches_the_numpy_reference(self):
        got = to_numpy(Calibration(slope=0.8, intercept=-0.3)(self.p))
        self.assertAllClose(got, reference(self.p, 0.8, -0.3), atol=1e-6)
        self.assertAllClose(got[0, 2], 1 / (1 + np.exp(0.3)), atol=1e-6)  # logit(0.5) = 0: sigmoid(b)

    def test_temperature_divides_the_logit(self):
        got = to_numpy(Calibration(slope=1 / 2.5, method="temperature")(self.p))
        self.assertAllClose(got, reference(self.p, 0.4, 0.0), atol=1e-6)
        self.assertAllClose(got[0, 2], 0.5)  # temperature never moves 0.5

    def test_identity_keeps_the_scores_and_the_order(self):
        self.assertAllClose(Calibration()(self.p), self.p, atol=1e-6)
        got = to_numpy(Calibration(slope=3.0, intercept=1.0)(self.p)).reshape(-1)
        self.assertTrue(np.all(np.diff(got) > 0))  # monotone: AUC unchanged

    def test_saturated_scores_stay_finite(self):
        got = to_numpy(Calibration(slope=2.0, intercept=0.5)(np.array([[0.0, 1.0]], "float32")))
        self.assertTrue(np.all(np.isfinite(got)))
        self.assertAllClose(got, reference([[0.0, 1.0]], 2.0, 0.5), atol=1e-6)

    def test_bad_values_are_one_line(self):
        for kwargs, message in (
            ({"slope": 0.0}, "calibration slope is 0.0; it must be > 0"),
            ({"slope": float("nan")}, "calibration slope is nan; it must be a finite number"),
            ({"intercept": "1"}, "calibration intercept is '1'; it must be a finite number"),
            ({"method": "isotonic"}, "calibration method is 'isotonic'; it must be one of 'platt', 'temperature'"),
            ({"method": "temperature", "intercept": 0.2}, "temperature scaling has none"),
        ):
            with self.subTest(**kwargs), self.assertRaisesRegex(ZooError, message):
                Calibration(**kwargs)

    def test_layer_basics(self):
        self.run_layer_test(
            Calibration, {"slope": 1.3, "intercept": -0.2}, self.p, (2, 3),
            expected_num_trainable_weights=0, expected_num_non_trainable_weights=0,
        )
