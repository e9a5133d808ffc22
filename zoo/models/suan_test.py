import keras
import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.models.suan import SUAN
from zoo.schema import Schema

SMALL = {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "dice_momentum": 0.9}


def with_candidates(features, m1, seed=0):
    """The rows' own candidate first, then m1 - 1 random others (same exposure time)."""
    rng = np.random.RandomState(seed)
    out = dict(features)
    rows = len(features["cand_item_id"])
    out["cand_item_id"] = np.concatenate([features["cand_item_id"], rng.randint(1, 61, (rows, m1 - 1))], 1).astype("int32")
    out["cand_category"] = np.concatenate([features["cand_category"], rng.randint(1, 7, (rows, m1 - 1))], 1).astype("int32")
    out["cand_time"] = np.repeat(features["cand_time"], m1, axis=1)
    return out


def with_future(features, m1, cut=4, seed=0):
    """`with_candidates(features, m1)` with candidate 0 exposed at the time of behaviour `cut` (the
    others after the history), and a copy whose real behaviours cut.. (candidate 0's future) have
    other ids and times 30 s later, still chronological."""
    rng = np.random.default_rng(seed)
    now = with_candidates(features, m1, seed)
    now["cand_time"] = now["cand_time"].copy()
    now["cand_time"][:, 0] = features["hist_time"][:, cut]
    later = (np.arange(features["hist_time"].shape[1]) >= cut) & (features["hist_item_id"] > 0)  # [B, L]
    future = dict(now, hist_time=np.where(later, now["hist_time"] + 30, now["hist_time"]))
    for key, vocabulary in (("hist_item_id", 62), ("hist_category", 8), ("hist_behavior", 6)):
        future[key] = np.where(later, rng.integers(1, vocabulary - 1, later.shape), now[key]).astype("int32")
    return now, future


