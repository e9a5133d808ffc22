import numpy as np

from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.recipes.scaling import fit_scaling_law, predict


class ScalingLawTest(TestCase):
    def test_recovers_a_known_suan_law(self):
        c = np.geomspace(1e6, 1e10, 9)
        truth = dict(E=0.82, A=0.6, B=2e5, alpha=0.25)
        auc = truth["E"] - truth["A"] / (c - truth["B"]) ** truth["alpha"]
        fit = fit_scaling_law(c, auc, law="suan")
        self.assertGreater(fit["r2"], 0.9999)
        np.testing.assert_allclose(predict(fit, c), auc, atol=1e-5)

    def test_recovers_a_known_deres_law(self):
        c = np.geomspace(1e3, 1e7, 8)
        auc = 0.81 - 0.3 * c ** (-0.2)
        fit = fit_scaling_law(c, auc, law="deres")
        self.assertAlmostEqual(fit["coefficients"]["alpha"], 0.81, places=3)
        self.assertAlmostEqual(fit["coefficients"]["gamma"], 0.2, places=2)
        self.assertGreater(fit["r2"], 0.9999)

    def test_a_fit_pushed_onto_a_bound_says_so(self):
        c = np.geomspace(1e6, 1e10, 9)
        well_posed = fit_scaling_law(c, 0.82 - 0.6 / c**0.25, law="suan")
        self.assertEqual(well_posed["at_bounds"], [])
        # A rise that flattens at once (HSTU's five data fractions on the UserBehavior sample, one pass):
        # the steepest allowed law (alpha = 10) is the least-squares answer, and R² alone would not tell.
        compute = np.array([0.125, 0.25, 0.5, 0.75, 1.0]) * 1.32e11
        fit = fit_scaling_law(compute, [0.5424, 0.7100, 0.8412, 0.8563, 0.8789], law="suan")
        self.assertGreater(fit["r2"], 0.99)
        self.assertEqual(fit["at_bounds"], ["alpha"])
        self.assertAlmostEqual(fit["coefficients"]["alpha"], 10.0, places=2)

    def test_too_few_points_or_unknown_law(self):
        with self.assertRaisesRegex(ZooError, "needs more than 4"):
            fit_scaling_law([1, 2, 3], [0.7, 0.71, 0.72], law="suan")
        with self.assertRaisesRegex(ZooError, "unknown scaling law"):
            fit_scaling_law([1, 2, 3], [0.7, 0.71, 0.72], law="chinchilla")
