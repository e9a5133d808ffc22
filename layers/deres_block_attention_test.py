import numpy as np

from tests.references import block_weights, rms_norm
from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.deres_block_attention import DeResBlockAttention


def reference_alpha(blocks, w, weighting):
    """DeRes eq 4 (softmax over b), eq 8 (SiLU) or ReLU of w_l . RMSNorm(B_b); blocks [B, n, S, w]."""
    return block_weights(np.einsum("bnsw,w->bns", rms_norm(blocks), w), weighting)


def layer_with_query(weighting, w):
    layer = DeResBlockAttention(weighting)
    layer.build((None, None, None, w.shape[0]))
    layer.query.assign(w)
    return layer


class DeResBlockAttentionTest(TestCase):
    def test_layer_basics(self):
        blocks = np.random.rand(2, 3, 4, 6).astype("float32")
        self.run_layer_test(DeResBlockAttention, {"weighting": "softmax"}, blocks, (2, 3, 4))

    def test_matches_numpy_in_every_weighting(self):
        rng = np.random.default_rng(0)
        blocks = rng.normal(size=(2, 3, 4, 6)).astype("float32")
        w = rng.normal(size=6).astype("float32")
        for weighting in ("softmax", "silu", "relu"):
            alpha = layer_with_query(weighting, w)(blocks)
            self.assertAllClose(alpha, reference_alpha(blocks, w, weighting), atol=1e-5, msg=weighting)

    def test_cached_inverse_rms_gives_the_same_weights(self):
        # A connector passes each block's 1 / RMS, computed once when the block is written.
        rng = np.random.default_rng(5)
        blocks = rng.normal(size=(2, 3, 4, 6)).astype("float32") * rng.uniform(0.5, 3.0, (2, 3, 4, 1)).astype("float32")
        w = rng.normal(size=6).astype("float32")
        layer = layer_with_query("silu", w)
        scales = np.stack([to_numpy(layer.inverse_rms(blocks[:, :, s])) for s in range(4)], axis=2)
        self.assertAllClose(scales, 1.0 / np.sqrt(np.mean(blocks**2, axis=-1) + 1e-6), rtol=1e-5)
        self.assertAllClose(layer(blocks, scales), reference_alpha(blocks, w, "silu"), atol=1e-5)

    def test_a_list_of_blocks_gives_the_stacked_weights(self):
        rng = np.random.default_rng(6)
        blocks = rng.normal(size=(2, 3, 4, 6)).astype("float32")
        w = rng.normal(size=6).astype("float32")
        for weighting in ("softmax", "silu"):
            layer = layer_with_query(weighting, w)
            listed = [blocks[:, :, s] for s in range(4)]
            expected = reference_alpha(blocks, w, weighting)
            self.assertAllClose(layer(listed), expected, atol=1e-5, msg=weighting)
            scales = [layer.inverse_rms(block) for block in listed]
            self.assertAllClose(layer(listed, scales), expected, atol=1e-5, msg=weighting)

    def test_pointwise_weights_are_independent_and_can_be_negative(self):
        # Three blocks: B_0 and B_1 both aligned with w_l, B_2 opposed to it (DeRes "Pointwise AttnRes").
        w = np.array([3.0, 0.0, 0.0, 0.0], "float32")
        blocks = np.array([[[[2.0, 1.0, 0, 0], [1.0, 0.5, 0, 0], [-1.0, 0.2, 0, 0]]]], "float32")  # [1, 1, 3, 4]
        silu = to_numpy(layer_with_query("silu", w)(blocks))[0, 0]
        softmax = to_numpy(layer_with_query("softmax", w)(blocks))[0, 0]
        # SiLU: two blocks take large positive weights at once, the opposed block a negative one.
        self.assertGreater(silu[0], 1.0)
        self.assertGreater(silu[1], 1.0)
        self.assertLess(silu[2], 0.0)
        # Softmax on the same blocks: non-negative and summing to 1, and the two aligned blocks cannot
        # both take large weights: together they get less than 1.
        self.assertAllClose(softmax.sum(), 1.0)
        self.assertTrue(np.all(softmax >= 0.0))
        self.assertLess(softmax[0] + softmax[1], 1.0)
        # Zero-sum competition: making B_1 more relevant takes weight from B_0 under softmax only.
        stronger = blocks.copy()
        stronger[0, 0, 1] = [3.0, 0.1, 0, 0]
        silu_after = to_numpy(layer_with_query("silu", w)(stronger))[0, 0]
        softmax_after = to_numpy(layer_with_query("softmax", w)(stronger))[0, 0]
        self.assertLess(softmax_after[0], softmax[0] - 0.1)
        self.assertAllClose(silu_after[0], silu[0])
        self.assertGreater(silu_after[1], silu[1])

    def test_relu_cuts_the_negative_branch(self):
        w = np.array([1.0, 0.0], "float32")
        blocks = np.array([[[[-1.0, 0.5], [1.0, 0.5]]]], "float32")
        alpha = to_numpy(layer_with_query("relu", w)(blocks))[0, 0]
        self.assertEqual(alpha[0], 0.0)
        self.assertGreater(alpha[1], 0.0)

    def test_unknown_weighting(self):
        with self.assertRaisesRegex(ZooError, "weighting"):
            DeResBlockAttention("sparsemax")
