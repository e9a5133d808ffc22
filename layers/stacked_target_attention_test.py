import numpy as np

from tests.references import layer_norm
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.stacked_target_attention import StackedTargetAttention
from zoo.layers.swiglu_test import swiglu_reference
from zoo.layers.target_cross_attention_test import target_attention_reference

ALLOWED = np.array(
    [[[False, True, True, False], [False, False, False, False]],
     [[True, True, True, True], [True, True, False, False]]]
)


def stca_reference(target, history, allowed, w, num_layers):
    """q1 = LN(SwiGLU(x_t)); z_i = MHA_i(q_i, LN_i(SwiGLU_i(X))); q_{i+1} = W_f [z_1..z_i; x_t]; out z_N."""
    query = layer_norm(swiglu_reference(target, *w["target_ffn"]), *w["target_norm"])
    outputs = []
    for i in range(num_layers):
        if i:
            kernel, bias = w["fusion"][i - 1]
            query = np.concatenate(outputs + [target], axis=-1) @ kernel + bias
        memory = layer_norm(swiglu_reference(history, *w["history_ffn"][i]), *w["history_norm"][i])
        outputs.append(target_attention_reference(query, memory, allowed, w["attention"][i]))
    return outputs[-1]


def randomize(layer, seed):
    rng = np.random.RandomState(seed)
    for variable in layer.weights:
        value = rng.normal(scale=0.5, size=variable.shape)
        variable.assign((value + 1.0 if variable.path.endswith("gamma") else value).astype("float32"))
    numpy = lambda v: to_numpy(v)  # noqa: E731
    swiglu = lambda s: [numpy(s.gate_kernel), numpy(s.up_kernel), numpy(s.down_kernel)]  # noqa: E731
    norm = lambda n: [numpy(n.gamma), numpy(n.beta)]  # noqa: E731
    attention = lambda a: {name: numpy(getattr(a, name)) for name in (  # noqa: E731
        "query_kernel", "key_kernel", "value_kernel", "output_kernel", "query_bias", "key_bias", "value_bias",
        "output_bias")}
    return {
        "target_ffn": swiglu(layer.target_ffn),
        "target_norm": norm(layer.target_norm),
        "history_ffn": [swiglu(s) for s in layer.history_ffns],
        "history_norm": [norm(n) for n in layer.history_norms],
        "attention": [attention(a) for a in layer.attentions],
        "fusion": [[numpy(f.kernel), numpy(f.bias)] for f in layer.fusions],
    }


class StackedTargetAttentionTest(TestCase):
    def test_layer_basics(self):
        rng = np.random.RandomState(0)
        inputs = (rng.rand(2, 2, 6).astype("float32"), rng.rand(2, 4, 6).astype("float32"), ALLOWED)
        # SwiGLU 3 + LN 2 for the target; per layer SwiGLU 3 + LN 2 + attention 8; fusion 2 for layer 2
        self.run_layer_test(
            StackedTargetAttention, {"num_layers": 2, "num_heads": 2, "ffn_dim": 5}, inputs, (2, 2, 6),
            expected_num_trainable_weights=5 + 2 * 13 + 2,
        )

    def test_matches_the_stca_equations(self):
        rng = np.random.RandomState(1)
        target = rng.normal(size=(2, 2, 6)).astype("float32")
        history = rng.normal(size=(2, 4, 6)).astype("float32")
        for num_layers in (1, 3):
            with self.subTest(num_layers=num_layers):
                layer = StackedTargetAttention(num_layers=num_layers, num_heads=3, ffn_dim=4)
                layer(target, history, ALLOWED)
                w = randomize(layer, num_layers)
                expected = stca_reference(target, history, ALLOWED, w, num_layers)
                self.assertAllClose(layer(target, history, ALLOWED), expected, atol=2e-4, rtol=2e-4)

    def test_hidden_behaviours_and_other_candidates_never_reach_a_candidate(self):
        rng = np.random.RandomState(2)
        target = rng.normal(size=(2, 2, 6)).astype("float32")
        history = rng.normal(size=(2, 4, 6)).astype("float32")
        layer = LayerRunner(StackedTargetAttention(num_layers=2, num_heads=2, ffn_dim=4), target, history, ALLOWED)
        before = layer(target, history, ALLOWED)
        hidden = history.copy()
        hidden[0, [0, 3]] += 3.0  # not allowed for row 0, candidate 0
        other = target.copy()
        other[:, 1] += 1.0
        self.assertAllClose(layer(target, hidden, ALLOWED)[0, 0], before[0, 0], atol=1e-5)
        self.assertAllClose(layer(other, history, ALLOWED)[:, 0], before[:, 0], atol=1e-5)

    def test_bad_arguments_give_one_line(self):
        for kwargs, message in (({"num_layers": 0}, "num_layers is 0"), ({"num_heads": -1}, "num_heads is -1"),
                                ({"ffn_dim": 1.5}, "ffn_dim is 1.5")):
            with self.assertRaisesRegex(ZooError, message):
                StackedTargetAttention(**{"num_layers": 1, "num_heads": 2, "ffn_dim": 4, **kwargs})
        with self.assertRaisesRegex(ZooError, "width 6 is not divisible by num_heads 4"):
            StackedTargetAttention(1, 4, 4)(np.zeros((1, 1, 6), "float32"), np.zeros((1, 2, 6), "float32"),
                                            np.ones((1, 1, 2), bool))
