import math
import warnings

import keras
import numpy as np

from tests.references import softmax
from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.afnet import AFNet


def afnet_reference(e_self, profile, w, heads, pooled_over):
    """SUAN eq 7-15 for one row. `pooled_over[i]` lists the positions token i's e_mean averages."""
    wq, wk, wv, wo, w1, w2, w3 = w
    q, k, v = e_self @ wq, profile @ wk, profile @ wv
    dh = q.shape[1] // heads
    cross = np.concatenate(
        [softmax(q[:, s] @ k[:, s].T / math.sqrt(dh), -1) @ v[:, s] for s in (slice(h * dh, (h + 1) * dh) for h in range(heads))],
        axis=1,
    ) @ wo  # eq 7-9
    e_sum = e_self + cross  # eq 10
    out = np.zeros_like(e_self)
    for i in range(len(e_self)):
        e_mean = e_sum[pooled_over[i]].mean(0) if len(pooled_over[i]) else np.zeros(e_self.shape[1])  # eq 11
        hidden = np.maximum(e_mean @ w1, 0.0)
        w_pair = softmax(np.stack([hidden @ w2, hidden @ w3]), 0)  # eq 12-14
        out[i] = w_pair[0] * e_self[i] + w_pair[1] * cross[i]  # eq 15
    return out


class AFNetTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.RandomState(0)
        self.length, self.m, self.d, self.dp = 5, 3, 8, 4
        self.hist = rng.normal(size=(2, self.length, self.d)).astype("float32")
        self.cand = rng.normal(size=(2, self.m, self.d)).astype("float32")
        self.profile = rng.normal(size=(2, 3, self.dp)).astype("float32")
        self.valid = np.ones((2, self.length), bool)
        self.valid[1, :2] = False
        self.visible = np.repeat(self.valid[:, None, :], self.m, axis=1)  # [B, M, L]
        self.visible[:, 0, 3:] = False  # behaviours 3.. are candidate 0's future
        shapes = [(8, 8), (4, 8), (4, 8), (8, 8), (8, 2), (2, 8), (2, 8)]
        self.weights = [rng.normal(size=s).astype("float32") / math.sqrt(s[0]) for s in shapes]
        self.args = [self.hist, self.cand, self.profile, self.valid, self.visible]

    def run_afnet(self, pool):
        layer = AFNet(2, alignment_pool=pool)
        run = LayerRunner(layer, *self.args)
        layer.set_weights(self.weights)
        return run(*self.args)

    def test_layer_basics(self):
        for pool in ("causal", "global"):
            self.run_layer_test(
                AFNet, {"num_heads": 2, "alignment_pool": pool}, tuple(self.args), (2, self.length, self.d),
                expected_num_trainable_weights=7,  # W2^Q,K,V,O and W1, W2, W3 of the alignment
            )

    def test_causal_pool_matches_reference(self):
        out_h, out_c = self.run_afnet("causal")
        for b in range(2):
            valid = [j for j in range(self.length) if self.valid[b, j]]
            pooled = [[j for j in valid if j <= i] for i in range(self.length)]
            pooled += [[j for j in valid if self.visible[b, c, j]] + [self.length + c] for c in range(self.m)]
            x = np.concatenate([self.hist[b], self.cand[b]])
            expected = afnet_reference(x, self.profile[b], self.weights, 2, pooled)
            self.assertAllClose(out_h[b][self.valid[b]], expected[: self.length][self.valid[b]], atol=1e-5)
            self.assertAllClose(out_c[b], expected[self.length :], atol=1e-5)

    def test_one_profile_token_runs_no_softmax(self):
        """n2 = 1 (one user feature): eq 8's weights are exactly 1, so E_cross = V2 W2^O, and no softmax
        over the size-1 axis runs (Keras warns on one); both pools still match the reference."""
        self.profile = self.profile[:, :1]
        self.args[2] = self.profile
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.test_causal_pool_matches_reference()
            self.test_global_pool_is_eq_11_as_written()
        self.assertEqual([str(w.message) for w in caught if "softmax over axis" in str(w.message)], [])

    def test_global_pool_is_eq_11_as_written(self):
        out_h, out_c = self.run_afnet("global")
        everything = list(range(self.length + self.m))
        for b in range(2):
            x = np.concatenate([self.hist[b], self.cand[b]])
            expected = afnet_reference(x, self.profile[b], self.weights, 2, [everything] * len(x))
            self.assertAllClose(np.concatenate([out_h[b], out_c[b]]), expected, atol=1e-5)

    def test_cache_methods_take_numpy(self):
        """encode_history and encode_candidates (public entry points): NumPy in equals tensors in."""
        layer = AFNet(2)
        LayerRunner(layer, *self.args)
        tensor = keras.ops.convert_to_tensor
        out_numpy, terms_numpy = layer.encode_history(self.hist, self.profile, self.valid)
        out_tensor, terms_tensor = layer.encode_history(tensor(self.hist), tensor(self.profile), tensor(self.valid))
        self.assertAllClose(out_numpy, out_tensor, atol=1e-6)
        self.assertAllClose(terms_numpy, terms_tensor, atol=1e-6)
        self.assertAllClose(layer.history_terms(self.hist, self.profile, self.valid), terms_tensor, atol=1e-6)
        expected = layer.encode_candidates(tensor(self.cand), tensor(self.profile), terms_tensor, tensor(self.visible))
        terms_array = keras.ops.convert_to_numpy(terms_tensor)
        from_numpy = layer.encode_candidates(self.cand, self.profile, terms_array, self.visible)
        self.assertAllClose(from_numpy, expected, atol=1e-6)

    def test_bad_pool(self):
        with self.assertRaises(ZooError):
            AFNet(2, alignment_pool="mean")
