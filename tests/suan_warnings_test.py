"""SUAN and LightSUAN run without Keras' "softmax over axis ... has size 1" warning (issue #29 item 2).

The warning came from AFNet's cross-attention (eq 8) when the profile has one user feature, as in
MovieLens (user_user_id only): a softmax over n2 = 1 profile tokens. The simulator's schema has four
user features; its one-feature variant is the case that warned.
"""

import dataclasses
import warnings

import numpy as np

from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN

ONE_USER_FEATURE = ("user_age", "user_gender", "user_city")  # dropped: user_user_id stays


class SuanWarningsTest(TestCase):
    def check_no_size_one_softmax(self, drop):
        simulator = small_simulator()
        schema = simulator.schema
        schema = dataclasses.replace(schema, features=tuple(f for f in schema.features if f.key not in drop))
        features, _ = simulator.sample(8, seed=3)
        features = {key: value for key, value in features.items() if key not in drop}
        many = dict(features, cand_item_id=np.concatenate([features["cand_item_id"]] * 3, axis=1),
                    cand_category=np.concatenate([features["cand_category"]] * 3, axis=1),
                    cand_time=np.concatenate([features["cand_time"]] * 3, axis=1))
        for name, cls in (("suan", SUAN), ("lightsuan", LightSUAN)):
            with self.subTest(model=name, user_features=len(schema.group("user"))):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model = cls(schema, **SMALL[name])
                    model.predict_on_batch(features)
                    model.score_candidates(many, parallel_candidates=2)  # the history-cache path
                softmax = [str(w.message) for w in caught if "softmax over axis" in str(w.message)]
                self.assertEqual(softmax, [])

    def test_simulator_schema(self):
        self.check_no_size_one_softmax(drop=())

    def test_one_user_feature(self):
        self.check_no_size_one_softmax(drop=ONE_USER_FEATURE)
