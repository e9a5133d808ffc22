import numpy as np

from layers.dga_test import dga_reference
from layers.swiglu_test import swiglu_reference
from tests.references import layer_norm
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo import ZooError
from zoo.layers.rest_encoder import ReSTEncoder

rng = np.random.RandomState(0)
TOKENS = rng.normal(size=(3, 5, 6)).astype("float32")  # B = 3, L = 5, D = 6 (behaviour token width)
VALID = np.array([[False, False, True, True, True], [True] * 5, [False] * 5])  # left-padded, full, empty
TIME = np.array(
    [[0, 0, 1_700_000_000, 1_700_000_100, 1_700_090_000],
     [1_600_000_000, 1_600_000_001, 1_600_003_600, 1_600_003_600, 1_600_700_000],
     [0] * 5], dtype="int64")
CONFIG = {"model_dim": 8, "num_heads": 2, "depth": 2, "ffn_dim": 6, "time_granularities": [0, 60]}


def rotation_positions(valid, time, granularities):
    """RoPE/RoTE positions [B, L, H]: the index for τ = 0, floor((t_i - t_1) / τ) otherwise (ReST §2.1)."""
    first = np.argmax(valid, axis=1)
    elapsed = np.where(valid, time - time[np.arange(len(time)), first][:, None], 0)
    index = np.tile(np.arange(time.shape[1]), (len(time), 1))
    return np.stack([index if tau == 0 else elapsed // tau for tau in granularities], axis=-1)


def encoder_reference(layer, tokens, valid, time):
    """T of ReST §2.1 in NumPy from the layer's weights: x = tokens W + b; per layer l, with one α_l,
    Post-LN x <- LN(x + α Sub(x)) for l <= L_switch, Pre-LN x <- x + α Sub(LN(x)) after, Sub = DGA then
    the SwiGLU FFN; H = LN(x)."""
    w = lambda v: to_numpy(v).astype("float64")  # noqa: E731
    x = tokens.astype("float64") @ w(layer.behaviour_projection.kernel) + w(layer.behaviour_projection.bias)
    positions = rotation_positions(valid, time, layer.time_granularities)
    for srn in layer.encoder_layers:
        a = srn.attention
        weights = {n: w(getattr(a, n)) for n in ("w_q", "w_k", "w_v", "w_gv", "w_go", "w_o")}
        sublayers = (
            (lambda h: dga_reference(h, valid, weights, a.num_heads, positions=positions), srn.attention_norm),
            (lambda h: swiglu_reference(h, w(srn.ffn.gate_kernel), w(srn.ffn.up_kernel), w(srn.ffn.down_kernel)),
             srn.ffn_norm),
        )
        alpha = float(to_numpy(srn.alpha))
        for sublayer, norm in sublayers:
            ln = lambda h: layer_norm(h, w(norm.gamma), w(norm.beta), norm.epsilon)  # noqa: E731
            x = ln(x + alpha * sublayer(x)) if srn.post_norm else x + alpha * sublayer(ln(x))
    norm = layer.memory_norm
    return layer_norm(x, w(norm.gamma), w(norm.beta), norm.epsilon)


def nudged(layer, seed):
    """Every weight moved off its initial value (α_l = 0.01 would hide the sublayers)."""
    r = np.random.RandomState(seed)
    layer.set_weights([w + r.normal(0, 0.3, w.shape).astype(w.dtype) for w in layer.get_weights()])
    for srn in layer.encoder_layers:
        srn.alpha.assign(0.5)
    return layer


class ReSTEncoderTest(TestCase):
    def test_layer_basics(self):
        per_layer = 1 + 4 + 6 + 3  # α_l, two LayerNorms, DGA's six matrices, the SwiGLU's three
        self.run_layer_test(
            ReSTEncoder, CONFIG, (TOKENS, VALID, TIME), (3, 5, 8),
            expected_num_trainable_weights=2 + 2 * per_layer + 2,
        )

    def test_matches_reference(self):
        for depth, post_ln in ((2, 1), (6, 2)):  # L_switch Post-LN layers, then Pre-LN ones
            layer = ReSTEncoder(**dict(CONFIG, depth=depth))
            runner = LayerRunner(layer, TOKENS, VALID, TIME)
            nudged(layer, seed=depth)
            self.assertEqual([srn.post_norm for srn in layer.encoder_layers], [l < post_ln for l in range(depth)])
            self.assertAllClose(runner(TOKENS, VALID, TIME), encoder_reference(layer, TOKENS, VALID, TIME), atol=1e-4)

    def test_one_alpha_per_layer(self):
        layer = ReSTEncoder(**CONFIG, name="encoder")
        layer(TOKENS, VALID, TIME)
        alphas = [v.path for v in layer.weights if v.path.endswith("alpha")]
        self.assertEqual(alphas, ["encoder/layer_1/alpha", "encoder/layer_2/alpha"])

    def test_memory_is_causal(self):
        layer = ReSTEncoder(**CONFIG)
        runner = LayerRunner(layer, TOKENS, VALID, TIME)
        nudged(layer, seed=1)
        changed = TOKENS.copy()
        changed[:, 3] += 1.0  # behaviour 3 changes: memory 0..2 does not, memory 3.. does
        before, after = runner(TOKENS, VALID, TIME), runner(changed, VALID, TIME)
        self.assertAllClose(after[:2, :3], before[:2, :3], atol=1e-6)
        self.assertGreater(np.abs(after[:2, 3:] - before[:2, 3:]).max(), 1e-3)

    def test_default_heads_are_one_rope_then_time_granularities(self):
        layer = ReSTEncoder(**dict(CONFIG, num_heads=4, time_granularities=None))
        self.assertIsNone(layer.get_config()["time_granularities"])
        self.assertEqual(layer.encoder_layers[0].attention.time_granularities, [0, 1, 60, 3600])

    def test_bad_granularities_are_a_clear_error(self):
        with self.assertRaisesRegex(ZooError, r"^ReSTEncoder: time_granularities has 3 entries but num_heads is 2$"):
            ReSTEncoder(**dict(CONFIG, time_granularities=[0, 1, 60]))
