import numpy as np

from tests.references import gelu, layer_norm, sigmoid, softmax
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.causal_transformer_block import CausalTransformerBlock

VALID = np.array([[False, False, True, True, True], [True, True, True, True, True]])

# The four baselines built from the block (see its docstring).
VARIANTS = {
    "trans": {"norm": "layer", "norm_position": "pre", "ffn": "gelu", "rope": True, "use_bias": True},
    "llama": {"norm": "rms", "norm_position": "pre", "ffn": "swiglu", "rope": True, "use_bias": False},
    "sasrec": {"norm": "layer", "norm_position": "pre", "ffn": "relu", "rope": False, "use_bias": True},
    "bst": {"norm": "layer", "norm_position": "post", "ffn": "leaky_relu", "rope": False, "use_bias": True},
}


def rope(x, base=10000.0):
    """RoFormer's rotation at the sequence index i, half-split pairs (x_j, x_{j+K/2}) turned by i·θ_j.

    x [B, n, H, K]."""
    n, k = x.shape[1], x.shape[-1]
    theta = base ** (-2.0 * np.arange(k // 2) / k)
    angle = np.arange(n)[:, None] * theta  # [n, K/2]
    cos, sin = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
    x1, x2 = x[..., : k // 2], x[..., k // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def causal_attention(x, valid, w, use_rope, use_bias):
    """MH(X) = [head_1..head_H] W^O, head_h = softmax(Q_h K_h^T / sqrt(d_h)) V_h over keys j <= i, valid."""
    bias = (lambda name: w[name]) if use_bias else (lambda name: 0.0)
    q = np.einsum("bnd,dhk->bnhk", x, w["query_kernel"]) + bias("query_bias")
    k = np.einsum("bnd,dhk->bnhk", x, w["key_kernel"]) + bias("key_bias")
    v = np.einsum("bnd,dhk->bnhk", x, w["value_kernel"]) + bias("value_bias")
    if use_rope:
        q, k = rope(q), rope(k)
    n = x.shape[1]
    allowed = np.tril(np.ones((n, n), bool))[None] & valid[:, None, :]  # [B, n, n]
    logits = np.einsum("bihk,bjhk->bhij", q, k) / np.sqrt(q.shape[-1])
    probs = softmax(np.where(allowed[:, None], logits, -1e30)) * allowed[:, None]  # no allowed key: reads nothing
    heads = np.einsum("bhij,bjhk->bihk", probs, v)
    return np.einsum("bihk,hkd->bid", heads, w["output_kernel"]) + bias("output_bias")


def reference(x, valid, w, variant):
    norm_kind, position, ffn = variant["norm"], variant["norm_position"], variant["ffn"]

    def norm(v, which):
        if norm_kind == "rms":
            return v / np.sqrt(np.mean(v**2, -1, keepdims=True) + 1e-6) * w[f"{which}_scale"]
        return layer_norm(v, w[f"{which}_gamma"], w[f"{which}_beta"])

    def feed_forward(v):
        if ffn == "swiglu":
            a = v @ w["gate_kernel"]
            return (a * sigmoid(a) * (v @ w["up_kernel"])) @ w["down_kernel"]
        h = v @ w["hidden_kernel"] + w["hidden_bias"]
        leaky_relu = lambda z: np.where(z > 0, z, 0.2 * z)  # noqa: E731
        h = {"gelu": gelu, "relu": lambda z: np.maximum(z, 0), "leaky_relu": leaky_relu}[ffn](h)
        return h @ w["out_kernel"] + w["out_bias"]

    attend = lambda v: causal_attention(v, valid, w, variant["rope"], variant["use_bias"])  # noqa: E731
    if position == "pre":
        y = x + attend(norm(x, "attention"))
        return y + feed_forward(norm(y, "ffn"))
    y = norm(x + attend(x), "attention")
    return norm(y + feed_forward(y), "ffn")


def randomize(layer, seed):
    """Random weights (norm scales around 1), returned by the equation's names."""
    rng = np.random.RandomState(seed)
    for variable in layer.weights:
        value = rng.normal(scale=0.4, size=variable.shape)
        if variable.path.endswith(("gamma", "scale")):
            value += 1.0
        variable.assign(value.astype("float32"))
    names = ("query_kernel", "key_kernel", "value_kernel", "output_kernel")
    if layer.use_bias:
        names += ("query_bias", "key_bias", "value_bias", "output_bias")
    w = {name: to_numpy(getattr(layer, name)) for name in names}
    for which, norm in (("attention", layer.attention_norm), ("ffn", layer.ffn_norm)):
        if layer.norm == "rms":
            w[f"{which}_scale"] = to_numpy(norm.scale)
        else:
            w[f"{which}_gamma"], w[f"{which}_beta"] = to_numpy(norm.gamma), to_numpy(norm.beta)
    if layer.ffn == "swiglu":
        w.update({name: to_numpy(getattr(layer.swiglu, name)) for name in ("gate_kernel", "up_kernel", "down_kernel")})
    else:
        w["hidden_kernel"], w["out_kernel"] = to_numpy(layer.ffn_hidden.kernel), to_numpy(layer.ffn_output.kernel)
        w["hidden_bias"] = to_numpy(layer.ffn_hidden.bias) if layer.use_bias else 0.0
        w["out_bias"] = to_numpy(layer.ffn_output.bias) if layer.use_bias else 0.0
    return w


class CausalTransformerBlockTest(TestCase):
    def test_layer_basics(self):
        x = np.random.RandomState(0).rand(2, 5, 8).astype("float32")
        self.run_layer_test(
            CausalTransformerBlock, {"num_heads": 2, "ffn_dim": 12, **VARIANTS["llama"]}, (x, VALID), (2, 5, 8),
            expected_num_trainable_weights=9,  # Q, K, V, O, two RMSNorm scales, SwiGLU's three kernels
        )
        self.run_layer_test(
            CausalTransformerBlock, {"num_heads": 2, "ffn_dim": 12, "dropout": 0.1, **VARIANTS["bst"]}, (x, VALID),
            (2, 5, 8), expected_num_trainable_weights=16, run_mixed_precision_check=False,
        )

    def test_matches_the_equations_of_each_variant(self):
        x = np.random.RandomState(1).normal(size=(2, 5, 8)).astype("float32")
        for seed, (name, variant) in enumerate(VARIANTS.items()):
            with self.subTest(variant=name):
                layer = CausalTransformerBlock(num_heads=2, ffn_dim=6, **variant)
                layer(x, VALID)
                w = randomize(layer, seed)
                self.assertAllClose(layer(x, VALID), reference(x, VALID, w, variant), atol=2e-4, rtol=2e-4)

    def test_causal_and_padding_keys_never_read(self):
        rng = np.random.RandomState(2)
        x = rng.normal(size=(2, 5, 8)).astype("float32")
        layer = LayerRunner(CausalTransformerBlock(num_heads=2, ffn_dim=6, **VARIANTS["llama"]), x, VALID)
        before = layer(x, VALID)
        later = x.copy()
        later[:, 3:] += 5.0  # tokens 3, 4 change: the outputs of tokens 0..2 stay
        after = layer(later, VALID)
        self.assertAllClose(after[:, :3], before[:, :3], atol=1e-5)
        self.assertFalse(np.allclose(after[:, 3:], before[:, 3:]))
        padded = x.copy()
        padded[0, :2] -= 7.0  # the padding of row 0 changes: its real tokens 2..4 stay
        self.assertAllClose(layer(padded, VALID)[0, 2:], before[0, 2:], atol=1e-5)

    def test_dropout_only_while_training(self):
        x = np.random.RandomState(3).normal(size=(2, 5, 8)).astype("float32")
        layer = CausalTransformerBlock(num_heads=2, ffn_dim=6, dropout=0.5, **VARIANTS["sasrec"])
        layer(x, VALID)
        w = randomize(layer, 7)
        self.assertAllClose(layer(x, VALID, training=False), reference(x, VALID, w, VARIANTS["sasrec"]), atol=2e-4)
        self.assertFalse(np.allclose(to_numpy(layer(x, VALID, training=True)), to_numpy(layer(x, VALID))))

    def test_bad_arguments_give_one_line(self):
        for kwargs, message in (
            ({"num_heads": 0}, "num_heads is 0"),
            ({"ffn_dim": -2}, "ffn_dim is -2"),
            ({"norm": "batch"}, "norm is 'batch'"),
            ({"norm_position": "middle"}, "norm_position is 'middle'"),
            ({"ffn": "tanh"}, "ffn is 'tanh'"),
            ({"dropout": 1.0}, "dropout is 1.0"),
        ):
            with self.assertRaisesRegex(ZooError, message):
                CausalTransformerBlock(**{"num_heads": 2, "ffn_dim": 4, **kwargs})
        with self.assertRaisesRegex(ZooError, "width 8 is not divisible by num_heads 3"):
            CausalTransformerBlock(num_heads=3, ffn_dim=4)(np.zeros((1, 2, 8), "float32"), np.ones((1, 2), bool))
        with self.assertRaisesRegex(ZooError, "RoPE needs an even head width"):
            block = CausalTransformerBlock(num_heads=2, ffn_dim=4, rope=True)
            block(np.zeros((1, 2, 6), "float32"), np.ones((1, 2), bool))