class SUANTest(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.simulator = small_simulator()
        cls.features, cls.labels = cls.simulator.sample(16, seed=3)
        cls.model = SUAN(cls.simulator.schema, **SMALL)

    def test_output_logit_and_config(self):
        pctr = self.model.predict_on_batch(self.features)
        self.assertEqual(pctr.shape, (16, 1))
        self.assertTrue(np.all((pctr > 0) & (pctr < 1)))
        logit = self.model.logit_model().predict_on_batch(self.features)
        self.assertAllClose(1.0 / (1.0 + np.exp(-logit)), pctr, atol=1e-6)
        self.assertEqual(self.model.get_config()["mlp_units"], [8])

    def test_relative_bias_shared_by_default(self):
        """One eq 4 bias for all UABs (the authors' code); share_relative_bias=False gives each its own."""
        two = dict(SMALL, num_layers=2)
        shared = SUAN(self.simulator.schema, **two)
        separate = SUAN(self.simulator.schema, share_relative_bias=False, **two)
        tables = (2 * (8 + 1) + 1) + 129  # f2: 2(L + 1) + 1 positions, f1: 129 time buckets
        self.assertEqual(separate.count_params() - shared.count_params(), tables)
        self.assertEqual((shared.get_config()["share_relative_bias"], separate.get_config()["share_relative_bias"]), (True, False))

    def test_rectified_pctr(self):
        model = SUAN(self.simulator.schema, sample_rate=0.25, **SMALL)
        p = np.array([[0.1, 0.5, 0.9]], "float32")
        self.assertAllClose(model.rectified_pctr(p), p / (p + (1 - p) / 0.25), atol=1e-6)
        self.assertAllClose(self.model.rectified_pctr(p), p)  # sample_rate 1: unchanged
        with self.assertRaisesRegex(ZooError, "sample_rate"):
            SUAN(self.simulator.schema, sample_rate=0.0, **SMALL)

    def test_candidate_scores_alone_equal_scores_together(self):
        many = with_candidates(self.features, 5)
        alone = self.model.score_candidates(many, parallel_candidates=1, use_cache=False)
        together = self.model.score_candidates(many, parallel_candidates=5, use_cache=True)
        self.assertAllClose(together, alone, atol=1e-5)
        # 3 passes of m2 = 2 per row split over calls: at most 9 passes per call is 3 whole rows per call
        # (16 rows: the last call filled with copies of the last row); at most 2 is 2 passes of one row
        # per call (its second call filled with placeholder candidates).
        for rows, rows_per_call in ((16, 9), (3, 2)):
            some = {k: v[:rows] for k, v in many.items()}
            split = self.model.score_candidates(some, parallel_candidates=2, rows_per_call=rows_per_call)
            self.assertAllClose(split, alone[:rows], atol=1e-5, msg=f"rows_per_call {rows_per_call}")
        self.assertAllClose(alone[:, :1], self.model.predict_on_batch(self.features), atol=1e-5)

    def test_no_future_behaviour_or_other_candidate_reaches_a_score(self):
        self.run_leakage_test("suan", **SMALL)

    def test_scoring_paths_hide_the_future(self):
        """score_candidates (parallel passes, with and without the history cache) hides from each
        candidate the behaviours at or after its exposure time, as the model's call does."""
        now, future = with_future(self.features, 3)
        for m2, use_cache in ((1, False), (3, False), (2, True), (3, True)):
            before = self.model.score_candidates(now, parallel_candidates=m2, use_cache=use_cache)
            after = self.model.score_candidates(future, parallel_candidates=m2, use_cache=use_cache)
            self.assertAllClose(after[:, 0], before[:, 0], atol=1e-5, msg=f"m2 {m2} cache {use_cache}")
            self.assertGreater(np.abs(after[:, 1:] - before[:, 1:]).max(), 1e-6)

    def test_earlier_positions_ignore_later_behaviours(self):
        embedding, encoder = self.model.get_layer("embedding"), self.model.get_layer("encoder")

        def history_output(features):
            e = embedding(features)
            profile = SUAN._profile(self.simulator.schema, e)
            out, _ = encoder.encode_history(e["hist"], e["hist_valid"], features["hist_time"], profile)
            return keras.ops.convert_to_numpy(out)

        changed = dict(self.features, hist_item_id=self.features["hist_item_id"].copy())
        changed["hist_item_id"][:, -1] = 7  # the newest behaviour
        before, after = history_output(self.features), history_output(changed)
        self.assertAllClose(after[:, :-1], before[:, :-1])

    def test_empty_history_still_scores(self):
        empty = dict(self.features)
        for key in ("hist_item_id", "hist_category", "hist_behavior", "hist_time"):
            empty[key] = np.zeros_like(self.features[key])
        pctr = self.model.score(empty)
        self.assertTrue(np.all(np.isfinite(pctr)))
        self.assertAllClose(self.model.score_candidates(empty), pctr, atol=1e-5)

    def test_bad_input(self):
        longer = {k: (np.pad(v, [(0, 0), (1, 0)]) if k.startswith("hist") else v) for k, v in self.features.items()}
        with self.assertRaisesRegex(ZooError, "hist_item_id has length 9 but the schema allows 8"):
            self.model.score_candidates(longer)
        with self.assertRaisesRegex(ZooError, "negative value"):
            self.model.score_candidates(dict(self.features, cand_item_id=-self.features["cand_item_id"]))
        with self.assertRaisesRegex(ZooError, "vocabulary_size"):
            self.model.score_candidates(dict(self.features, hist_category=self.features["hist_category"] + 100))
        with self.assertRaisesRegex(ZooError, "disagree on M"):
            self.model.score_candidates(dict(with_candidates(self.features, 3), cand_category=self.features["cand_category"]))
        with self.assertRaisesRegex(ZooError, "parallel_candidates"):
            self.model.score_candidates(self.features, parallel_candidates=0)
        with self.assertRaisesRegex(ZooError, "rows_per_call"):
            self.model.score_candidates(self.features, rows_per_call=0)

    def test_needs_time_and_profile(self):
        schema = self.simulator.schema
        no_time = Schema(features=schema.features, sequence_length=8, time=False)
        with self.assertRaisesRegex(ZooError, "needs behaviour times"):
            SUAN(no_time, **SMALL)
        mixed = Schema(features=schema.features + (Feature("tier", "user", 4, 4),), sequence_length=8, time=True)
        with self.assertRaisesRegex(ZooError, "one embedding_dim"):
            SUAN(mixed, **SMALL)

    def test_global_pool_has_no_cache(self):
        model = zoo.get("suan", schema=self.simulator.schema, alignment_pool="global", **SMALL)
        with self.assertRaisesRegex(ZooError, "use_cache=True needs alignment_pool='causal'"):
            model.score_candidates(self.features)
        self.assertEqual(model.score_candidates(self.features, use_cache=False).shape, (16, 1))

    def test_trains_and_round_trips(self):
        model = SUAN(self.simulator.schema, **SMALL)
        model.compile(optimizer="adam", loss="binary_crossentropy")
        history = model.fit(self.features, self.labels, epochs=1, batch_size=8, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][-1]))
        self.run_model_saving_test(model, self.features, self.get_temp_dir())
