import numpy as np

from tests.references import gelu, layer_norm, multi_head_attention
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.manifold_hyper_connection_test import mappings_reference
from zoo.layers.mhc_stack import MHCStack


def inputs():
    rng = np.random.default_rng(0)
    return rng.normal(size=(2, 3, 8)).astype("float32"), np.array([[True, True, True], [True, False, True]])


def connection_weights(connection):
    names = (
        "phi_pre", "phi_post", "phi_res", "alpha_pre", "alpha_post", "alpha_res", "bias_pre", "bias_post", "bias_res"
    )
    return [to_numpy(getattr(connection, name)).astype("float64") for name in names]


class MHCStackTest(TestCase):
    def test_layer_basics(self):
        x, valid = inputs()
        self.run_layer_test(
            MHCStack,
            {"num_layers": 1, "num_heads": 2, "expansion_rate": 2, "sinkhorn_iterations": 3},
            (x,),
            (2, 3, 8),
            call_kwargs={"valid": valid},
        )

    def test_one_layer_in_numpy(self):
        # mHC eq 3 around DeRes eq 1's two sublayers: x <- H^res x + H^post^T F(H^pre x), twice, then
        # the sum of the n streams.
        x, valid = inputs()
        n, iterations = 3, 4
        stack = MHCStack(num_layers=1, num_heads=2, expansion_rate=n, sinkhorn_iterations=iterations)
        runner = LayerRunner(stack, x, valid)
        rng = np.random.default_rng(3)
        layer = stack.sublayers[0]
        for connection in (layer["attention_connection"], layer["ffn_connection"]):
            connection.alpha_res.assign(0.8)  # make H^res mix the streams
            connection.bias_pre.assign(rng.normal(size=n).astype("float32"))
        got = runner(x, valid)

        def step(connection, branch, streams):
            h_pre, h_post, h_res = mappings_reference(streams, *connection_weights(connection), iterations)
            out = branch(np.einsum("btk,btkc->btc", h_pre, streams))
            return np.einsum("btij,btjc->btic", h_res, streams) + h_post[..., None] * out[:, :, None, :]

        def weights(sublayer):
            return [w.astype("float64") for w in sublayer.get_weights()]

        def attention(h):
            gamma, beta = weights(layer["attention_norm"])
            return multi_head_attention(layer_norm(h, gamma, beta), valid, *weights(layer["attention"]))

        def ffn(h):
            gamma, beta = weights(layer["ffn_norm"])
            w1, c1 = weights(layer["ffn_hidden"])
            w2, c2 = weights(layer["ffn_output"])
            return gelu(layer_norm(h, gamma, beta) @ w1 + c1) @ w2 + c2

        streams = np.repeat(x.astype("float64")[:, :, None, :], n, axis=2)
        streams = step(layer["attention_connection"], attention, streams)
        streams = step(layer["ffn_connection"], ffn, streams)
        self.assertAllClose(got, streams.sum(axis=2), atol=1e-4, rtol=1e-4)

    def test_padding_tokens_are_never_read(self):
        x, valid = inputs()
        stack = MHCStack(num_layers=1, num_heads=2, expansion_rate=2, sinkhorn_iterations=2)
        runner = LayerRunner(stack, x, valid)
        before = runner(x, valid)
        x[1, 1] += 5.0  # a padding token of row 1
        after = runner(x, valid)
        self.assertAllClose(after[1, [0, 2]], before[1, [0, 2]], atol=1e-5)
        self.assertAllClose(after[0], before[0], atol=1e-6)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "num_layers is 0"):
            MHCStack(num_layers=0)
        with self.assertRaisesRegex(ZooError, "expansion_rate is 1"):
            MHCStack(expansion_rate=1)
        with self.assertRaisesRegex(ZooError, "dropout"):
            MHCStack(dropout=1.0)
        with self.assertRaisesRegex(ZooError, "divisible"):
            MHCStack(num_layers=1, num_heads=3)(np.zeros((1, 2, 8), "float32"))
