import numpy as np

from tests.references import softmax
from tests.testing import TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.target_cross_attention import TargetCrossAttention

# [B, M, L]: row 0 candidate 1 sees nothing (a user without history before that time).
ALLOWED = np.array(
    [[[False, True, True, False], [False, False, False, False]],
     [[True, True, True, True], [True, True, False, False]]]
)

KERNELS = ("query_kernel", "key_kernel", "value_kernel", "output_kernel")


def target_attention_reference(cand, hist, allowed, w):
    """c_m = [head_1..head_H] W^O + b^O, head_h = softmax(q_{m,h} K_h^T / sqrt(d_h)) V_h over the allowed keys."""
    B, M, _ = cand.shape
    H, K = w["query_kernel"].shape[1:]
    out = np.zeros_like(cand)
    for b in range(B):
        for m in range(M):
            heads = []
            for h in range(H):
                q = cand[b, m] @ w["query_kernel"][:, h] + w["query_bias"][h]
                k = hist[b] @ w["key_kernel"][:, h] + w["key_bias"][h]
                v = hist[b] @ w["value_kernel"][:, h] + w["value_bias"][h]
                keys = allowed[b, m]
                heads.append(softmax(k[keys] @ q / np.sqrt(K)) @ v[keys] if keys.any() else np.zeros(K))
            out[b, m] = np.concatenate(heads) @ w["output_kernel"].reshape(H * K, -1) + w["output_bias"]
    return out


class TargetCrossAttentionTest(TestCase):
    def test_layer_basics(self):
        rng = np.random.RandomState(0)
        inputs = (rng.rand(2, 2, 6).astype("float32"), rng.rand(2, 4, 5).astype("float32"), ALLOWED)
        self.run_layer_test(TargetCrossAttention, {"num_heads": 2}, inputs, (2, 2, 6), expected_num_trainable_weights=8)

    def test_matches_multi_head_attention_with_the_candidate_as_query(self):
        rng = np.random.RandomState(1)
        cand = rng.normal(size=(2, 2, 6)).astype("float32")
        hist = rng.normal(size=(2, 4, 5)).astype("float32")
        for use_bias in (True, False):
            with self.subTest(use_bias=use_bias):
                layer = TargetCrossAttention(num_heads=3, use_bias=use_bias)
                layer(cand, hist, ALLOWED)
                for variable in layer.weights:
                    variable.assign(rng.normal(size=variable.shape).astype("float32"))
                w = {name: to_numpy(getattr(layer, name)) for name in KERNELS}
                for name, shape in (("query_bias", (3, 2)), ("key_bias", (3, 2)), ("value_bias", (3, 2)),
                                    ("output_bias", (6,))):
                    w[name] = to_numpy(getattr(layer, name)) if use_bias else np.zeros(shape)
                expected = target_attention_reference(cand, hist, ALLOWED, w)
                self.assertAllClose(layer(cand, hist, ALLOWED), expected, atol=1e-4, rtol=1e-4)

    def test_hidden_keys_and_other_candidates_never_reach_a_candidate(self):
        rng = np.random.RandomState(2)
        cand = rng.normal(size=(2, 2, 6)).astype("float32")
        hist = rng.normal(size=(2, 4, 6)).astype("float32")
        layer = TargetCrossAttention(num_heads=2, use_bias=False)
        before = to_numpy(layer(cand, hist, ALLOWED))
        self.assertAllClose(before[0, 1], np.zeros(6))  # nothing allowed: zero without biases
        hidden = hist.copy()
        hidden[0, [0, 3]] += 3.0  # not allowed for row 0, candidate 0
        other = cand.copy()
        other[:, 1] += 1.0
        self.assertAllClose(to_numpy(layer(cand, hidden, ALLOWED))[0, 0], before[0, 0], atol=1e-6)
        self.assertAllClose(to_numpy(layer(other, hist, ALLOWED))[:, 0], before[:, 0], atol=1e-6)

    def test_bad_arguments_give_one_line(self):
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            TargetCrossAttention(num_heads=0)
        with self.assertRaisesRegex(ZooError, "width 6 is not divisible by num_heads 4"):
            TargetCrossAttention(num_heads=4)(np.zeros((1, 1, 6), "float32"), np.zeros((1, 2, 6), "float32"),
                                              np.ones((1, 1, 2), bool))
