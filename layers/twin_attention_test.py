import math

import numpy as np

from tests.references import softmax
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.twin_attention import TWINAttention


def twin_reference(cand, inherent, cross, visible, w, k):
    """TWIN for one candidate: α_h per behaviour, the k visible ones of highest mean_h α_h, then per head
    a softmax over them of α_h pooling K_h W_h^v, heads concatenated and projected by W^o."""
    heads, dk = w["query"].shape[1], w["query"].shape[2]
    alpha = np.zeros((heads, len(inherent)))
    for h in range(heads):
        for j in range(len(inherent)):
            alpha[h, j] = (inherent[j] @ w["key"][:, h]) @ (cand @ w["query"][:, h]) / math.sqrt(dk)
            alpha[h, j] += cross[j] @ w["cross"][:, h]
    order = [j for j in np.argsort(-alpha.mean(0), kind="stable") if visible[j]][:k]
    out = []
    for h in range(heads):
        if not order:
            out.append(np.zeros(dk))
            continue
        att = softmax(alpha[h, order])
        out.append(att @ (inherent[order] @ w["value"][:, h]))
    return np.concatenate(out) @ w["output"]


class TWINAttentionTest(TestCase):
    def make_inputs(self, seed=0, m=2, length=6, dq=5, d=4, c=3):
        rng = np.random.RandomState(seed)
        cand = rng.normal(size=(2, m, dq)).astype("float32")
        inherent = rng.normal(size=(2, length, d)).astype("float32")
        cross = rng.normal(size=(2, m, length, c)).astype("float32")
        visible = rng.rand(2, m, length) > 0.3
        visible[1, 1] = False  # a candidate that sees nothing
        return cand, inherent, cross, visible

    def test_layer_basics(self):
        self.run_layer_test(
            TWINAttention, {"k": 3, "num_heads": 2, "head_dim": 3}, self.make_inputs(), (2, 2, 4),
            expected_num_trainable_weights=5,
        )

    def test_matches_twin_equations(self):
        k = 3
        inputs = self.make_inputs(seed=1)
        cand, inherent, cross, visible = inputs
        layer = TWINAttention(k, num_heads=2, head_dim=3)
        runner = LayerRunner(layer, *inputs)
        rng = np.random.RandomState(2)
        weights = {}
        for name in ("query", "key", "value", "cross", "output"):
            variable = getattr(layer, f"{name}_kernel")
            weights[name] = rng.normal(size=variable.shape).astype("float32")
            variable.assign(weights[name])
        out = runner(*inputs)
        for b in range(2):
            for m in range(2):
                want = twin_reference(cand[b, m], inherent[b], cross[b, m], visible[b, m], weights, k)
                self.assertAllClose(out[b, m], want, atol=1e-4, rtol=1e-4)

    def test_hidden_behaviours_never_contribute(self):
        inputs = self.make_inputs(seed=3)
        cand, inherent, cross, visible = inputs
        layer = TWINAttention(2, num_heads=2, head_dim=3)
        before = to_numpy(layer(*inputs))
        hidden = ~visible[:, 0]  # candidate 0's hidden behaviours, made the most relevant
        inherent, cross = inherent.copy(), cross.copy()
        inherent[hidden] *= 50.0
        cross[:, 0][hidden] += 50.0
        after = to_numpy(layer(cand, inherent, cross, visible))
        self.assertAllClose(after[:, 0], before[:, 0], atol=1e-5)

    def test_bad_sizes_are_one_line_errors(self):
        with self.assertRaisesRegex(ZooError, "TWINAttention head_dim is 0"):
            TWINAttention(3, head_dim=0)
        with self.assertRaisesRegex(ZooError, "TopKBehaviours k is 0"):
            TWINAttention(0)
