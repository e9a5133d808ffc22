import numpy as np

from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.sim_hash import SimHash


def hamming_reference(cand, hist, planes):
    """ETA §3.2 pair by pair: the signs of the projections on each hyperplane, counted where they differ."""
    out = np.zeros((len(cand), len(hist)), int)
    for m, a in enumerate(cand):
        for j, e in enumerate(hist):
            out[m, j] = sum(int((a @ planes[:, b] > 0) != (e @ planes[:, b] > 0)) for b in range(planes.shape[1]))
    return out


class SimHashTest(TestCase):
    def make_inputs(self, seed=0):
        rng = np.random.RandomState(seed)
        return rng.normal(size=(2, 3, 6)).astype("float32"), rng.normal(size=(2, 5, 6)).astype("float32")

    def test_layer_basics(self):
        self.run_layer_test(
            SimHash, {"num_bits": 16, "seed": 3}, self.make_inputs(), (2, 3, 5),
            expected_num_trainable_weights=0, expected_num_non_trainable_weights=1,
        )

    def test_matches_simhash_and_hamming(self):
        cand, hist = self.make_inputs(seed=1)
        layer = SimHash(num_bits=12, seed=5)
        out = to_numpy(layer(cand, hist))
        planes = to_numpy(layer.hyperplanes)
        self.assertEqual(planes.shape, (6, 12))
        self.assertAllClose(planes, np.random.default_rng(5).standard_normal((6, 12)))  # seeded NumPy draw
        for b in range(2):
            self.assertEqual(out[b].tolist(), hamming_reference(cand[b], hist[b], planes).tolist())

    def test_close_vectors_get_small_distances(self):
        cand, hist = self.make_inputs(seed=2)
        hist[:, 0] = cand[:, 0]  # the same vector
        hist[:, 1] = -cand[:, 0]  # the opposite one
        out = to_numpy(SimHash(num_bits=32)(cand, hist))
        self.assertEqual(out[:, 0, 0].tolist(), [0, 0])
        self.assertEqual(out[:, 0, 1].tolist(), [32, 32])

    def test_seed_fixes_the_hyperplanes(self):
        cand, hist = self.make_inputs()
        first, second, other = SimHash(8, seed=1), SimHash(8, seed=1), SimHash(8, seed=2)
        for layer in (first, second, other):
            layer(cand, hist)
        self.assertAllClose(first.hyperplanes, second.hyperplanes)
        self.assertFalse(np.allclose(to_numpy(first.hyperplanes), to_numpy(other.hyperplanes)))
        with self.assertRaisesRegex(ZooError, "SimHash num_bits is 0"):
            SimHash(0)
