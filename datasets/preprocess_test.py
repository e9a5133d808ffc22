import json
import math

import numpy as np

from tests.testing import TestCase
from zoo.datasets import preprocess
from zoo.errors import ZooError


class VocabularyTest(TestCase):
    def test_ids_by_count_padding_and_oov(self):
        vocab = preprocess.Vocabulary(min_count=2)
        vocab.fit_many(["b", "a", "a", "c", "b", "a"])
        vocab.finalize()
        # a (3) -> 1, b (2) -> 2; c (1 < min_count) and unseen tokens -> OOV = 3
        self.assertEqual([vocab.lookup(t) for t in ("a", "b", "c", "zzz")], [1, 2, 3, 3])
        self.assertEqual(vocab.size, 4)

    def test_too_many_tokens_switch_to_hashing(self):
        vocab = preprocess.Vocabulary(max_size=3)
        vocab.fit_many([str(i) for i in range(10)])
        vocab.finalize()
        self.assertIsNotNone(vocab.hashed)
        self.assertEqual(vocab.size, 5)
        ids = {vocab.lookup(str(i)) for i in range(100)}
        self.assertTrue(ids <= {1, 2, 3})
        self.assertEqual(vocab.lookup("7"), preprocess.HashedIds(3).lookup("7"))  # stable

    def test_counts_fitted_at_once_equal_tokens_fitted_one_by_one(self):
        one_by_one, at_once = preprocess.Vocabulary(), preprocess.Vocabulary()
        one_by_one.fit_many(["b", "a", "c", "b", "a"])
        at_once.fit_counts(["a", "c", "b", "zzz"], [2, 1, 1, 0])
        at_once.fit_counts(["b"], [1])
        self.assertEqual(at_once.finalize().get_state(), one_by_one.finalize().get_state())


class NumericTest(TestCase):
    def test_quantile_buckets_are_equal_frequency_and_fill_the_mean(self):
        buckets = preprocess.QuantileBuckets(num_buckets=4, seed=0)
        for value in range(1, 101):
            buckets.fit(float(value))
        buckets.finalize()
        ids = np.array([buckets.lookup(float(v)) for v in range(1, 101)])
        self.assertEqual(np.bincount(ids).tolist(), [0, 25, 25, 25, 25])
        self.assertEqual(buckets.size, 6)
        # Missing values take the training mean of the present ones (1, 2, 3, 10 -> 4).
        buckets = preprocess.QuantileBuckets(num_buckets=2)
        for value in (1.0, 2.0, math.nan, 3.0, 10.0):
            buckets.fit(value)
        buckets.finalize()
        self.assertEqual(buckets.mean, 4.0)
        self.assertEqual(buckets.edges.tolist(), [3.0])  # median of 1, 2, 4, 3, 10
        self.assertEqual(buckets.lookup(math.nan), 2)

    def test_bars_transform(self):
        # x > 2 -> floor(ln(x)^2), else int(x)   (BARS Criteo_x4)
        self.assertEqual(preprocess.bars_numeric(100.0), str(math.floor(math.log(100) ** 2)))  # 21
        self.assertEqual(preprocess.bars_numeric(100.0), "21")
        self.assertEqual(preprocess.bars_numeric(2.0), "2")
        self.assertEqual(preprocess.bars_numeric(-1.0), "-1")

    def test_log_count_keeps_sign(self):
        self.assertAlmostEqual(preprocess.log_count(math.e - 1), 1.0)
        self.assertAlmostEqual(preprocess.log_count(-(math.e - 1)), -1.0)


