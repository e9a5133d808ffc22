"""A rejected request leaves a model exactly as usable as before, on every backend and entry point.

(On JAX a call that failed inside `predict` used to leave a half-built compiled function behind, after
which every valid call failed too. Validation now runs before any backend call, and a call that still
fails drops the compiled function.)
"""

import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError


def bad_requests(features):
    """(what the one-line error says, a broken copy of `features`)."""
    unsorted = {k: v.copy() for k, v in features.items()}
    real = np.flatnonzero(unsorted["hist_item_id"][0])
    unsorted["hist_time"][0, real[-1]] = unsorted["hist_time"][0, real[-2]] - 1
    return [
        ("the batch is empty", {k: v[:0] for k, v in features.items()}),
        ("but the schema needs 8", dict(features, hist_category=features["hist_category"][:, 2:])),
        ("not sorted oldest first", unsorted),
        ("has a negative value", dict(features, cand_item_id=-features["cand_item_id"])),
        ("but its vocabulary_size is", dict(features, hist_item_id=features["hist_item_id"] + 1000)),
        ("must be a dict", list(features.values())),
    ]


class BadRequestTest(TestCase):
    @classmethod
    def setUpClass(cls):
        simulator = small_simulator()
        cls.features, _ = simulator.sample(3, seed=4)
        cls.models = {name: zoo.get(name, schema=simulator.schema, **SMALL[name])
                      for name in ("din", "lightsuan", "rest")}

    def assert_rejects_then_recovers(self, entry_point, good_call):
        expected = good_call()
        for message, bad in bad_requests(self.features):
            with self.subTest(entry_point=entry_point, error=message):
                with self.assertRaisesRegex(ZooError, message):
                    good_call(bad)
                self.assertAllClose(good_call(), expected, atol=1e-6)

    def test_score(self):
        for name, model in self.models.items():
            self.assert_rejects_then_recovers(f"{name}.score", lambda f=self.features, m=model: m.score(f))

    def test_score_candidates(self):
        model = self.models["lightsuan"]
        self.assert_rejects_then_recovers("score_candidates", lambda f=self.features: model.score_candidates(f))

    def test_rest_encode_and_decode(self):
        model = self.models["rest"]
        state = model.encode(self.features)
        expected = state["memory"]
        for message, bad in bad_requests(self.features):
            if message == "has a negative value":
                continue  # a candidate fault: encode takes the history only
            with self.subTest(entry_point="encode", error=message):
                with self.assertRaisesRegex(ZooError, message):
                    model.encode(bad)
                self.assertAllClose(model.encode(self.features)["memory"], expected, atol=1e-6)
        candidates = {k: v for k, v in self.features.items() if not k.startswith("hist")}

        def decode(f=self.features):
            if not isinstance(f, dict):
                return model.decode(state, f)
            return model.decode(state, {k: v for k, v in f.items() if not k.startswith("hist")})

        expected = decode()
        for message, bad in bad_requests(self.features):
            if message in ("but the schema needs 8", "not sorted oldest first", "but its vocabulary_size is"):
                continue  # history faults: decode takes no history
            with self.subTest(entry_point="decode", error=message):
                with self.assertRaisesRegex(ZooError, message):
                    decode(bad)
                self.assertAllClose(decode(), expected, atol=1e-6)
        with self.assertRaisesRegex(ZooError, "state must be the dict rest.encode returned"):
            model.decode({"memory": state["memory"]}, candidates)
        with self.assertRaisesRegex(ZooError, r"state\['memory'\] has shape"):
            model.decode(dict(state, memory=state["memory"][:, :2]), candidates)

    def test_a_failure_inside_predict_leaves_the_model_usable(self):
        """What validation cannot foresee: a call that fails inside the backend (here a history that
        bypasses `score`'s checks) must not poison the model's compiled predict function."""
        model = self.models["din"]
        expected = model.score(self.features)
        short = dict(self.features, hist_category=self.features["hist_category"][:, 2:])
        with self.assertRaises(Exception):
            model.run_predictor(lambda: model.predict(short, verbose=0))
        self.assertAllClose(model.score(self.features), expected, atol=1e-6)
