import keras
import numpy as np

from tests.references import block_weights, deres_layer_branch, rms_norm, sigmoid
from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.deres import DeRes

D, N, BATCH = 8, 3, 2  # d, tokens n, rows


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, N, D)).astype("float32")
    valid = np.array([[True, True, True], [True, False, True]])
    return x, valid


def built(x, valid, seed=0, **kwargs):
    """A DeRes layer with every weight drawn from a fixed seed (LayerNorm scales near 1, H_l kept at I)."""
    config = dict(num_layers=2, num_heads=2, num_blocks=1)
    config.update(kwargs)
    layer = DeRes(**config)
    layer(x, valid=valid)
    rng = np.random.default_rng(seed + 100)
    for w in layer.weights:
        if "residual_matrix" in w.path:
            continue
        scale = 0.1 if "gamma" in w.path else 0.4
        w.assign((1.0 if "gamma" in w.path else 0.0) + scale * rng.normal(size=w.shape).astype("float32"))
    return layer


IDENTITY, ATTNRES = "identity", "attnres"


def branch(layer, l, v, valid, path=IDENTITY):
    """TransformerLayer_l(v) of Algorithm 1 for one path, in NumPy (eq 1; tests/references.py)."""
    sublayers = layer.residual_layers if path == IDENTITY else layer.attnres_layers
    return deres_layer_branch(sublayers[l - 1], v, valid)


class Path2:
    """Algorithm 1 lines 3, 9-10, 14-16 (eq 3-5): block buffer, accumulator, block weights."""

    def __init__(self, layer, d0, weighting, partial=True):
        self.layer, self.weighting, self.partial = layer, weighting, partial
        self.d, self.buffer, self.acc = d0, [d0], None
        self.per_block = layer.num_layers // layer.num_blocks

    def step(self, l, valid):  # l = 1..L
        out = branch(self.layer, l, self.d, valid, ATTNRES)
        self.acc = out if self.acc is None else self.acc + out
        if l % self.per_block == 0:
            self.buffer.append(self.acc)
            self.acc = None
        # The partial block (a non-empty acc) joins the sources, as in Attention Residuals; the literal
        # Algorithm 1 (line 14) reads BlockBuf only.
        sources = self.buffer + ([] if self.acc is None or not self.partial else [self.acc])
        w_l = to_numpy(self.layer.block_attentions[l - 1].query)
        logits = np.stack([rms_norm(b) @ w_l for b in sources], axis=-1)  # [B, n, S]
        alpha = block_weights(logits, self.weighting)
        self.d = sum(alpha[..., b, None] * sources[b] for b in range(len(sources)))
        return self.d


def reference_algorithm_1(layer, x, valid, weighting, feed="fused", fusion="gated", partial=True):
    """DeRes Algorithm 1 in NumPy; feed="paths" is the literal reading, "fused" feeds x_{l-1} to Path 1;
    partial=False attends to the completed blocks only (line 14 literally)."""
    x = x.astype("float64")
    half = x.shape[-1] // 2
    r, path2 = x[..., :half], Path2(layer, x[..., half:], weighting, partial)
    fused = r
    for l in range(1, layer.num_layers + 1):
        source = fused if feed == "fused" else r
        r = source + branch(layer, l, source, valid)  # eq 2
        d = path2.step(l, valid)  # eq 3-5
        if fusion == "gated":
            w_g, b_g = [to_numpy(w) for w in layer.gates[l - 1].weights]
            gamma = sigmoid(np.concatenate([r, d], -1) @ w_g + b_g)  # eq 6
            fused = gamma * r + (1.0 - gamma) * d  # eq 7
        else:
            fused = r + d
    w_p, b_p = [to_numpy(w) for w in layer.output_projection.weights]
    return fused @ w_p + b_p


def set_gates(layer, value):
    """gamma_l == value for every l (W_g = 0, b_g = +-60 saturates the sigmoid)."""
    for gate in layer.gates:
        kernel, bias = gate.get_weights()
        gate.set_weights([np.zeros_like(kernel), np.full_like(bias, 60.0 if value == 1 else -60.0)])


