import numpy as np

from tests.references import gelu
from tests.testing import LayerRunner, TestCase, to_numpy
from zoo.errors import ZooError
from zoo.layers.onetrans_block import OneTransBlock


def inputs(seed=0, b=2, m=2, length=4, n=3, d=8):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(b, length, d)).astype("float32")
    ns = rng.normal(size=(b, m, n, d)).astype("float32")
    s_valid = np.array([[False, True, True, True], [False, False, True, True]])[:b, :length]
    visible = s_valid[:, None, :].repeat(m, axis=1).copy()
    visible[0, 0, 3] = False  # candidate 0 of row 0 was exposed before the newest behaviour
    return s, ns, s_valid, visible


def rms_norm(x, scale, eps=1e-6):
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * scale


def onetrans_reference(block, s, ns, s_valid, visible):
    """OneTrans §3.3 written token by token on each candidate's unified sequence X = [S; NS_m]:
    token i uses the shared S weights if i < L_S and NS-token (i - L_S)'s own weights otherwise;
    Z = MixedMHA(RMSNorm(X)) + X, X' = MixedFFN(RMSNorm(Z)) + Z; causal attention, padding S-tokens
    never attended, and candidate m's NS-tokens read only the S-tokens visible to m. Without
    sequence_queries only the NS-tokens are queries (and the S-tokens come back unchanged)."""
    w = {v.name: to_numpy(v).astype("float64") for v in block.weights}
    batch, length, _ = s.shape
    m_count, n = ns.shape[1], ns.shape[2]
    heads, key_dim = w["s_key_kernel"].shape[1:]

    def param(name, i):  # W_i: shared for S-tokens, token-specific for NS-tokens
        return w[f"s_{name}"] if i < length else w[f"ns_{name}"][i - length]

    queries = range(0 if block.sequence_queries else length, length + n)
    s_out = np.array(s, "float64")
    ns_out = np.zeros(ns.shape)
    for b in range(batch):
        for m in range(m_count):
            x = np.concatenate([s[b], ns[b, m]]).astype("float64")  # [L + N, d]
            total = length + n
            h = np.stack([rms_norm(x[i], param("attention_scale", i)) for i in range(total)])
            def project(name, i):
                return np.einsum("d,dhk->hk", h[i], param(f"{name}_kernel", i)) + param(f"{name}_bias", i)

            q = {i: project("query", i) for i in queries}
            k = np.stack([project("key", i) for i in range(total)])
            v = np.stack([project("value", i) for i in range(total)])
            z = np.array(x)
            for i in queries:
                keys = [
                    j for j in range(i + 1)
                    if j >= length or (s_valid[b, j] and (i < length or visible[b, m, j]))
                ]
                heads_i = np.zeros((heads, key_dim))
                if keys:
                    logits = np.einsum("hk,jhk->hj", q[i], k[keys]) / np.sqrt(key_dim)
                    p = np.exp(logits - logits.max(-1, keepdims=True))
                    p /= p.sum(-1, keepdims=True)
                    heads_i = np.einsum("hj,jhk->hk", p, v[keys])
                z[i] = x[i] + np.einsum("hk,hkd->d", heads_i, param("output_kernel", i)) + param("output_bias", i)
            out = np.array(x)
            for i in queries:
                normed = rms_norm(z[i], param("ffn_scale", i))
                hidden = gelu(normed @ param("ffn_hidden_kernel", i) + param("ffn_hidden_bias", i))
                out[i] = z[i] + hidden @ param("ffn_output_kernel", i) + param("ffn_output_bias", i)
            s_out[b] = out[:length]  # the same for every m: the S side never reads an NS-token
            ns_out[b, m] = out[length:]
    return s_out, ns_out


class OneTransBlockTest(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(OneTransBlock, {"num_heads": 2, "ffn_units": 6}, inputs(), (2, 4, 8))

    def test_mixed_causal_attention_in_numpy(self):
        s, ns, s_valid, visible = inputs(seed=1)
        for sequence_queries in (True, False):
            block = OneTransBlock(num_heads=2, ffn_units=6, sequence_queries=sequence_queries)
            runner = LayerRunner(block, s, ns, s_valid, visible)
            rng = np.random.default_rng(5)
            block.set_weights([rng.normal(scale=0.5, size=v.shape).astype("float32") for v in block.weights])
            got_s, got_ns = runner(s, ns, s_valid, visible)
            want_s, want_ns = onetrans_reference(block, s, ns, s_valid, visible)
            self.assertAllClose(got_s, want_s, atol=1e-4, rtol=1e-4)
            self.assertAllClose(got_ns, want_ns, atol=1e-4, rtol=1e-4)

    def test_parameter_counts(self):
        s, ns, s_valid, visible = inputs()
        block = OneTransBlock(num_heads=2)
        block(s, ns, s_valid, visible)
        d, n = 8, 3
        shared = 2 * d + 4 * d * d + 3 * d + d + 8 * d * d + 4 * d + d  # norms, Q/K/V/O, FFN (4d hidden)
        self.assertEqual(block.count_params(), (1 + n) * shared)
        last = OneTransBlock(num_heads=2, sequence_queries=False)
        last(s, ns, s_valid, visible)
        self.assertEqual(last.count_params(), n * shared + d + 2 * (d * d + d))  # S: norm, K, V only

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            OneTransBlock(num_heads=0)
        with self.assertRaisesRegex(ZooError, "ffn_units is -1"):
            OneTransBlock(ffn_units=-1)
        with self.assertRaisesRegex(ZooError, "not divisible"):
            OneTransBlock(num_heads=3)(*inputs())
