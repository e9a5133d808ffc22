import numpy as np

from tests.testing import TestCase, to_numpy
from zoo import ZooError
from zoo.layers.rote import RotaryPositionTime, default_granularities


def rotation(x, head_dim, base=10000.0):
    """R_Θ(x) of RoFormer in the half-split layout: pair (j, j + d_h/2) turns by x·θ_j."""
    half = head_dim // 2
    r = np.zeros((head_dim, head_dim))
    for j in range(half):
        angle = x * base ** (-2.0 * j / head_dim)
        c, s = np.cos(angle), np.sin(angle)
        r[j, j], r[j, j + half] = c, -s
        r[j + half, j], r[j + half, j + half] = s, c
    return r


# Two left-padded users; the first real behaviour of row 0 is at index 1.
TIME = np.array(
    [[0, 1_700_000_000, 1_700_000_059, 1_700_003_700, 1_700_090_000],
     [1_600_000_000, 1_600_000_000, 1_600_000_061, 1_632_000_000, 1_700_000_000]], dtype="int64")
VALID = np.array([[False, True, True, True, True], [True] * 5])
GRANULARITIES = [0, 1, 60, 3600, 86400, 31536000]


class RotaryPositionTimeTest(TestCase):
    def test_layer_basics(self):
        x = np.random.rand(2, 5, 6, 4).astype("float32")
        self.run_layer_test(
            RotaryPositionTime, {"time_granularities": GRANULARITIES}, (x, TIME, VALID), (2, 5, 6, 4)
        )

    def test_positions_are_index_or_time_buckets_from_first_real_behaviour(self):
        positions = to_numpy(RotaryPositionTime(GRANULARITIES).positions(TIME, VALID))
        for b in range(2):
            first = np.argmax(VALID[b])
            for i in range(5):
                elapsed = TIME[b, i] - TIME[b, first]
                for h, tau in enumerate(GRANULARITIES):
                    expected = i if tau == 0 else (elapsed // tau if VALID[b, i] else 0)
                    self.assertEqual(positions[b, i, h], expected, (b, i, h))

    def test_rotation_matches_block_rotation_matrix(self):
        x = np.random.RandomState(0).normal(size=(2, 5, 6, 8)).astype("float32")
        layer = RotaryPositionTime(GRANULARITIES, max_wavelength=100)
        out = to_numpy(layer(x, TIME, VALID))
        positions = to_numpy(layer.positions(TIME, VALID))
        for b in range(2):
            for i in range(5):
                for h in range(6):
                    position = float(positions[b, i, h])
                    expected = rotation(position, 8, 100.0) @ x[b, i, h]
                    # the documented float32 bound: angle error about b·θ_j·2^-24 (here 4x that)
                    theta = 100.0 ** (-2.0 * np.arange(4) / 8)
                    pair_norm = np.hypot(x[b, i, h, :4], x[b, i, h, 4:])
                    bound = np.tile(pair_norm * (position * theta * 2.0**-22 + 1e-5), 2)
                    self.assertTrue(np.all(np.abs(out[b, i, h] - expected) <= bound + 1e-5), (b, i, h))

    def test_scores_depend_on_bucket_difference_only(self):
        rng = np.random.RandomState(1)
        q, k = rng.normal(size=8), rng.normal(size=8)
        for b_n, b_m in [(3, 10), (1000, 1007), (0, 25)]:
            lhs = (rotation(b_n, 8) @ q) @ (rotation(b_m, 8) @ k)
            self.assertAlmostEqual(lhs, q @ rotation(b_m - b_n, 8) @ k, places=8)

    def test_scores_invariant_to_shifting_all_timestamps(self):
        rng = np.random.RandomState(2)
        q = rng.normal(size=(2, 5, 6, 8)).astype("float32")
        k = rng.normal(size=(2, 5, 6, 8)).astype("float32")
        layer = RotaryPositionTime(GRANULARITIES)

        def scores(time):
            rq, rk = to_numpy(layer(q, time, VALID)), to_numpy(layer(k, time, VALID))
            return np.einsum("blhe,bmhe->bhlm", rq, rk)

        shifted = np.where(VALID, TIME + 123_456_789, 0)  # padding keeps time 0
        self.assertAllClose(scores(shifted), scores(TIME), atol=1e-6)
        earlier = np.where(VALID, TIME - 1_500_000_000, 0)
        self.assertAllClose(scores(earlier), scores(TIME), atol=1e-6)

    def test_equal_timestamps_share_a_bucket(self):
        positions = to_numpy(RotaryPositionTime([1, 60]).positions(TIME, VALID))
        self.assertEqual(positions[1, 0, 0], positions[1, 1, 0])

    def test_default_granularities_cycle(self):
        self.assertEqual(default_granularities(2), [0, 1])
        self.assertEqual(default_granularities(8), [0, 1, 60, 3600, 86400, 604800, 7884000, 31536000])
        self.assertEqual(default_granularities(10)[8:], [1, 60])

    def test_negative_granularity_is_a_clear_error(self):
        with self.assertRaisesRegex(
            ZooError, r"^RotaryPositionTime: time_granularities must be >= 0 seconds, got \[0, -60\]$"
        ):
            RotaryPositionTime([0, -60])

    def test_quarter_is_91_25_days(self):
        self.assertEqual(default_granularities(7)[-1], 91.25 * 86400)
