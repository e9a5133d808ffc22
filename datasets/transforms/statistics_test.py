import numpy as np

from tests.testing import TestCase
from zoo.datasets.transforms import statistics


class RunningStatisticsTest(TestCase):
    def test_earlier_counts_see_strictly_earlier_rows_of_their_key(self):
        rng = np.random.default_rng(0)
        keys, times = rng.integers(0, 5, 300), rng.integers(0, 40, 300)  # many ties in time
        labels = rng.integers(0, 2, 300).astype(float)
        rows, positives = statistics.earlier_counts(keys, times, labels)
        for i in range(300):
            earlier = (keys == keys[i]) & (times < times[i])
            self.assertEqual((rows[i], positives[i]), (earlier.sum(), labels[earlier].sum()))
        self.assertEqual([len(v) for v in statistics.earlier_counts([], [], [])], [0, 0])

    def test_matching_counts_count_the_entries_of_a_range_equal_to_the_rows_own_value(self):
        rng = np.random.default_rng(1)
        values, positive = rng.integers(1, 6, 200), rng.random(200) < 0.3  # a store of 200 entries
        start = rng.integers(0, 200, 150)
        end = np.minimum(start + rng.integers(0, 40, 150), 200)  # empty ranges too
        own = rng.integers(0, 7, 150)  # values absent from the store too
        rows, positives = statistics.matching_counts(values, positive, own, start, end)
        for i in range(150):
            match = values[start[i]:end[i]] == own[i]
            self.assertEqual((rows[i], positives[i]), (match.sum(), positive[start[i]:end[i]][match].sum()))

    def test_values_bucketed_on_training_rows(self):
        values = statistics.raw_values([0, 1, 3, 9], [0, 1, 2, 2], prior=0.25, prior_rows=10)
        np.testing.assert_allclose(values[:, 2], [2.5 / 10, 3.5 / 11, 4.5 / 13, 4.5 / 19])
        train = np.array([True, True, True, False])
        state = statistics.fit(values, train, buckets=2)
        self.assertEqual(state["edges"][0], [1.0])  # the median of 0, 1, 3
        np.testing.assert_array_equal(statistics.transformed(values, state)[:, 0], [1, 2, 2, 2])
        four = statistics.fit(values, train, buckets=4)  # np.quantile's linear interpolation at 1/4, 2/4, 3/4
        np.testing.assert_allclose(four["edges"][1], np.quantile([0, 1, 2], [0.25, 0.5, 0.75]))
