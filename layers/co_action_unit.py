import keras
from keras import ops

from zoo.errors import ZooError


@keras.saving.register_keras_serializable(package="zoo")
class CoActionUnit(keras.layers.Layer):
    """CAN's co-action unit (Bian et al., CAN: Feature Co-Action Network for Click-Through Rate
    Prediction, WSDM 2022, §3.2-3.3) between a candidate and the behaviours it may see.

    The candidate's co-action embedding P_induction is not a feature vector but the parameters of a
    micro-MLP; each behaviour's co-action embedding P_feed is that MLP's input:

        w^(k) = reshape(P_induction[slice k], [u_(k-1), u_k])               (eq 1, u_0 = dim P_feed)
        h^(0) = (P_feed)^c                          (multi-order enhancement, c = 1..C, element-wise)
        h^(k) = σ(h^(k-1) w^(k)),  k = 1..K                                  (eq 2)
        H(P_induction, P_seq) = Σ_{j visible} concat_c concat_k h_j^(k)     (eq 3, sum over the sequence)

    Where the paper is silent this follows the authors' public code (CAN, DeepRec modelzoo): the
    micro-MLP has no biases, σ = tanh between layers and none after the last, the output concatenates
    every layer's h^(k) (not only h^(K)), and the C orders share one micro-MLP. The unit has no weights
    of its own: the induction embedding carries them.

    Args:
        units: (u_1, ..., u_K), the micro-MLP's widths (the authors' (8, 4) after a feed of 16).
        orders: C, the powers of P_feed (the authors' 3).
    Call:
        induction [B, M, P] with P = u_0 u_1 + u_1 u_2 + ... (`induction_size`), feed [B, L, u_0],
        visible [B, M, L] bool (FeatureEmbedding's hist_visible) -> [B, M, C (u_1 + ... + u_K)].
    """

    def __init__(self, units=(8, 4), orders=3, **kwargs):
        super().__init__(**kwargs)
        self.units = tuple(int(u) for u in units)
        self.orders = int(orders)
        if not self.units or min(self.units) < 1 or self.orders < 1:
            raise ZooError(f"CoActionUnit needs units >= 1 and orders >= 1, got units={list(units)}, orders={orders}")

    @staticmethod
    def induction_size(feed_dim, units):
        """P, the number of micro-MLP weights a candidate's induction embedding holds."""
        widths = (int(feed_dim),) + tuple(int(u) for u in units)
        return sum(a * b for a, b in zip(widths[:-1], widths[1:]))

    def build(self, induction_shape, feed_shape=None, visible_shape=None):
        size = self.induction_size(feed_shape[-1], self.units)
        if induction_shape[-1] != size:
            raise ZooError(
                f"CoActionUnit: a feed of {feed_shape[-1]} through units {list(self.units)} needs an induction "
                f"embedding of {size}, got {induction_shape[-1]}"
            )
        self.built = True

    def _weights(self, induction, feed_dim):
        """The micro-MLP's w^(1..K) from P_induction: each [B, M, u_(k-1), u_k]."""
        m = ops.shape(induction)[1]
        widths = (feed_dim,) + self.units
        weights, start = [], 0
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            block = induction[..., start : start + fan_in * fan_out]
            weights.append(ops.reshape(block, (-1, m, fan_in, fan_out)))
            start += fan_in * fan_out
        return weights

    def call(self, induction, feed, visible):
        weights = self._weights(induction, int(feed.shape[-1]))
        outputs = []
        for c in range(1, self.orders + 1):
            h = ops.einsum("blf,bmfo->bmlo", feed**c, weights[0])  # [B, M, L, u_1]
            for k in range(len(weights)):
                if k:
                    h = ops.einsum("bmli,bmio->bmlo", h, weights[k])
                if k < len(weights) - 1:
                    h = ops.tanh(h)
                outputs.append(h)
        co_action = ops.concatenate(outputs, axis=-1)  # [B, M, L, C (u_1 + ... + u_K)]
        return ops.sum(co_action * ops.cast(visible, co_action.dtype)[..., None], axis=2)

    def compute_output_shape(self, induction_shape, feed_shape=None, visible_shape=None):
        return tuple(induction_shape[:2]) + (self.orders * sum(self.units),)

    def get_config(self):
        config = super().get_config()
        config.update({"units": list(self.units), "orders": self.orders})
        return config
