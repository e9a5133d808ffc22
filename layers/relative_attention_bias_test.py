import math

import numpy as np

from tests.testing import TestCase
from zoo.layers.relative_attention_bias import RelativeAttentionBias


def bias_reference(w_pos, w_time, positions, times, length):
    """SUAN eq 4 with the tables of the authors' code, pair by pair."""
    n = len(positions)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            gap = max(abs(float(times[i]) - float(times[j])), 1.0)
            bucket = min(max(int(math.log(gap) / 0.301), 0), len(w_time) - 1)
            out[i, j] = w_pos[(length - 1) + positions[j] - positions[i]] + w_time[bucket]
    return out


class RelativeAttentionBiasTest(TestCase):
    def test_layer_basics(self):
        positions = np.tile(np.arange(5, dtype="int32"), (2, 1))  # [B, 5]
        times = positions * 100 + np.array([[0], [10**6]], "int32")  # integer seconds
        self.run_layer_test(
            RelativeAttentionBias,
            {"max_length": 5},
            (positions[:, :, None], positions[:, None, :], times[:, :, None], times[:, None, :]),
            (2, 5, 5),
            expected_num_trainable_weights=2,
        )

    def test_matches_reference(self):
        length = 6
        layer = RelativeAttentionBias(max_length=length, num_time_buckets=128)
        layer.build()
        rng = np.random.RandomState(0)
        w_pos, w_time = rng.normal(size=2 * length + 1), rng.normal(size=129)
        layer.set_weights([w_pos.astype("float32"), w_time.astype("float32")])
        positions = np.array([0, 1, 2, 3, 4, 5, 5, 5])  # three candidates share position L = 5
        times = np.array([0, 3, 50, 4000, 90000, 10**7, 10**7 + 1, 10**8], dtype="float32")
        out = layer(positions[:, None], positions[None, :], times[None, :, None], times[None, None, :])
        self.assertEqual(tuple(out.shape), (1, 8, 8))
        self.assertAllClose(out[0], bias_reference(w_pos, w_time, positions, times, length), atol=1e-5)

    def test_large_gaps_fall_in_the_last_bucket(self):
        layer = RelativeAttentionBias(max_length=2, num_time_buckets=4)
        layer.build()
        self.assertEqual(int(layer.time_bucket(np.float32(1e9))), 4)
        self.assertEqual(int(layer.time_bucket(np.float32(0.0))), 0)
