from unittest import mock

import keras
import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN
from zoo.models.suan_test import with_candidates, with_future
from zoo.serving import parallel_candidates

SMALL = {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "dice_momentum": 0.9}


class LightSUANTest(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.simulator = small_simulator()
        cls.features, cls.labels = cls.simulator.sample(8, seed=5)
        cls.model = LightSUAN(cls.simulator.schema, window_size=2, dilation=3, parallel_candidates=3, **SMALL)

    def test_parallel_passes_are_exact(self):
        many = with_candidates(self.features, 7)  # ceil(7 / 3) = 3 passes, the last with 2 placeholders
        alone = self.model.score_candidates(many, parallel_candidates=1, use_cache=False)
        parallel = self.model.score_candidates(many, use_cache=False)
        cached = self.model.score_candidates(many)
        self.assertEqual(cached.shape, (8, 7))
        self.assertAllClose(parallel, alone, atol=1e-5)
        self.assertAllClose(cached, parallel, atol=1e-5)
        self.assertAllClose(alone[:, :1], self.model.predict_on_batch(self.features), atol=1e-5)

    def test_no_future_behaviour_or_other_candidate_reaches_a_score(self):
        self.run_leakage_test("lightsuan", window_size=2, dilation=3, parallel_candidates=3, **SMALL)

    def test_scoring_paths_hide_the_future(self):
        """Behaviours 4.. are candidate 0's future; slots 5 and 7 are in position L's pattern (k = 2, r = 3)."""
        now, future = with_future(self.features, 7)
        for use_cache in (False, True):
            before, after = (self.model.score_candidates(f, use_cache=use_cache) for f in (now, future))
            self.assertAllClose(after[:, 0], before[:, 0], atol=1e-5, msg=f"cache {use_cache}")
            self.assertGreater(np.abs(after[:, 1:] - before[:, 1:]).max(), 1e-6)

    def test_other_candidates_and_placeholders_never_change_a_score(self):
        many = with_candidates(self.features, 3, seed=1)
        other = with_candidates(self.features, 3, seed=2)  # candidates 1 and 2 differ
        placeholders = dict(many)
        for key in ("cand_item_id", "cand_category", "cand_time"):
            placeholders[key] = many[key].copy()
            placeholders[key][:, 1:] = 0
        first = [self.model.score_candidates(f, use_cache=False)[:, 0] for f in (many, other, placeholders)]
        self.assertGreater(np.abs(self.model.score_candidates(many)[:, 1:] - self.model.score_candidates(other)[:, 1:]).max(), 1e-6)
        self.assertAllClose(first[1], first[0], atol=1e-6)
        self.assertAllClose(first[2], first[0], atol=1e-6)

    def test_is_suan_with_other_defaults(self):
        self.assertTrue(issubclass(LightSUAN, SUAN))
        self.assertEqual(LightSUAN.hyperparameter_names(), SUAN.hyperparameter_names())
        light = LightSUAN(self.simulator.schema, **SMALL).get_config()
        full = SUAN(self.simulator.schema, **SMALL).get_config()
        self.assertEqual((light["window_size"], light["dilation"], light["parallel_candidates"]), (8, 2, 32))
        self.assertEqual((full["window_size"], full["dilation"], full["parallel_candidates"]), (None, 1, 1))
        self.assertEqual(zoo.registry.entry("lightsuan").signatures, ("serving_default", "parallel_candidates"))
        self.assertEqual(zoo.registry.entry("suan").signatures, ("serving_default",))
        self.assertNotIn("distilsuan", zoo.registry.names())  # a lightsuan preset, not a model

    def test_score_candidates_and_export_run_one_score_all(self):
        """score_candidates compiles SUAN.score_all per call; both exported signatures are score_all."""
        many = with_candidates(self.features, 5)
        with mock.patch.object(LightSUAN, "score_all", autospec=True, side_effect=SUAN.score_all) as score_all:
            scored = self.model.score_candidates(many, parallel_candidates=2)  # a new (m2, cache) scorer: traced now
            calls = len(score_all.call_args_list)
            endpoints = parallel_candidates.endpoints(self.model, {"m2": 2})
            served = endpoints["score_all"][0](many)  # eager here; traced by the export (export_test)
        self.assertGreaterEqual(calls, 1)
        self.assertEqual(len(score_all.call_args_list), calls + 1)
        for call in score_all.call_args_list:
            self.assertIs(call.args[0], self.model)
            self.assertEqual(call.args[2] if len(call.args) > 2 else call.kwargs["parallel_candidates"], 2)
        self.assertIs(endpoints["score_all"][0], endpoints["serving_default"][0])
        self.assertAllClose(served["pctr"], scored, atol=1e-5)
        self.assertAllClose(served["rectified_pctr"], self.model.rectified_pctr(scored), atol=1e-6)

    def test_mixed_precision(self):
        """Under mixed_float16 the graph and score_candidates run in float16 and stay close to float32
        (times stay integers, softmaxes run in float32); so does score_all called directly, outside
        any __call__, as the export does (TensorFlow only: eager JAX is slow)."""
        keras.config.set_dtype_policy("mixed_float16")
        self.addCleanup(keras.config.set_dtype_policy, "float32")
        model = LightSUAN(self.simulator.schema, window_size=2, dilation=3, parallel_candidates=3, **SMALL)
        keras.config.set_dtype_policy("float32")
        model.set_weights(self.model.get_weights())
        many = with_candidates(self.features, 4)
        expected = self.model.score_candidates(many)
        self.assertEqual(keras.backend.standardize_dtype(model.predict_on_batch(self.features).dtype), "float16")
        self.assertAllClose(model.score_candidates(many), expected, atol=5e-3, rtol=0)
        if keras.backend.backend() == "tensorflow":
            self.assertAllClose(keras.ops.cast(model.score_all(many), "float32"), expected, atol=5e-3, rtol=0)

    def test_trains_and_round_trips(self):
        model = zoo.get("lightsuan", schema=self.simulator.schema, window_size=2, dilation=2, parallel_candidates=4, **SMALL)
        model.compile(optimizer="adam", loss="binary_crossentropy")
        history = model.fit(self.features, self.labels, epochs=1, batch_size=8, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][-1]))
        restored = self.run_model_saving_test(model, self.features, self.get_temp_dir())
        self.assertEqual((restored.window_size, restored.dilation, restored.parallel_candidates), (2, 2, 4))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "parallel_candidates"):
            LightSUAN(self.simulator.schema, parallel_candidates=0, **SMALL)
        with self.assertRaisesRegex(ZooError, "^lightsuan: dilation is 0; it must be an integer >= 1$"):
            LightSUAN(self.simulator.schema, window_size=2, dilation=0, **SMALL)  # the rule, as zoo.get's
        with self.assertRaisesRegex(ZooError, "parallel_candidates"):
            self.model.score_candidates(self.features, parallel_candidates=-1)
