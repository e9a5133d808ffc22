import math

import numpy as np

from tests.references import softmax
from tests.testing import LayerRunner, TestCase
from zoo.errors import ZooError
from zoo.layers.exact_search_unit import ExactSearchUnit, time_gap_bucket


def bucket_reference(gap, num_buckets):
    return 0 if gap < 1 else min(1 + int(math.floor(math.log2(gap))), num_buckets - 1)


def esu_reference(cand, behaviours, allowed, gaps, table, wa, wb, num_buckets):
    """SIM §4.2 for one candidate: z_j = [e_j, e_t_j], heads softmax((W_bi z_j)·(W_ai e_a)/sqrt(d)) z_j."""
    heads, d = wa.shape[1], wa.shape[2]
    z = np.stack([np.concatenate([behaviours[j], table[bucket_reference(gaps[j], num_buckets)]])
                  for j in range(len(behaviours))])
    out = []
    for i in range(heads):
        if not allowed.any():
            out.append(np.zeros(z.shape[1]))
            continue
        logits = np.array([(z[j] @ wb[:, i]) @ (cand @ wa[:, i]) / math.sqrt(d) for j in range(len(z))])
        att = softmax(logits[allowed])
        out.append(att @ z[allowed])
    return np.concatenate(out)


class ExactSearchUnitTest(TestCase):
    def make_inputs(self, seed=0, m=2, k=4, d=5):
        rng = np.random.RandomState(seed)
        cand = rng.normal(size=(2, m, d)).astype("float32")
        behaviours = rng.normal(size=(2, m, k, d)).astype("float32")
        allowed = rng.rand(2, m, k) > 0.3
        allowed[1, 1] = False  # a candidate whose search found nothing
        gaps = rng.randint(0, 10**7, size=(2, m, k)).astype("int32")
        return cand, behaviours, allowed, gaps

    def test_layer_basics(self):
        self.run_layer_test(
            ExactSearchUnit, {"num_heads": 2, "attention_dim": 3, "time_embedding_dim": 2}, self.make_inputs(),
            (2, 2, 14), expected_num_trainable_weights=3,
        )

    def test_time_gap_bucket_is_exact_log2(self):
        gaps = np.array([-5, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 2**30, 2**31 - 1], dtype="int64")
        got = np.asarray(time_gap_bucket(gaps, 32))
        self.assertEqual(list(got), [bucket_reference(int(g), 32) for g in gaps])
        self.assertEqual(int(np.asarray(time_gap_bucket(np.int32(10**6), 8))), 7)

    def test_matches_sim_esu(self):
        inputs = self.make_inputs(seed=1)
        cand, behaviours, allowed, gaps = inputs
        layer = ExactSearchUnit(num_heads=2, attention_dim=3, time_embedding_dim=2, num_time_buckets=32)
        runner = LayerRunner(layer, *inputs)
        rng = np.random.RandomState(2)
        table = rng.normal(size=(32, 2)).astype("float32")
        wa = rng.normal(size=(5, 2, 3)).astype("float32")
        wb = rng.normal(size=(7, 2, 3)).astype("float32")
        layer.time_embedding.embeddings.assign(table)
        layer.query_kernel.assign(wa)
        layer.key_kernel.assign(wb)
        out = runner(*inputs)
        for b in range(2):
            for m in range(2):
                want = esu_reference(cand[b, m], behaviours[b, m], allowed[b, m], gaps[b, m], table, wa, wb, 32)
                self.assertAllClose(out[b, m], want, atol=1e-4, rtol=1e-4)

    def test_bad_sizes_are_one_line_errors(self):
        with self.assertRaisesRegex(ZooError, "ExactSearchUnit num_heads is 0"):
            ExactSearchUnit(num_heads=0)
        with self.assertRaisesRegex(ZooError, "num_time_buckets is 64"):
            ExactSearchUnit(num_time_buckets=64)
