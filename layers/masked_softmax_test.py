from unittest import mock

import keras
import numpy as np

from tests.references import softmax
from tests.testing import TestCase
from zoo.layers.masked_softmax import einsum_attention, masked_attention, masked_softmax


class MaskedSoftmaxTest(TestCase):
    def test_matches_softmax_over_allowed_keys(self):
        rng = np.random.RandomState(0)
        logits = rng.normal(size=(2, 3, 4, 5)).astype("float32")  # [B, H, Lq, Lk]
        allowed = rng.rand(2, 1, 4, 5) > 0.4  # broadcast over heads
        allowed[0, 0, 1] = False  # a query with no allowed key
        expected = np.zeros_like(logits)
        for b, h, q in np.ndindex(2, 3, 4):
            keys = allowed[b, 0, q]
            if keys.any():
                expected[b, h, q, keys] = softmax(logits[b, h, q, keys])
        out = masked_softmax(logits, allowed)
        self.assertAllClose(out, expected, atol=1e-6)
        self.assertAllClose(np.asarray(out)[0, :, 1], np.zeros((3, 5)))


def reference_attention(q, k, v, allowed, scale, bias):
    """softmax over the allowed keys of scale q.k + bias, times V, per row, head and query (zeros where none)."""
    batch, lq, heads, _ = q.shape
    out = np.zeros_like(q)
    for b, h, i in np.ndindex(batch, heads, lq):
        keys = np.broadcast_to(allowed, (batch, heads, lq, k.shape[1]))[b, h, i]
        if keys.any():
            logits = scale * k[b, keys, h] @ q[b, i, h] + bias[b, 0, i, keys]
            out[b, i, h] = softmax(logits) @ v[b, keys, h]
    return out


class MaskedAttentionTest(TestCase):
    def setUp(self):
        rng = np.random.RandomState(1)
        self.q, self.k, self.v = (rng.normal(size=(2, 4, 3, 5)).astype("float32") for _ in range(3))  # [B, L, H, D]
        self.bias = rng.normal(size=(2, 1, 4, 4)).astype("float32")  # shared by the heads
        self.allowed = rng.rand(2, 1, 4, 4) > 0.4
        self.allowed[1, 0, 2] = False  # a query with no allowed key

    def test_matches_the_numpy_reference(self):
        expected = reference_attention(self.q, self.k, self.v, self.allowed, 0.5, self.bias)
        out = masked_attention(self.q, self.k, self.v, self.allowed, 0.5, self.bias)
        self.assertAllClose(out, expected, atol=1e-5)
        self.assertAllClose(np.asarray(keras.ops.convert_to_numpy(out))[1, 2], np.zeros((3, 5)))
        everything = np.ones_like(self.allowed)
        self.assertAllClose(masked_attention(self.q, self.k, self.v, None, 0.5),
                            reference_attention(self.q, self.k, self.v, everything, 0.5, 0 * self.bias), atol=1e-5)

    def test_torchs_fused_kernel_has_the_einsum_paths_gradients(self):
        if keras.backend.backend() != "torch":
            self.skipTest("the fused path is torch's")
        import torch

        def gradients(attention):
            tensors = [torch.tensor(a, requires_grad=True) for a in (self.q, self.k, self.v, self.bias)]
            q, k, v, bias = tensors
            weights = torch.tensor(np.random.RandomState(2).normal(size=self.q.shape).astype("float32"))
            (attention(q, k, v, torch.tensor(self.allowed), 0.5, bias) * weights).sum().backward()
            return [t.grad.numpy() for t in tensors]

        with mock.patch.object(keras.ops, "dot_product_attention", wraps=keras.ops.dot_product_attention) as fused:
            fused_gradients = gradients(masked_attention)
        fused.assert_called_once()
        for fused, einsum in zip(fused_gradients, gradients(einsum_attention)):
            self.assertAllClose(fused, einsum, atol=1e-5)
