import numpy as np
import pyarrow as pa

from tests.testing import TestCase
from zoo.datasets.process_group import ProcessGroup
from zoo.datasets.transforms import vocabulary

OPTIONS = {"min_count": 2, "max_size": None}


class VocabularyTest(TestCase):
    def test_the_fit_keeps_values_seen_min_count_times_most_frequent_first(self):
        values = ["b", "a", "c", "a", "b", "d", "b", "c", "e", "e"]  # b 3, a 2, c 2, e 2, d 1
        counts = vocabulary.Counts()
        counts.add(pa.array(values[:4], pa.string()))  # two batches: the counts add up
        counts.add(pa.array(values[4:], pa.string()))
        state = counts.state(OPTIONS, ProcessGroup())
        self.assertEqual(state, {"kind": "vocabulary", "tokens": ["b", "a", "c", "e"]})  # ties in text order
        capped = counts.state(dict(OPTIONS, max_size=2), ProcessGroup())
        self.assertEqual(capped["tokens"], ["b", "a"])
        grown = counts.state(dict(OPTIONS, max_size=4), ProcessGroup(), base={"tokens": ["z", "c"]})
        self.assertEqual(grown["tokens"], ["z", "c", "b", "a"])  # the preset's ids kept; new ones appended to the cap

    def test_batch_and_graph_lookups_give_the_same_ids(self):
        import tensorflow as tf

        texts = ["b", "a", "zz", "", "e", "a"]
        state = {"kind": "vocabulary", "tokens": ["b", "a", "c", "e"]}
        expected = [1, 2, 5, 5, 4, 2]  # ids 1.. in vocabulary order, 5 = OOV
        np.testing.assert_array_equal(vocabulary.ids(state, pa.array(texts, pa.string())), expected)
        ids, unknown = vocabulary.graph_ids(state, vocabulary.table(state), tf.constant(texts))
        np.testing.assert_array_equal(ids.numpy(), expected)
        np.testing.assert_array_equal(unknown.numpy(), [i == 5 for i in expected])
        empty = {"kind": "vocabulary", "tokens": []}
        ids, unknown = vocabulary.graph_ids(empty, vocabulary.table(empty), tf.constant(texts))
        np.testing.assert_array_equal(ids.numpy(), vocabulary.ids(empty, pa.array(texts, pa.string())))
        hashed = vocabulary.hashed_state({"hash_buckets": 7})
        batch = vocabulary.ids(hashed, pa.array(texts, pa.string()))
        ids, unknown = vocabulary.graph_ids(hashed, None, tf.constant(texts))
        np.testing.assert_array_equal(ids.numpy(), batch)
        self.assertTrue(((batch >= 1) & (batch <= 7)).all())
        self.assertFalse(unknown.numpy().any())


class EvictionTest(TestCase):
    """A capped vocabulary that a fit continues keeps its most recently seen tokens (LRU eviction)."""

    def fit(self, values, times, options, base=None):
        counts = vocabulary.Counts(timed=True)
        counts.add(pa.array(values, pa.string()), np.asarray(times))
        return counts.state(options, ProcessGroup(), base)

    def test_the_least_recently_seen_tokens_give_their_ids_to_new_values(self):
        options = {"min_count": 1, "max_size": 4}
        first = self.fit(["a", "b", "c", "d", "a"], [10, 20, 30, 40, 50], options)
        self.assertEqual(first, {"kind": "vocabulary", "tokens": ["a", "b", "c", "d"], "last_seen": [50, 20, 30, 40]})
        # the next day: c seen again; e (twice) and f new; the table is full, so the two least recently
        # seen of a, b, d (b at 20, d at 40) leave, and e (the more frequent) takes b's id, f d's
        second = self.fit(["c", "e", "f", "e"], [100, 110, 120, 130], options, base=first)
        reference = self.reference(first, {"c": 100, "e": 130, "f": 120}, {"c": 1, "e": 2, "f": 1}, 4)
        self.assertEqual(second, reference)
        self.assertEqual(second, {"kind": "vocabulary", "tokens": ["a", "e", "c", "f"], "last_seen": [50, 130, 100, 120]})

    def test_a_first_fit_keeps_the_most_frequent_and_a_preset_without_times_evicts_nothing(self):
        options = {"min_count": 1, "max_size": 2}
        first = self.fit(["a"] * 10 + ["b"] * 5 + ["c"], [100] * 10 + [200] * 5 + [300], options)
        self.assertEqual(first, {"kind": "vocabulary", "tokens": ["a", "b"], "last_seen": [100, 200]})
        untimed = {"kind": "vocabulary", "tokens": ["p", "q"]}  # (a preset fitted before times were kept)
        self.assertEqual(self.fit(["x"], [500], options, base=untimed)["tokens"], ["p", "q"])
        tied = {"kind": "vocabulary", "tokens": ["p", "q"], "last_seen": [10, 10]}
        self.assertEqual(self.fit(["x"], [500], options, base=tied)["tokens"], ["p", "x"])  # the higher id leaves

    def test_a_table_with_room_appends_and_one_without_times_takes_no_new_value(self):
        options = {"min_count": 1, "max_size": 5}
        first = self.fit(["a", "b"], [10, 20], options)
        grown = self.fit(["c", "a"], [30, 40], options, base=first)
        self.assertEqual(grown, {"kind": "vocabulary", "tokens": ["a", "b", "c"], "last_seen": [40, 20, 30]})
        counts = vocabulary.Counts()  # (a spec without a time: no times, no eviction)
        counts.add(pa.array(["x", "y", "z"], pa.string()))
        full = counts.state({"min_count": 1, "max_size": 2}, ProcessGroup(), base={"kind": "vocabulary", "tokens": ["a", "b"]})
        self.assertEqual(full["tokens"], ["a", "b"])

    @staticmethod
    def reference(base, seen, counts, cap):
        """The LRU rule written plainly: rank the preset's tokens (their latest time) and the new values (their
        time; frequency breaks ties), keep the cap's latest, give the evicted ids to the admitted in order."""
        last = {t: max(base["last_seen"][i], seen.get(t, 0)) for i, t in enumerate(base["tokens"])}
        new = sorted((t for t in seen if t not in last), key=lambda t: (-counts[t], t))
        room = cap - len(last)
        appended, waiting = new[:room], new[room:]
        tokens = base["tokens"] + appended
        times = [last[t] for t in base["tokens"]] + [seen[t] for t in appended]
        ranked = sorted([(times[i], 1, i, None) for i in range(len(tokens))]
                        + [(seen[t], 0, -k, t) for k, t in enumerate(waiting)], reverse=True)[:cap]
        evicted = sorted(set(range(len(tokens))) - {r[2] for r in ranked if r[1] == 1})
        admitted = [t for t in waiting if any(r[3] == t for r in ranked)]
        for slot, t in zip(evicted, admitted):
            tokens[slot], times[slot] = t, seen[t]
        return {"kind": "vocabulary", "tokens": tokens, "last_seen": times}
