import numpy as np

import zoo
import zoo.models.fibinet  # noqa: F401  (registers "fibinet")
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"mlp_units": (8,)}


class FiBiNETTest(TestCase):
    def test_output_is_pctr_per_candidate(self):
        simulator = small_simulator()
        features, _ = simulator.sample(8)
        for bilinear_type in ("field-all", "field-each", "field-interaction"):
            with self.subTest(bilinear_type=bilinear_type):
                model = zoo.get("fibinet", schema=simulator.schema, bilinear_type=bilinear_type, **SMALL)
                self.assertEqual(model.get_layer("bilinear_senet").bilinear_type, bilinear_type)
                if bilinear_type != "field-interaction":
                    continue  # one predict: the types differ only in the layer's kernel, tested there
                pctr = model.predict(features, verbose=0)
                self.assertEqual(pctr.shape, (8, 1))
                self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
                # f = 11 fields: 55 pairs, for p and for q
                self.assertEqual(model.get_layer("mlp").weights[0].shape, (2 * 55 * 8, 8))

    def test_no_leakage(self):
        self.run_leakage_test("fibinet", bilinear_type="field-each", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"reduction_ratio": 0}, "reduction_ratio is 0"),
            (
                {"bilinear_type": "field_all"},
                "bilinear_type is 'field_all'; it must be one of 'field-all', 'field-each', 'field-interaction'",
            ),
            ({"mlp_units": (8, 0)}, r"mlp_units is 0 \(in \(8, 0\)\)"),
            ({"dice_momentum": 1.5}, "dice_momentum is 1.5"),
        ):
            with self.subTest(**kwargs), self.assertRaisesRegex(ZooError, f"fibinet hyperparameters: {message}"):
                zoo.get("fibinet", schema=schema, **kwargs)