class EventsTest(TestCase):
    def test_k_core_is_iterative(self):
        # k = 2: user 3 has 1 interaction -> removed; only then item 30 falls to 1 -> removed.
        users = np.array([1, 1, 1, 2, 2, 3])
        items = np.array([10, 20, 30, 10, 20, 30])
        keep = preprocess.k_core(users, items, 2)
        self.assertEqual(keep.tolist(), [True, True, False, True, True, False])
        self.assertFalse(preprocess.k_core(users, items, 3).any())

    def test_history_ends_exclude_ties(self):
        users = np.array([1, 1, 1, 1, 2, 2])
        times = np.array([5, 7, 7, 9, 1, 1])
        self.assertEqual(preprocess.history_ends(users, times).tolist(), [0, 1, 1, 3, 4, 4])
        self.assertEqual(preprocess.block_starts(users).tolist(), [0, 0, 0, 0, 4, 4])

    def test_sort_events_is_stable(self):
        order = preprocess.sort_events(np.array([2, 1, 1, 1]), np.array([0, 9, 3, 3]))
        self.assertEqual(order.tolist(), [2, 3, 1, 0])

    def test_per_user_split(self):
        users = np.array([1] * 10 + [2] * 5)
        codes = preprocess.per_user_split(users).tolist()
        self.assertEqual(codes[:10], [0] * 8 + [1] + [2])
        self.assertEqual(codes[10:], [0] * 4 + [2])  # floor(4.0)=4 train, floor(4.5)=4 -> no validation

    def test_held_out_users_split(self):
        """Each user's rows in one split, drawn from the user's text alone (any order, any chunk), at the
        fractions' shares of users; another seed draws again."""
        rng = np.random.default_rng(0)
        users = np.array([f"u{k}" for k in rng.integers(0, 3000, size=20_000)])
        codes = preprocess.held_out_users_split(users, (0.8, 0.1, 0.1), seed=7)
        for code in range(3):
            self.assertFalse(set(users[codes == code]) & set(users[codes != code]))
        order = rng.permutation(users.size)
        np.testing.assert_array_equal(preprocess.held_out_users_split(users[order], (0.8, 0.1, 0.1), seed=7),
                                      codes[order])
        np.testing.assert_array_equal(preprocess.held_out_users_split(users[:57], (0.8, 0.1, 0.1), seed=7), codes[:57])
        distinct, first = np.unique(users, return_index=True)
        shares = np.bincount(codes[first], minlength=3) / distinct.size
        np.testing.assert_allclose(shares, [0.8, 0.1, 0.1], atol=0.03)
        self.assertFalse(np.array_equal(preprocess.held_out_users_split(users, (0.8, 0.1, 0.1), seed=8), codes))
        self.assertEqual(set(preprocess.held_out_users_split(users, (1.0, 0.0, 0.0), seed=7).tolist()), {0})

    def test_day_cuts(self):
        times = np.repeat(np.arange(9), 10) * 86400 + 5
        valid, test = preprocess.day_cuts(times)
        self.assertEqual((valid // 86400, test // 86400), (7, 8))
        codes = preprocess.split_by_time(times, (valid, test))
        self.assertEqual(np.bincount(codes).tolist(), [70, 10, 10])
        # UTC+8 days: 17:00 UTC is already the next day in Beijing.
        offset = 8 * 3600
        valid, test = preprocess.day_cuts(np.array([0, 86400, 2 * 86400 + 17 * 3600]), utc_offset=offset)
        self.assertEqual(test, 3 * 86400 - offset)
        one_day = preprocess.day_cuts(np.array([10, 20]))
        self.assertTrue((preprocess.split_by_time(np.array([10, 20]), one_day) == 0).all())


class FittedStateTest(TestCase):
    def test_fitted_tables_round_trip_through_json(self):
        vocabulary = preprocess.Vocabulary()
        vocabulary.fit_many(["b", "a", "a", "c"])
        hashed = preprocess.Vocabulary(max_size=2)
        hashed.fit_many(["x", "y", "z"])
        buckets = preprocess.QuantileBuckets(num_buckets=4)
        for value in (1.0, 2.0, math.nan, 3.0, 10.0, 11.0):
            buckets.fit(value)
        probes = {0: ["a", "b", "c", "new"], 1: ["x", "y", "z", "new"], 2: [math.nan, -1.0, 2.5, 3.0, 99.0]}
        for index, table in enumerate((vocabulary.finalize(), hashed.finalize(), buckets.finalize())):
            state = json.loads(json.dumps(table.get_state()))
            rebuilt = preprocess.from_state(state)
            self.assertEqual([rebuilt.lookup(v) for v in probes[index]], [table.lookup(v) for v in probes[index]])
            self.assertEqual(rebuilt.size, table.size)
        self.assertEqual(vocabulary.get_state(), {"kind": "vocabulary", "tokens": ["a", "b", "c"]})
        self.assertEqual(hashed.get_state(), {"kind": "hashed", "buckets": 2})

    def test_malformed_states_are_refused(self):
        with self.assertRaisesRegex(ZooError, "not fitted yet"):
            preprocess.Vocabulary().get_state()
        for state, message in (
            ({"kind": "vocabulary", "tokens": ["a", "a"]}, "lists the same token twice"),
            ({"kind": "vocabulary", "tokens": [1]}, "tokens must be a list of strings"),
            ({"kind": "vocabulary"}, "a fitted vocabulary lacks 'tokens'"),
            ({"kind": "hashed", "buckets": 0}, "expected a positive integer"),
            ({"kind": "quantile_buckets", "num_buckets": 2, "mean": 0, "edges": [2, 1]}, "edges must be increasing"),
            ({"kind": "table"}, "unknown fitted table kind 'table'"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                preprocess.from_state(state)
