import tempfile

import keras
import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.layers.rote import default_granularities
from zoo.models.rest import ReST

SIMULATOR = small_simulator()  # L = 8
SCHEMA = SIMULATOR.schema
NON_HIST = [k for k in SCHEMA.keys() if not k.startswith("hist")]


def run(model, features):
    """The model on a batch, as NumPy: compiled under JAX (eager JAX compiles op by op), eager elsewhere."""
    if keras.backend.backend() == "jax":
        return model.predict_on_batch(features)
    return to_numpy(model(features))


def nudged(model, seed=0):
    """The model with its weights moved off their initial values (α_l = 0.01 would hide the encoder)."""
    rng = np.random.default_rng(seed)
    model.set_weights([w + 0.3 * rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


def build(num_candidates=1, **overrides):
    config = dict(SMALL["rest"], **overrides)
    keras.utils.set_random_seed(3)
    return ReST(SCHEMA.with_candidates(num_candidates), **config)


def user_timeline(n=8, seed=0):
    """One user's n behaviours (ids, sorted times) and profile/context features."""
    rng = np.random.default_rng(seed)
    times = 1_700_000_000 + np.cumsum(rng.integers(1, 5000, n))
    return {
        "item_id": rng.integers(1, 60, n), "category": rng.integers(1, 7, n), "behavior": rng.integers(1, 5, n),
        "time": times,
    }


def row(timeline, upto, cand_items, cand_cats, cand_times, length=8):
    """A batch row in the contract: the first `upto` behaviours (left-padded) and M candidates."""
    pad = length - upto
    features = {
        f"hist_{k}": np.concatenate([np.zeros(pad, "int64"), timeline[k][:upto]])[None].astype(
            "int64" if k == "time" else "int32"
        )
        for k in ("item_id", "category", "behavior", "time")
    }
    features.update(
        {
            "user_user_id": np.array([5], "int32"), "user_age": np.array([2], "int32"),
            "user_gender": np.array([1], "int32"), "user_city": np.array([3], "int32"),
            "cand_item_id": np.array([cand_items], "int32"), "cand_category": np.array([cand_cats], "int32"),
            "cand_time": np.array([cand_times], "int64"),
            "ctx_hour": np.array([4], "int32"), "num_price": np.array([0.5], "float32"),
        }
    )
    return features


def stack_rows(rows):
    return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


class ReSTModelTest(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = nudged(build())
        cls.features, cls.labels = SIMULATOR.sample(6, seed=1)

    def test_output_is_pctr_per_candidate(self):
        pctr = self.model.predict(self.features, verbose=0)
        self.assertEqual(pctr.shape, (6, 1))
        self.assertTrue(np.all((pctr >= 0) & (pctr <= 1)))  # probabilities (float32 may round to 1)

    def test_saving_and_preset_round_trip(self):
        with tempfile.TemporaryDirectory() as directory:
            self.run_model_saving_test(self.model, self.features, directory)

    def test_is_embedding_then_encoder_then_decoder(self):
        names = [layer.name for layer in self.model.layers if not isinstance(layer, keras.layers.InputLayer)]
        self.assertEqual(names, ["embedding", "encoder", "decoder"])
        encoder, decoder = self.model.get_layer("encoder"), self.model.get_layer("decoder")
        self.assertEqual([srn.post_norm for srn in encoder.encoder_layers], [True, False])  # depth 2: L_switch = 1
        self.assertEqual(encoder.encoder_layers[0].attention.time_granularities, default_granularities(2))
        self.assertEqual(decoder.token_types, ("cls", "context", "user", "cand"))

    def test_serving_sub_models_share_the_models_layers(self):
        for sub in (self.model.encoder(), self.model.decoder(5), self.model.tap_model()):
            shared = {id(v) for v in self.model.weights}
            self.assertTrue(all(id(v) in shared for v in sub.weights), sub.name)
        self.assertIs(self.model.encoder(), self.model.encoder())  # built once
        taps = self.model.tap_model().predict_on_batch(self.features)
        self.assertAllClose(taps["pctr"], run(self.model, self.features), atol=1e-6)
        self.assertEqual(taps["decoded"].shape, (6, 1, 4, 8))

    def test_encode_once_decode_many_equals_full_model_per_candidate(self):
        n = 5
        rng = np.random.default_rng(0)
        requests = []
        for seed, upto in ((0, 8), (1, 3)):
            timeline = user_timeline(seed=seed)
            t = int(timeline["time"][upto - 1]) + 10
            requests.append(row(timeline, upto, rng.integers(1, 60, n), rng.integers(1, 7, n), [t] * n))
        request = stack_rows(requests)  # B = 2 requests, N = 5 candidates each
        state = self.model.encode(request)
        scores = self.model.decode(state, {k: request[k] for k in NON_HIST})
        self.assertEqual(scores.shape, (2, n))
        singles = []  # the full model on each (request, candidate) pair, M = 1
        for b in range(2):
            for c in range(n):
                single = {k: v[b : b + 1] for k, v in request.items()}
                for k in ("cand_item_id", "cand_category", "cand_time"):
                    single[k] = single[k][:, c : c + 1]
                singles.append(single)
        full = run(self.model, stack_rows(singles))
        self.assertAllClose(scores.reshape(-1), full[:, 0], atol=1e-5)

    def test_decode_checks_the_state_before_the_backend(self):
        state = self.model.encode(self.features)
        rest = {k: self.features[k] for k in NON_HIST}
        good = self.model.decode(state, rest)
        as_lists = {k: v.tolist() for k, v in state.items()}  # JSON-style state: same scores
        self.assertAllClose(self.model.decode(as_lists, rest), good, atol=1e-6)
        unsorted = state["hist_time"].copy()
        valid = state["memory_valid"][2]
        last, before = np.flatnonzero(valid)[-1], np.flatnonzero(valid)[-2]
        unsorted[2, last] = unsorted[2, before] - 1
        bad = {
            "memory'\\] contains NaN": {"memory": np.where(state["memory"] > 0, np.nan, state["memory"])},
            "memory'\\] must be a numeric array": {"memory": np.full(state["memory"].shape, "x")},
            "hist_time'\\] must hold integer times": {"hist_time": state["hist_time"] + 0.5},
            "hist_time'\\] has a negative value": {"hist_time": state["hist_time"] - 10**12},
            "hist_time'\\] is not sorted": {"hist_time": unsorted},
            "memory_valid'\\] must hold booleans": {"memory_valid": state["memory_valid"] * 2},
            "memory'\\] has shape": {"memory": state["memory"][:, :, :3]},
        }
        for message, change in bad.items():
            with self.subTest(message), self.assertRaisesRegex(zoo.ZooError, message):
                self.model.decode({**state, **change}, rest)
        self.assertAllClose(self.model.decode(state, rest), good, atol=1e-6)  # still usable afterwards

    def test_shared_prefix_pass_equals_each_sample_alone(self):
        timeline = user_timeline(seed=2)
        times = timeline["time"]
        # four samples of the user: before any behaviour, at a behaviour's time (excluded), between, after all
        sample_times = [int(times[0]) - 5, int(times[3]), int(times[5]) + 1, int(times[7]) + 100]
        cand_items, cand_cats = [3, 17, 29, 41], [1, 2, 3, 4]
        shared_model = build(num_candidates=4)
        shared_model.set_weights(self.model.get_weights())
        shared_row = row(timeline, 8, cand_items, cand_cats, sample_times)
        shared = run(shared_model, shared_row)[0]
        alone = [
            row(timeline, int(np.sum(times < t)), [cand_items[s]], [cand_cats[s]], [t])
            for s, t in enumerate(sample_times)
        ]  # each sample on its own history: the behaviours strictly before its time
        self.assertAllClose(shared, run(self.model, stack_rows(alone))[:, 0], atol=1e-5)
        # perturbing behaviour 5 (at or after the times of samples 0 and 1) leaves them unchanged
        perturbed = {k: v.copy() for k, v in shared_row.items()}
        perturbed["hist_item_id"][0, 5] = 59
        perturbed["hist_category"][0, 5] = 6
        changed = run(shared_model, perturbed)[0]
        self.assertAllClose(changed[:2], shared[:2], atol=1e-6)
        self.assertGreater(np.abs(changed[2:] - shared[2:]).max(), 1e-6)  # later samples do see it

    def test_unsorted_history_is_a_clear_error(self):
        features = {k: v.copy() for k, v in self.features.items()}
        features["hist_time"][2, -1] = features["hist_time"][2, -2] - 1
        for call in (lambda: self.model.score(features), lambda: self.model.encode(features)):
            with self.assertRaisesRegex(zoo.ZooError, "hist_time of row 2 is not sorted oldest first"):
                call()

    def test_equal_timestamps_are_accepted(self):
        features = {k: v.copy() for k, v in self.features.items()}
        features["hist_time"][:, -1] = features["hist_time"][:, -2]
        SCHEMA.validate(features)
        self.assertTrue(np.all(np.isfinite(run(self.model, features))))

    def test_empty_history_reads_nothing(self):
        features = {k: v.copy() for k, v in self.features.items()}
        for key in ("hist_item_id", "hist_category", "hist_behavior", "hist_time"):
            features[key][:2] = 0
        SCHEMA.validate(features)
        pctr = run(self.model, features)
        self.assertTrue(np.all(np.isfinite(pctr)))
        # an empty history's memory is never read: any memory gives the same score
        state = self.model.encode(features)
        state["memory"] = state["memory"] + 5.0
        rest = {k: features[k] for k in NON_HIST}
        self.assertAllClose(self.model.decode(state, rest)[:2], pctr[:2], atol=1e-6)

    def test_bad_configuration_is_a_clear_error(self):
        with self.assertRaisesRegex(zoo.ZooError, "time_granularities has 3 entries"):
            ReST(SCHEMA, num_heads=2, time_granularities=[0, 1, 60])
        no_time = zoo.Schema(SCHEMA.features, SCHEMA.sequence_length, 1, time=False)
        with self.assertRaisesRegex(zoo.ZooError, "needs behaviour times"):
            ReST(no_time)