def gradients(layer, x, valid, variables):
    """d(sum(c * layer(x)))/d(variables) with the backend's own autodiff (test-only helper)."""
    c = np.random.default_rng(7).normal(size=(BATCH, N, D)).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x, valid=valid) * c)
        grads = tape.gradient(loss, [v.value for v in variables])
        return [np.zeros(v.shape) if g is None else np.asarray(g) for v, g in zip(variables, grads)]
    if backend == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss(values):
            out, _ = layer.stateless_call(values, non_trainable, x, valid=valid)
            return (out * c).sum()

        grads = jax.jit(jax.grad(loss))(trainable)
        by_path = {v.path: g for v, g in zip(layer.trainable_variables, grads)}
        return [np.asarray(by_path[v.path]) for v in variables]
    import torch

    loss = (layer(x, valid=valid) * torch.as_tensor(c)).sum()
    loss.backward()
    return [np.zeros(v.shape) if v.value.grad is None else v.value.grad.cpu().numpy() for v in variables]


class DeResTest(TestCase):
    def test_layer_basics(self):
        x, valid = inputs()
        self.run_layer_test(
            DeRes, {"num_layers": 2, "num_heads": 2, "num_blocks": 1, "residual_matrix": "learnable"}, (x,),
            (BATCH, N, D), call_kwargs={"valid": valid},
        )

    def test_algorithm_1_in_numpy(self):
        x, valid = inputs()
        cases = [
            ("silu", "fused", 4, 2),  # L/B = 2: partial blocks at l = 1, 3
            ("softmax", "fused", 2, 1),  # one block: a partial block at l = 1
            ("silu", "paths", 2, 2),  # B = L: every layer writes a block
            ("softmax", "paths", 2, 2),
        ]
        for weighting, feed, layers, blocks in cases:
            layer = built(x, valid, weighting=weighting, feed=feed, num_layers=layers, num_blocks=blocks)
            expected = reference_algorithm_1(layer, x, valid, weighting, feed)
            self.assertAllClose(layer(x, valid=valid), expected, atol=2e-4, msg=f"{weighting}/{feed}/L={layers}/B={blocks}")

    def test_literal_algorithm_1_attends_to_completed_blocks_only(self):
        x, valid = inputs()
        layer = built(x, valid, weighting="silu", num_layers=4, num_blocks=2, attend_partial_block=False)
        expected = reference_algorithm_1(layer, x, valid, "silu", partial=False)
        self.assertAllClose(layer(x, valid=valid), expected, atol=2e-4)
        self.assertFalse(np.allclose(expected, reference_algorithm_1(layer, x, valid, "silu", partial=True), atol=1e-3))
        # Layer 1 (l = 1 of L/B = 2) sees only B_0, layer 2 the completed B_0 and B_1.
        self.assertEqual(layer.introspect(x, valid)["alpha_available"].sum(axis=1).tolist(), [1, 2, 2, 3])

    def test_dropout_acts_in_training_only(self):
        x, valid = inputs()
        layer = built(x, valid, num_layers=2, num_blocks=2, dropout=0.5)
        self.assertEqual(layer.get_config()["dropout"], 0.5)
        inference = to_numpy(layer(x, valid=valid))
        self.assertAllClose(layer(x, valid=valid, training=False), inference)
        self.assertFalse(np.allclose(to_numpy(layer(x, valid=valid, training=True)), inference, atol=1e-4))

    def test_additive_fusion_and_relu(self):
        x, valid = inputs()
        layer = built(x, valid, weighting="relu", fusion="additive")
        self.assertEqual(layer.gates, [])
        expected = reference_algorithm_1(layer, x, valid, "relu", fusion="additive")
        self.assertAllClose(layer(x, valid=valid), expected, atol=2e-4)

    def test_gate_one_is_residual_only_and_gate_zero_is_attnres_only(self):
        # Proposition 1's construction: gamma == 1 recovers the identity path, gamma == 0 Path 2.
        x, valid = inputs()
        for feed in ("fused", "paths"):
            layer = built(x, valid, feed=feed)
            w_p, b_p = [to_numpy(w) for w in layer.output_projection.weights]
            r = x[..., : D // 2].astype("float64")
            for l in range(1, layer.num_layers + 1):
                r = r + branch(layer, l, r, valid)  # x_l = x_{l-1} + f_l(x_{l-1})
            set_gates(layer, 1)
            self.assertAllClose(layer(x, valid=valid), r @ w_p + b_p, atol=2e-4, msg=feed)
            path2 = Path2(layer, x[..., D // 2 :].astype("float64"), "silu")
            for l in range(1, 3):
                d = path2.step(l, valid)
            set_gates(layer, 0)
            self.assertAllClose(layer(x, valid=valid), d @ w_p + b_p, atol=2e-4, msg=feed)

    def test_single_path_variants(self):
        x, valid = inputs()
        residual = built(x, valid, paths="residual-only")
        expected = x.astype("float64")
        for l in range(1, residual.num_layers + 1):
            expected = expected + branch(residual, l, expected, valid)
        self.assertAllClose(residual(x, valid=valid), expected, atol=2e-4)
        attnres = built(x, valid, paths="attnres-only", weighting="softmax")
        path2 = Path2(attnres, x.astype("float64"), "softmax")
        for l in range(1, 3):
            d = path2.step(l, valid)
        self.assertAllClose(attnres(x, valid=valid), d, atol=2e-4)
        for layer in (residual, attnres):
            self.assertEqual((layer.gates, layer.output_projection), ([], None))

    def test_identity_path_keeps_what_learnable_residual_matrices_shrink(self):
        # Proposition 2, in what it means: H_l sharing a weakest direction q with sigma_min = rho < 1
        # shrinks a signal along q by rho^L, while H_l = I keeps its norm.
        x, valid = inputs()
        rho, L = 0.5, 3
        q_basis = np.linalg.qr(np.random.default_rng(3).normal(size=(D, D)))[0]
        q = q_basis[:, 0]
        signal = np.broadcast_to(3.0 * q, x.shape).astype("float32")

        def layer_with(matrices):
            """matrices=None: the shipped identity path (residual_matrix="identity")."""
            kind = "identity" if matrices is None else "learnable"
            layer = built(x, valid, paths="residual-only", residual_matrix=kind, num_layers=L)
            for sublayer in layer.residual_layers:  # f_l == 0: only the residual transitions act
                for w in (sublayer.output_kernel, sublayer.output_bias, sublayer.ffn_output_kernel, sublayer.ffn_output_bias):
                    w.assign(np.zeros(w.shape, "float32"))
            for weight, h in zip(layer.residual_matrices, matrices or []):
                weight.assign(h.astype("float32"))
            return layer

        rng = np.random.default_rng(4)
        shared = []
        for _ in range(L):
            rest = np.linalg.qr(rng.normal(size=(D - 1, D - 1)))[0] * rng.uniform(1.2, 2.0, D - 1)
            block = np.zeros((D, D))
            block[0, 0], block[1:, 1:] = rho, rest
            h = q_basis @ block @ q_basis.T
            self.assertAlmostEqual(np.linalg.svd(h, compute_uv=False).min(), rho, places=6)
            shared.append(h)
        out = to_numpy(layer_with(shared)(signal, valid=valid))
        self.assertAllClose(np.linalg.norm(out, axis=-1), np.full((BATCH, N), 3.0 * rho**L), atol=1e-4)
        identity = to_numpy(layer_with(None)(signal, valid=valid))
        self.assertAllClose(np.linalg.norm(identity, axis=-1), np.full((BATCH, N), 3.0), atol=1e-5)
        self.assertAllClose(identity, signal, atol=1e-5)
        # As printed (sigma_min(P_L) <= rho^L for any H_l with sigma_min <= rho) the bound is false:
        # weakest directions that differ between layers need not compound.
        h1 = q_basis @ np.diag([rho, 2.0] + [1.0] * (D - 2)) @ q_basis.T
        h2 = q_basis @ np.diag([2.0, rho] + [1.0] * (D - 2)) @ q_basis.T
        out = to_numpy(layer_with([h1, h2, np.eye(D)])(signal, valid=valid))
        self.assertGreater(np.linalg.norm(out, axis=-1).min(), 3.0 * rho**2 * 1.5)

    def test_two_half_width_paths_cost_one_full_width_layer(self):
        x, valid = inputs()

        def kernels(sublayers):
            return sum(int(np.prod(w.shape)) for s in sublayers for w in s.weights if "kernel" in w.path)

        dual, residual = built(x, valid), built(x, valid, paths="residual-only")
        self.assertEqual(kernels(dual.residual_layers + dual.attnres_layers), kernels(residual.residual_layers))
        self.assertEqual(kernels(residual.residual_layers), 2 * 12 * D * D)  # 12 d^2 per layer

    def test_learnable_residual_matrices_start_at_identity(self):
        x, valid = inputs()
        identity = built(x, valid)
        learnable = built(x, valid, residual_matrix="learnable")
        self.assertEqual(len(learnable.residual_matrices), 2)
        self.assertAllClose(learnable(x, valid=valid), identity(x, valid=valid), atol=1e-5)

    def test_every_gate_learns_when_fused_only_the_last_when_literal(self):
        x, valid = inputs()
        for feed in ("fused", "paths"):
            layer = built(x, valid, feed=feed)
            kernels = [gate.projection.kernel for gate in layer.gates]
            norms = [float(np.abs(g).sum()) for g in gradients(layer, x, valid, kernels)]
            if feed == "fused":
                self.assertTrue(all(n > 1e-6 for n in norms), norms)
            else:  # Algorithm 1 read literally never feeds x_l (l < L) onward
                self.assertEqual(norms[:-1], [0.0])
                self.assertGreater(norms[-1], 1e-6)

    def test_introspection(self):
        x, valid = inputs()
        layer = built(x, valid, weighting="silu", num_layers=4, num_blocks=2)
        found = layer.introspect(x, valid)
        self.assertEqual(tuple(found["alpha"].shape), (BATCH, N, 4, 3))
        self.assertEqual(tuple(found["gamma"].shape), (BATCH, N, 4, D // 2))
        # L = 4, B = 2: layer 1 sees B_0 and the partial B_1, layer 2 the full B_0, B_1, ...
        expected = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1], [1, 1, 1]], bool)
        np.testing.assert_array_equal(found["alpha_available"], expected)
        alpha = to_numpy(found["alpha"])
        self.assertTrue(np.all(alpha[:, :, ~expected] == 0.0))
        gamma = to_numpy(found["gamma"])
        self.assertTrue(np.all((gamma > 0) & (gamma < 1)))
        self.assertIsNone(built(x, valid, paths="residual-only").introspect(x, valid)["alpha"])

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "divide num_layers"):
            DeRes(num_layers=8, num_blocks=3)
        with self.assertRaisesRegex(ZooError, "paths"):
            DeRes(paths="triple")
        with self.assertRaisesRegex(ZooError, "identity path"):
            DeRes(paths="attnres-only", residual_matrix="learnable")
        for heads in (0, -2, 4.0):
            with self.assertRaisesRegex(ZooError, f"num_heads is {heads!r}; it must be an integer >= 1"):
                DeRes(num_heads=heads)
        with self.assertRaisesRegex(ZooError, "num_heads = 3 must be even"):
            DeRes(num_layers=2, num_heads=3, num_blocks=1)(np.zeros((1, 2, 6), "float32"))
        with self.assertRaisesRegex(ZooError, "divide the width d = 6"):
            DeRes(num_layers=2, num_heads=4, num_blocks=1)(np.zeros((1, 2, 6), "float32"))
