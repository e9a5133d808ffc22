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
