import numpy as np

from tests.testing import TestCase
from zoo.layers.suan_encoder import SuanEncoder
from zoo.layers.suan_self_attention_test import LayerRunner


class SuanEncoderTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.RandomState(0)
        self.hist = rng.normal(size=(2, 6, 8)).astype("float32")
        self.cand = rng.normal(size=(2, 3, 8)).astype("float32")
        self.valid = np.ones((2, 6), bool)
        self.valid[1, :2] = False
        times = 1_700_000_000 + np.sort(rng.randint(0, 10**6, (2, 6)))
        self.hist_t = np.where(self.valid, times, 0).astype("int64")  # 0 on padding
        self.cand_t = (times[:, -1:] + [[60, 600, 6000]]).astype("int64")
        self.profile = rng.normal(size=(2, 3, 4)).astype("float32")

    def args(self, cand=None, cand_t=None):
        return [self.hist, self.cand if cand is None else cand, self.valid, self.hist_t,
                self.cand_t if cand_t is None else cand_t, self.profile]

    def test_candidates_take_one_shared_position(self):
        """Permuting the candidates permutes their outputs: no slot has its own position."""
        for window in (None, 2):
            encoder = SuanEncoder(2, 2, 6, window_size=window, dilation=2 if window else 1)
            run = LayerRunner(encoder, *self.args())
            out = run(*self.args())
            order = [2, 0, 1]
            permuted = run(*self.args(self.cand[:, order], self.cand_t[:, order]))
            self.assertAllClose(permuted, out[:, order], atol=1e-5)

    def test_config_round_trip(self):
        encoder = SuanEncoder(1, 2, 6, window_size=2, dilation=3, alignment_pool="global")
        clone = SuanEncoder.from_config(encoder.get_config())
        self.assertEqual(clone.get_config(), encoder.get_config())
