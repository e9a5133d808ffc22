import numpy as np

from layers.pfkv_test import pfkv_reference
from tests.references import sigmoid
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo import ZooError
from zoo.layers.rest_decoder import ReSTDecoder

rng = np.random.RandomState(0)
MEMORY = rng.normal(size=(2, 5, 8)).astype("float32")  # H: B = 2, L = 5, d = 8
VALID = np.array([[False, True, True, True, True], [True] * 5])
HIST_TIME = np.array([[0, 100, 200, 200, 300], [10, 20, 30, 40, 50]], "int64")
CAND = rng.normal(size=(2, 3, 6)).astype("float32")  # M = 3 samples per row, candidate width 6
# row 0: before every behaviour, between, after all; row 1: after all, twice, and at a behaviour's time
CAND_TIME = np.array([[50, 201, 1000], [60, 60, 30]], "int64")
CONTEXT = rng.normal(size=(2, 4)).astype("float32")
USER = rng.normal(size=(2, 5)).astype("float32")
INPUTS = (MEMORY, VALID, HIST_TIME, CAND, CAND_TIME, CONTEXT, USER)
CONFIG = {"model_dim": 8, "num_heads": 2, "depth": 2, "ffn_dim": 6, "mlp_units": (8, 4)}


def decoder_reference(layer, memory, valid, hist_time, cand, cand_time, context, user):
    """C and the head of ReST §2.2 in NumPy from the layer's weights: query tokens [CLS] (learned),
    context, user, candidate (Dense_d); allowed[m, i] = valid_i and t_i < t_m (§2.4); PF-KV layers
    (pfkv_reference); pctr = σ(MLP(concat of the K tokens)). Returns (pctr [B, M], Z [B, M, K, d])."""
    w = lambda v: to_numpy(v).astype("float64")  # noqa: E731
    dense = lambda layer, x: x.astype("float64") @ w(layer.kernel) + w(layer.bias)  # noqa: E731
    b, m = cand.shape[:2]
    projections = layer.token_projections
    tokens = {
        "cls": np.broadcast_to(w(layer.cls_token), (b, m, layer.model_dim)),
        "context": None if context is None else np.repeat(dense(projections["context"], context)[:, None], m, axis=1),
        "user": None if user is None else np.repeat(dense(projections["user"], user)[:, None], m, axis=1),
        "cand": dense(projections["cand"], cand),
    }
    z = np.stack([tokens[t] for t in layer.token_types], axis=2)
    allowed = valid[:, None, :] & (hist_time[:, None, :] < cand_time[:, :, None])  # [B, M, L]
    for pfkv in layer.decoder_layers:
        weights = {n: w(getattr(pfkv, n)) for n in ("w_q", "w_go", "w_o", "w_1", "w_3", "w_2")}
        z = pfkv_reference(z, memory, allowed, weights, pfkv.num_heads)
    x = z.reshape(b, m, -1)
    for hidden in layer.head:
        x = np.maximum(dense(hidden, x), 0.0)
    return sigmoid(dense(layer.head_logit, x)[..., 0]), z


def nudged(layer, seed):
    """Every weight moved off its initial value; the PF-KV LayerNorms stay at γ = 1, β = 0 (what
    pfkv_reference assumes)."""
    r = np.random.RandomState(seed)
    layer.set_weights([w + r.normal(0, 0.3, w.shape).astype(w.dtype) for w in layer.get_weights()])
    for pfkv in layer.decoder_layers:
        for norm in (pfkv.attention_norm, pfkv.ffn_norm):
            norm.set_weights([np.ones(8, "float32"), np.zeros(8, "float32")])
    return layer


class ReSTDecoderTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            ReSTDecoder, CONFIG, INPUTS[:5], (2, 3), call_kwargs={"context": CONTEXT, "user": USER},
            # [CLS], three token projections, two PF-KV layers (6 matrices, 2 LayerNorms), head 3 x Dense
            expected_num_trainable_weights=1 + 3 * 2 + 2 * (6 + 4) + 3 * 2,
        )

    def test_without_context_and_user_tokens(self):
        layer = ReSTDecoder(**dict(CONFIG, depth=1, token_types=["cls", "cand"]))
        runner = LayerRunner(layer, *INPUTS[:5])
        self.assertLen(layer.trainable_weights, 1 + 2 + (6 + 4) + 3 * 2)
        self.assertEqual(layer.decoder_layers[0].num_token_types, 2)
        nudged(layer, seed=3)
        pctr, _ = decoder_reference(layer, *INPUTS[:5], None, None)
        self.assertAllClose(runner(*INPUTS[:5]), pctr, atol=1e-5)

    def test_matches_reference(self):
        layer = ReSTDecoder(**CONFIG)
        runner = LayerRunner(layer, *INPUTS)
        nudged(layer, seed=1)
        pctr, z = decoder_reference(layer, *INPUTS)
        self.assertAllClose(runner(*INPUTS), pctr, atol=1e-5)
        # the decoded tokens the training losses read: [CLS], context, user, candidate
        decoded = ReSTDecoder.from_config(layer.get_config())
        runner = LayerRunner(lambda *x: decoded(*x, return_decoded=True), *INPUTS)
        decoded.set_weights(layer.get_weights())
        outputs = runner(*INPUTS)
        self.assertAllClose(outputs[0], pctr, atol=1e-5)
        self.assertAllClose(outputs[1], z, atol=1e-4)

    def test_sample_reads_only_behaviours_before_its_time(self):
        layer = ReSTDecoder(**CONFIG)
        runner = LayerRunner(lambda *x: layer(*x, return_decoded=True)[1], *INPUTS)  # Z [B, M, K, d]
        nudged(layer, seed=2)
        before = runner(*INPUTS)
        memory = MEMORY.copy()
        memory[0, 4] += 1.0  # row 0's behaviour at t = 300
        after = runner(memory, *INPUTS[1:])
        self.assertAllClose(after[0, :2], before[0, :2], atol=1e-6)  # samples at t = 50 and 201
        self.assertGreater(np.abs(after[0, 2] - before[0, 2]).max(), 1e-3)  # the sample at t = 1000 sees it

    def test_bad_configuration_is_a_clear_error(self):
        with self.assertRaisesRegex(ZooError, r"^ReSTDecoder: token_types is \['cand', 'cls'\]; it must keep"):
            ReSTDecoder(**CONFIG, token_types=["cand", "cls"])
        with self.assertRaisesRegex(ZooError, "must keep the order .* and hold 'cls' and 'cand'$"):
            ReSTDecoder(**CONFIG, token_types=["context", "cand"])
        with self.assertRaisesRegex(ZooError, r"^ReSTDecoder: the user token needs the `user` input$"):
            ReSTDecoder(**CONFIG)(*INPUTS[:5], context=CONTEXT)
        with self.assertRaisesRegex(ZooError, r"^ReSTDecoder: the memory H has width 8 but model_dim is 4$"):
            ReSTDecoder(**dict(CONFIG, model_dim=4))(*INPUTS)
