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

    def test_layer_basics(self):
        valid = np.array([[False, True, True, True, True], [True, True, False, False, True]])
        time = np.array([[0, 100, 200, 200, 300], [10, 20, 0, 0, 30]], "int64")
        sample_time = np.array([[50, 200, 1000], [15, 25, 40]], "int64")
        # The mask has no weights and is boolean: the training and float16 checks have nothing to check.
        self.run_layer_test(
            PrefixValidMask, {}, (valid, time, sample_time), (2, 3, 5),
            expected_num_trainable_weights=0, expected_num_non_trainable_weights=0,
        )
