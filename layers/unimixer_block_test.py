import numpy as np

from tests.references import rms_norm
from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.per_token_swiglu_test import per_token_swiglu_reference
from zoo.layers.unimixer_block import UniMixerBlock
from zoo.layers.unimixing_test import unimixing_reference


class UniMixerBlockTest(TestCase):
    def test_layer_basics(self):
        rng = np.random.default_rng(0)
        x, y = rng.normal(size=(2, 3, 4)).astype("float32"), rng.normal(size=(2, 3, 4)).astype("float32")
        self.run_layer_test(UniMixerBlock, {"block_size": 2, "expansion": 2}, (x, y), (2, 3, 4))

    def test_siamese_streams_in_numpy(self):
        # U = X + Norm_Y(Y), M = UniMixing(U), O = pSwiGLU(M) + M, X' = Norm_X(X + O), Y' = Y + O
        rng = np.random.default_rng(1)
        x, y = rng.normal(size=(2, 3, 4)).astype("float32"), rng.normal(size=(2, 3, 4)).astype("float32")
        block = UniMixerBlock(block_size=2, expansion=2, sinkhorn_iterations=3, temperature=0.7)
        runner = LayerRunner(block, x, y)
        weights = [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in block.weights]
        block.set_weights(weights)
        w = {v.path.split("/")[-2] + "/" + v.name: value.astype("float64") for v, value in zip(block.weights, weights)}
        x64, y64 = x.astype("float64"), y.astype("float64")
        u = x64 + rms_norm(y64) * w["norm_y/scale"]
        m = unimixing_reference(u, w["mixing/local_logits"], w["mixing/global_logits"], 2, 0.7, 3)
        o = per_token_swiglu_reference(m, w["ffn/gate_kernel"], w["ffn/up_kernel"], w["ffn/down_kernel"]) + m
        got_x, got_y = runner(x, y)
        self.assertAllClose(got_x, rms_norm(x64 + o) * w["norm_x/scale"], atol=1e-4, rtol=1e-4)
        self.assertAllClose(got_y, y64 + o, atol=1e-4, rtol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "expansion is 0"):
            UniMixerBlock(block_size=2, expansion=0)
        with self.assertRaisesRegex(ZooError, "block_size is -1"):
            UniMixerBlock(block_size=-1)
