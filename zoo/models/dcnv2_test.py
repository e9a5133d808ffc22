import numpy as np
from keras_rs.layers import FeatureCross

import zoo
import zoo.models.dcnv2  # noqa: F401  (registers "dcnv2")
from tests.testing import LayerRunner, TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"num_cross_layers": 2, "mlp_units": (8,)}


class DCNV2Test(TestCase):
    def test_output_is_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8)
        for structure in ("stacked", "parallel"):
            with self.subTest(structure=structure):
                model = zoo.get("dcnv2", schema=simulator.schema, structure=structure, projection_dim=4, **SMALL)
                pctr = model.predict(features, verbose=0)
                self.assertEqual(pctr.shape, (8, 1))
                self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
                names = {layer.name for layer in model.layers}
                self.assertEqual("cross_logit" in names, structure == "parallel")
                self.assertEqual(model.get_layer("cross_1").projection_dim, 4)

    def test_feature_cross_is_dcnv2_equation_1(self):
        """keras-rs' FeatureCross with fixed weights: x0 ⊙ (W x + b) + x, W full-rank or U V^T (eq 1-2)."""
        rng = np.random.RandomState(0)
        x0 = rng.normal(size=(3, 2, 6)).astype("float32")
        x = rng.normal(size=(3, 2, 6)).astype("float32")
        for rank in (None, 2):
            with self.subTest(projection_dim=rank):
                layer = FeatureCross(projection_dim=rank)
                runner = LayerRunner(layer, x0, x)
                if rank is None:
                    w = rng.normal(size=(6, 6)).astype("float32")
                    weights = [w]
                else:
                    u, v = rng.normal(size=(6, rank)).astype("float32"), rng.normal(size=(rank, 6)).astype("float32")
                    w, weights = u @ v, [u, v]
                b = rng.normal(size=6).astype("float32")
                layer.set_weights(weights + [b])
                expected = x0 * (x @ w + b) + x  # row vectors: W x_l is x_l @ w
                self.assertAllClose(runner(x0, x), expected, atol=1e-4)

    def test_no_leakage(self):
        self.run_leakage_test("dcnv2", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"num_cross_layers": 0}, "num_cross_layers is 0"),
            ({"projection_dim": -2}, "projection_dim is -2"),
            ({"structure": "mixed"}, "structure is 'mixed'; it must be one of 'stacked', 'parallel'"),
            ({"mlp_units": (8, -1)}, r"mlp_units is -1 \(in \(8, -1\)\)"),
            ({"dice_momentum": -0.1}, "dice_momentum is -0.1"),
        ):
            with self.subTest(**kwargs), self.assertRaisesRegex(ZooError, f"dcnv2 hyperparameters: {message}"):
                zoo.get("dcnv2", schema=schema, **kwargs)
