import numpy as np

from tests.references import rms_norm
from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.per_token_swiglu_test import per_token_swiglu_reference
from zoo.layers.token_mixing_test import mixing_reference
from zoo.layers.tokenmixer_large_block import TokenMixerLargeBlock


def revert_reference(h, tokens):
    """The inverse of mixing_reference: token t's head h is the t-th D/H slice of mixed token h."""
    batch, heads, width = h.shape[0], h.shape[1], h.shape[2] // tokens
    return np.stack(
        [np.concatenate([h[:, j, t * width : (t + 1) * width] for j in range(heads)], axis=-1) for t in range(tokens)],
        axis=1,
    )


class TokenMixerLargeBlockTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
        self.run_layer_test(TokenMixerLargeBlock, {"num_heads": 4, "expansion": 2}, x, (2, 3, 8))

    def test_equations_12_and_16(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, 3, 8)).astype("float32")
        block = TokenMixerLargeBlock(num_heads=2, expansion=2)
        runner = LayerRunner(block, x)
        weights = [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in block.weights]
        block.set_weights(weights)
        w = {v.path.split("/")[-2] + "/" + v.name: value.astype("float64") for v, value in zip(block.weights, weights)}
        x64 = x.astype("float64")
        h = mixing_reference(x64, 2)  # [B, 2, 12]
        h = per_token_swiglu_reference(
            rms_norm(h) * w["mix_norm/scale"],
            w["mix_ffn/gate_kernel"], w["mix_ffn/up_kernel"], w["mix_ffn/down_kernel"],
        ) + h
        reverted = revert_reference(h, 3)
        expected = per_token_swiglu_reference(
            rms_norm(reverted) * w["revert_norm/scale"],
            w["revert_ffn/gate_kernel"], w["revert_ffn/up_kernel"], w["revert_ffn/down_kernel"],
        ) + x64
        self.assertAllClose(runner(x), expected, atol=1e-4, rtol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            TokenMixerLargeBlock(num_heads=0)
        with self.assertRaisesRegex(ZooError, "not divisible"):
            TokenMixerLargeBlock(num_heads=3)(np.zeros((1, 2, 8), "float32"))
