import math

import numpy as np

from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.time_gap_embedding import TimeGapEmbedding

HIST_TIME = np.array([[0, 1_700_000_000, 1_700_000_990, 1_700_000_999], [1_600_000_000] * 2 + [1_650_000_000] * 2])
CAND_TIME = np.array([[1_700_001_000, 1_700_000_999], [1_700_000_000, 1_650_000_001]])


def bucket(gap, num_buckets):
    """0 for the target (gap < 1 s), else 1 + floor(log2 gap), at most K - 1."""
    return 0 if gap < 1 else min(1 + math.floor(math.log2(gap)), num_buckets - 1)


class TimeGapEmbeddingTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            TimeGapEmbedding, {"num_buckets": 8, "output_dim": 3}, (HIST_TIME, CAND_TIME), (2, 2, 5, 3),
            expected_num_trainable_weights=1,
        )

    def test_buckets_are_log2_of_the_gap_to_each_target(self):
        for num_buckets in (32, 6):
            layer = TimeGapEmbedding(num_buckets=num_buckets, output_dim=2)
            got = to_numpy(layer.buckets(HIST_TIME, CAND_TIME))
            for b in range(2):
                for m in range(2):
                    expected = [bucket(CAND_TIME[b, m] - t, num_buckets) for t in HIST_TIME[b]] + [0]
                    self.assertEqual(got[b, m].tolist(), expected, (num_buckets, b, m))
        # the edges: gaps 1, 2, 3, 4, 2^29 - 1, 2^29, 2^30 and beyond
        gaps = np.array([1, 2, 3, 4, 2**29 - 1, 2**29, 2**30, 2**31 - 2])
        got = to_numpy(TimeGapEmbedding(num_buckets=32).buckets(2**31 - 1 - gaps[None], np.array([[2**31 - 1]])))
        self.assertEqual(got[0, 0].tolist(), [1, 2, 2, 3, 29, 30, 31, 31, 0])

    def test_embeds_each_bucket_from_the_table(self):
        layer = TimeGapEmbedding(num_buckets=8, output_dim=3)
        layer(HIST_TIME, CAND_TIME)
        table = np.random.RandomState(0).normal(size=(8, 3)).astype("float32")
        layer.set_weights([table])
        buckets = [[[bucket(CAND_TIME[b, m] - t, 8) for t in HIST_TIME[b]] + [0] for m in range(2)] for b in range(2)]
        self.assertAllClose(layer(HIST_TIME, CAND_TIME), table[np.array(buckets)])

    def test_bad_arguments_give_one_line(self):
        for kwargs, message in (({"num_buckets": 1}, "num_buckets is 1"), ({"num_buckets": 33}, "num_buckets is 33"),
                                ({"output_dim": 0}, "output_dim is 0")):
            with self.assertRaisesRegex(ZooError, message):
                TimeGapEmbedding(**kwargs)
