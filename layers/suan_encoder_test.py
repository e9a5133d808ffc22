import keras
import numpy as np

from tests.testing import LayerRunner, TestCase
from zoo.layers.suan_encoder import SuanEncoder


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
        self.cand_t[:, 0] = times[:, 3] + 5  # candidate 0 exposed after behaviour 3: behaviours 4.. are its future
        self.profile = rng.normal(size=(2, 3, 4)).astype("float32")

    def args(self, cand=None, cand_t=None):
        cand_t = self.cand_t if cand_t is None else cand_t
        visible = self.valid[:, None, :] & (self.hist_t[:, None, :] < cand_t[:, :, None])  # hist_visible [B, M, L]
        return [self.hist, self.cand if cand is None else cand, self.valid, visible, self.hist_t, cand_t, self.profile]

    def test_layer_basics(self):
        for share, weights in ((True, 3 + 2 + 2 * 17), (False, 3 + 2 * 19)):  # P, W_t, b_t; tables; 2 UABs
            encoder, _ = self.run_layer_test(
                SuanEncoder, {"num_layers": 2, "num_heads": 2, "sequence_length": 6, "share_relative_bias": share},
                tuple(self.args()), (2, 3, 8), expected_num_trainable_weights=weights,
                run_training_check=share, run_mixed_precision_check=share,  # the layers are the same
            )
            self.assertEqual(encoder.get_config()["share_relative_bias"], share)

    def test_shared_relative_bias_equals_equal_per_block_tables(self):
        """share_relative_bias=True (the authors' code): every UAB reads one eq 4 bias; it computes what
        per-block tables holding the same values compute, and each block's math is uab_test's NumPy
        reference. share_relative_bias=False: each block owns (and trains) its own tables."""
        for window in (None, 2):
            config = dict(num_layers=2, num_heads=2, sequence_length=6, window_size=window, dilation=2 if window else 1)
            shared, separate = SuanEncoder(**config), SuanEncoder(**config, share_relative_bias=False)
            run_shared, run_separate = LayerRunner(shared, *self.args()), LayerRunner(separate, *self.args())
            biases = [block.attention.relative_bias for block in shared.blocks]
            self.assertTrue(all(bias is shared.relative_bias for bias in biases))
            self.assertIsNot(separate.blocks[0].attention.relative_bias, separate.blocks[1].attention.relative_bias)
            rng = np.random.default_rng(2)
            tables = [rng.normal(size=15).astype("float32"), rng.normal(size=129).astype("float32")]
            shared.relative_bias.set_weights(tables)
            for block_shared, block_separate in zip(shared.blocks, separate.blocks):
                block_separate.set_weights(block_shared.get_weights())  # the same tables in each block
            for name in ("position_table", "time_kernel", "time_bias"):
                getattr(separate, name).assign(keras.ops.convert_to_numpy(getattr(shared, name)))  # a copy (JAX donates buffers)
            self.assertAllClose(run_separate(*self.args()), run_shared(*self.args()), atol=1e-5)
            separate.blocks[1].attention.relative_bias.set_weights([2.0 * t for t in tables])
            self.assertGreater(np.abs(run_separate(*self.args()) - run_shared(*self.args())).max(), 1e-4)

    def test_candidates_take_one_shared_position(self):
        """Permuting the candidates permutes their outputs: no slot has its own position."""
        for window in (None, 2):
            encoder = SuanEncoder(2, 2, 6, window_size=window, dilation=2 if window else 1)
            run = LayerRunner(encoder, *self.args())
            out = run(*self.args())
            order = [2, 0, 1]
            permuted = run(*self.args(self.cand[:, order], self.cand_t[:, order]))
            self.assertAllClose(permuted, out[:, order], atol=1e-5)

    def test_position_and_time_embeddings_match_numpy(self):
        """x_i = e_i + P[i] + (log(1 + gap_i) W_t + b_t); gap_i is the time since the previous
        behaviour (0 for the first valid one and on padding); every candidate takes P[L] and the gap
        since the newest behaviour visible to it. With no UAB (l = 0) the encoder returns exactly these
        tokens."""
        encoder = SuanEncoder(0, 2, 6)
        LayerRunner(encoder, *self.args())
        rng = np.random.default_rng(1)
        table, kernel, bias = rng.normal(size=(7, 8)), rng.normal(size=(1, 8)), rng.normal(size=8)
        for weight, value in zip((encoder.position_table, encoder.time_kernel, encoder.time_bias), (table, kernel, bias)):
            weight.assign(value.astype("float32"))

        def embed_time(gap):
            return np.log1p(gap)[..., None] * kernel[0] + bias

        t = self.hist_t.astype("float64")
        gap = np.zeros((2, 6))
        gap[:, 1:] = np.where(self.valid[:, 1:] & self.valid[:, :-1], t[:, 1:] - t[:, :-1], 0.0)
        expected_history = self.hist + table[None, :6] + embed_time(gap)
        visible = self.args()[3]
        newest = np.where(visible, t[:, None, :], -np.inf).max(axis=-1)  # [B, M]
        self.assertAllClose(self.cand_t[:, 0] - newest[:, 0], [5, 5])
        expected_candidates = self.cand + table[6] + embed_time(self.cand_t - newest)
        tensors = [keras.ops.convert_to_tensor(a) for a in (self.hist, self.valid, self.hist_t, self.profile)]
        history, _ = encoder.encode_history(*tensors)
        self.assertAllClose(history, expected_history, atol=1e-5)
        self.assertAllClose(encoder(*self.args()), expected_candidates, atol=1e-5)
        # An empty history: candidates get gap 0.
        nothing = np.zeros((2, 3, 6), bool)
        empty = [self.hist, self.cand, np.zeros_like(self.valid), nothing, np.zeros_like(self.hist_t), self.cand_t,
                 self.profile]
        self.assertAllClose(encoder(*empty), self.cand + table[6] + embed_time(np.zeros((2, 3))), atol=1e-5)

    def test_cache_methods_take_numpy(self):
        """encode_history and encode_candidates are public entry points (a user runs them outside a
        model): NumPy arrays in give what tensors in give, on every backend."""
        encoder = SuanEncoder(1, 2, 6)
        LayerRunner(encoder, *self.args())
        _, cand, valid, visible, hist_t, cand_t, _ = self.args()
        arrays = (self.hist, valid, hist_t, self.profile)
        out_numpy, cache_numpy = encoder.encode_history(*arrays)
        out_tensor, cache_tensor = encoder.encode_history(*(keras.ops.convert_to_tensor(a) for a in arrays))
        self.assertAllClose(out_numpy, out_tensor, atol=1e-6)
        cache_arrays = keras.tree.map_structure(keras.ops.convert_to_numpy, cache_tensor)
        candidates = (cand, cand_t, visible)
        expected = encoder.encode_candidates(*(keras.ops.convert_to_tensor(a) for a in candidates), cache_tensor)
        self.assertAllClose(encoder.encode_candidates(*candidates, cache_numpy), expected, atol=1e-6)
        self.assertAllClose(encoder.encode_candidates(*candidates, cache_arrays), expected, atol=1e-6)
        # Without the last block's history output: the same cache, so the same candidates' output.
        none, cache_alone = encoder.encode_history(*arrays, history_output=False)
        self.assertIsNone(none)
        self.assertEqual(sorted(cache_alone), sorted(cache_tensor))
        for got, want in zip(keras.tree.flatten(cache_alone), keras.tree.flatten(cache_tensor)):
            self.assertAllClose(got, want, atol=1e-6)

    def test_config_round_trip(self):
        encoder = SuanEncoder(1, 2, 6, window_size=2, dilation=3, alignment_pool="global")
        clone = SuanEncoder.from_config(encoder.get_config())
        self.assertEqual(clone.get_config(), encoder.get_config())
