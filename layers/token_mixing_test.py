import numpy as np

from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.token_mixing import TokenMixing


def mixing_reference(x, heads):
    """RankMixer §3.3.1: s^h = Concat(x_1^(h), ..., x_T^(h)), x_t^(h) the h-th D/H slice of token t."""
    batch, tokens, d = x.shape
    width = d // heads
    return np.stack(
        [np.concatenate([x[:, t, h * width : (h + 1) * width] for t in range(tokens)], axis=-1) for h in range(heads)],
        axis=1,
    )


class TokenMixingTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
        self.run_layer_test(TokenMixing, {"num_heads": 4}, x, (2, 4, 6), expected_num_trainable_weights=0)

    def test_matches_rankmixer_and_reverts(self):
        x = np.random.default_rng(1).normal(size=(2, 3, 12)).astype("float32")
        for heads in (3, 4, 2):  # RankMixer's H = T, and any other H dividing D
            layer = TokenMixing(heads)
            mixed = np.asarray(LayerRunner(layer, x)(x))
            self.assertAllClose(mixed, mixing_reference(x, heads))
            self.assertAllClose(layer.revert(mixed, num_tokens=3), x)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            TokenMixing(0)
        with self.assertRaisesRegex(ZooError, "not divisible"):
            TokenMixing(3)(np.zeros((1, 2, 8), "float32"))
