import keras
import numpy as np

import zoo
import zoo.models.deepfm  # noqa: F401  (registers "deepfm")
from tests.references import sigmoid
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

SMALL = {"mlp_units": (8,)}


class DeepFMTest(TestCase):
    def test_output_is_pctr_per_candidate(self):
        simulator = small_simulator()
        features, labels = simulator.sample(8)
        model = zoo.get("deepfm", schema=simulator.schema, **SMALL)
        pctr = model.predict(features, verbose=0)
        self.assertEqual(pctr.shape, (8, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        self.assertEqual(model.get_config()["mlp_units"], [8])
        parts = keras.Model(model.inputs, [model.get_layer("fm").output, model.get_layer("mlp").output])
        y_fm, y_dnn = parts.predict(features, verbose=0)
        self.assertAllClose(pctr, sigmoid(y_fm + y_dnn)[..., 0], atol=1e-5)  # eq 1

    def test_no_leakage(self):
        self.run_leakage_test("deepfm", **SMALL)

    def test_bad_hyperparameters(self):
        schema = small_simulator().schema
        for kwargs, message in (
            ({"mlp_units": (8, 0)}, r"mlp_units is 0 \(in \(8, 0\)\)"),
            ({"mlp_units": "wide"}, "mlp_units is 'wide'"),
            ({"dice_momentum": 1.0}, "dice_momentum is 1.0"),
        ):
            with self.subTest(**kwargs), self.assertRaisesRegex(ZooError, f"deepfm hyperparameters: {message}"):
                zoo.get("deepfm", schema=schema, **kwargs)
