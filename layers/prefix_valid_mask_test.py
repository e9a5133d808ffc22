import numpy as np

from tests.testing import TestCase, to_numpy
from zoo.layers.prefix_valid_mask import PrefixValidMask


class PrefixValidMaskTest(TestCase):
    def test_each_sample_sees_real_behaviours_strictly_before_its_time(self):
        valid = np.array([[False, True, True, True, True]])
        time = np.array([[0, 100, 200, 200, 300]], "int64")
        sample_time = np.array([[50, 200, 201, 1000]], "int64")
        allowed = to_numpy(PrefixValidMask()(valid, time, sample_time))
        expected = np.array(
            [[[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 1, 1, 0], [0, 1, 1, 1, 1]]], bool
        )
        np.testing.assert_array_equal(allowed, expected)

    def test_symbolic_shape(self):
        import keras

        allowed = PrefixValidMask()(
            keras.Input((5,), dtype="bool"), keras.Input((5,), dtype="int64"), keras.Input((3,), dtype="int64")
        )
        self.assertEqual(tuple(allowed.shape), (None, 3, 5))
