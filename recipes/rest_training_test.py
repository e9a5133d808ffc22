import keras
import numpy as np

from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.models.rest import ReST
from zoo.recipes.rest_training import ReSTTrainer, RestAlignment

SIMULATOR = small_simulator()
USER_OR_CONTEXT = ("user_", "ctx_", "num_")


def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def bce(y, p):
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def run(model, features):
    """The model on a batch, as NumPy: compiled under JAX (eager JAX compiles op by op), eager elsewhere."""
    if keras.backend.backend() == "jax":
        return model.predict_on_batch(features)
    return keras.tree.map_structure(to_numpy, model(features))


def gradients(trainer, features, loss_fn):
    """d loss_fn(trainer(features)) / d trainable variables, under the current backend (None -> zeros)."""
    variables = trainer.trainable_variables
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn(trainer(features))
        grads = tape.gradient(loss, variables)
    elif backend == "torch":
        import torch

        loss = loss_fn(trainer(features))
        grads = torch.autograd.grad(loss, [v.value for v in variables], allow_unused=True)
    else:
        import jax

        def f(values):
            out, _ = trainer.stateless_call(values, [v.value for v in trainer.non_trainable_variables], features)
            return loss_fn(out)

        grads = jax.jit(jax.grad(f))([v.value for v in variables])
    return {
        v.path: np.zeros(v.shape) if g is None else to_numpy(g) for v, g in zip(variables, grads)
    }


class ReSTTrainerTest(TestCase):
    @classmethod
    def setUpClass(cls):
        keras.utils.set_random_seed(3)
        cls.model = ReST(SIMULATOR.schema, **SMALL["rest"])
        rng = np.random.default_rng(0)
        cls.model.set_weights([w + 0.3 * rng.normal(size=w.shape).astype(w.dtype) for w in cls.model.get_weights()])
        cls.trainer = ReSTTrainer(cls.model, aux_units=8)
        cls.features, cls.labels = SIMULATOR.sample(8, seed=1)

    def perturbed_user_and_context(self):
        features = {k: v.copy() for k, v in self.features.items()}
        rng = np.random.default_rng(5)
        for key, value in features.items():
            if key.startswith(("user_", "ctx_")):
                features[key] = rng.integers(1, 4, value.shape).astype(value.dtype)
            elif key.startswith("num_"):
                features[key] = value + 3.0
        return features

    def test_main_prediction_is_the_inference_model(self):
        out = run(self.trainer, self.features)
        self.assertEqual(sorted(out), ["align_logits", "pctr", "same_user", "seq_pctr"])
        self.assertAllClose(out["pctr"], run(self.model, self.features), atol=1e-6)
        inference = {v.path for v in self.model.weights}
        extra = {v.path for v in self.trainer.weights} - inference
        self.assertTrue(extra and all(p.startswith(("g_seq", "alignment")) for p in extra), extra)
        self.assertFalse(any(p.startswith(("g_seq", "alignment")) for p in inference))

    def test_seq_head_does_not_read_user_or_context(self):
        base, other = run(self.trainer, self.features), run(self.trainer, self.perturbed_user_and_context())
        self.assertAllClose(other["seq_pctr"], base["seq_pctr"], atol=0)
        self.assertGreater(np.abs(to_numpy(other["pctr"]) - to_numpy(base["pctr"])).max(), 1e-4)

    def test_seq_loss_has_no_gradient_path_from_user_or_context(self):
        labels = keras.ops.convert_to_tensor(self.labels)
        loss_fn = lambda out: keras.ops.mean(  # noqa: E731
            keras.losses.binary_crossentropy(labels[..., None], out["seq_pctr"][..., None])
        )
        grads = gradients(self.trainer, self.features, loss_fn)
        user_or_context = [
            p for p in grads
            if p.startswith(("decoder/user_token", "decoder/context_token"))
            or "embedding_user_" in p or "embedding_ctx_" in p
        ]
        self.assertGreaterEqual(len(user_or_context), 6)
        for path in user_or_context:
            np.testing.assert_array_equal(grads[path], 0.0, err_msg=path)
        # while the encoder does receive the auxiliary gradient (the point of L_seq)
        self.assertGreater(np.abs(grads[next(p for p in grads if p.startswith("encoder/layer_1/") and p.endswith("w_v"))]).max(), 0)

    def test_total_loss_is_ce_plus_weighted_aux_losses(self):
        trainer = ReSTTrainer(self.model, seq_weight=0.1, align_weight=0.3, aux_units=8)
        trainer.compile(loss="binary_crossentropy")
        out = run(trainer, self.features)
        loss = to_numpy(trainer.compute_loss(self.features, self.labels, out))
        pctr, seq = to_numpy(out["pctr"]), to_numpy(out["seq_pctr"])
        s, same = to_numpy(out["align_logits"]), to_numpy(out["same_user"])
        user_ids = np.stack([self.features[f"user_{n}"] for n in ("user_id", "age", "gender", "city")], -1)
        np.testing.assert_array_equal(same, (user_ids[:, None] == user_ids[None]).all(-1))
        y = np.where(same, 1.0, -1.0)
        expected = bce(self.labels, pctr) + 0.1 * bce(self.labels, seq) + 0.3 * np.mean(softplus(-y * s))
        self.assertAllClose(loss, expected, atol=1e-4)

    def test_fit_trains_the_inference_model(self):
        trainer = ReSTTrainer(self.model, aux_units=8)
        trainer.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", run_eagerly=keras.backend.backend() != "jax")
        before = run(self.model, self.features)
        history = trainer.fit(self.features, self.labels, batch_size=4, epochs=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        self.assertGreater(np.abs(run(self.model, self.features) - before).max(), 1e-5)


class RestAlignmentTest(TestCase):
    def test_matches_reference(self):
        rng = np.random.default_rng(0)
        cls_state, user = rng.normal(size=(5, 6)).astype("float32"), rng.normal(size=(5, 4)).astype("float32")
        layer = RestAlignment(units=3)
        layer.build(cls_state.shape, user.shape)
        dense = layer.seq_projection + layer.ns_projection
        for d in dense:
            d.kernel.assign(rng.normal(size=d.kernel.shape).astype("float32"))
            d.bias.assign(rng.normal(size=d.bias.shape).astype("float32"))
        layer.log_tau.assign(np.log(0.2))  # τ = 0.2
        layer.bias.assign(1.5)  # b = 1.5
        w1, b1, w2, b2, v1, c1, v2, c2 = (to_numpy(w) for d in dense for w in (d.kernel, d.bias))

        def project(x, w, b, w_, b_):  # two-layer MLP then l2 normalisation
            z = np.maximum(x @ w + b, 0) @ w_ + b_
            return z / np.linalg.norm(z, axis=-1, keepdims=True)

        z_seq, z_ns = project(cls_state, w1, b1, w2, b2), project(user, v1, c1, v2, c2)
        self.assertAllClose(layer(cls_state, user), z_seq @ z_ns.T / 0.2 - 1.5, atol=1e-4)

    def test_starts_at_tau_one_tenth_and_bias_ten(self):
        layer = RestAlignment(units=3)
        layer.build((2, 6), (2, 4))
        self.assertAllClose(keras.ops.exp(layer.log_tau), 0.1, atol=1e-6)
        self.assertAllClose(layer.bias, 10.0)
