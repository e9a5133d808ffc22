import keras

from zoo.errors import ZooError


def switch_layer(depth):
    """L_switch of SRN (ReST §2.1: "about 25% of the total depth"): depth / 4 rounded half up, at least 1.

    Half up (not Python's half-to-even `round`), so depth 2 -> 1, 6 -> 2, 10 -> 3, 14 -> 4.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ZooError(f"SRN: the encoder depth is {depth!r}; it must be an integer >= 1")
    return max(1, (depth + 2) // 4)  # floor(depth / 4 + 1/2)


@keras.saving.register_keras_serializable(package="zoo")
class SRN(keras.layers.Layer):
    """Scaled residual with depth-dependent normalisation, SRN (ReST §2.1), around the two sublayers of
    one encoder layer l (the attention, then the FFN), both scaled by the layer's one α_l:

        l <= L_switch (post_norm=True):   x <- LN_1(x + α_l · Attn(x));   x <- LN_2(x + α_l · FFN(x))
        l >  L_switch (post_norm=False):  x <- x + α_l · Attn(LN_1(x));   x <- x + α_l · FFN(LN_2(x))

    The paper writes x_{l+1} = LN(x_l + α_l SubLayer(x_l)) (resp. x_l + α_l SubLayer(LN(x_l))) with
    SubLayer "attention or FFN" and one α_l per layer ("每层 α_l", initialised to 0.01), and Figure 1
    puts SRN on both residual paths of a layer: so the two paths share α_l. The paper is silent on the
    LayerNorms; each path keeps its own (LN_1, LN_2), as in the Post-LN and Pre-LN Transformers SRN
    switches between. The model sets post_norm from the layer index (`switch_layer`).

    Args:
        attention: the first sublayer (DGA in ReST); keyword arguments of the call are passed to it.
        ffn: the second sublayer (the SwiGLU FFN).
        post_norm: True for the Post-LN form (l <= L_switch), False for the Pre-LN form.
        alpha_initial: the initial α_l (0.01 in the paper).
        epsilon: LayerNorm epsilon.
    Call:
        x [..., d], **attention_kwargs -> [..., d].

    Sublayers given as configs (from `get_config`) are rebuilt in this layer's dtype policy.
    """

    def __init__(self, attention, ffn, post_norm, alpha_initial=0.01, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.attention = self._sublayer(attention)
        self.ffn = self._sublayer(ffn)
        self.post_norm = bool(post_norm)
        self.alpha_initial = alpha_initial
        self.epsilon = epsilon
        self.attention_norm, self.ffn_norm = (
            keras.layers.LayerNormalization(epsilon=epsilon, dtype=self.dtype_policy, name=name)
            for name in ("attention_norm", "ffn_norm")
        )

    def _sublayer(self, layer):
        if isinstance(layer, dict):
            layer = {**layer, "config": {**layer["config"], "dtype": self.dtype_policy}}
            layer = keras.saving.deserialize_keras_object(layer)
        return layer

    def build(self, x_shape, *args, **kwargs):
        self.alpha = self.add_weight(
            shape=(), initializer=keras.initializers.Constant(self.alpha_initial), name="alpha"
        )
        for layer in (self.attention_norm, self.ffn_norm, self.attention, self.ffn):
            if not layer.built:
                layer.build(x_shape)
        self.built = True

    def call(self, x, **attention_kwargs):
        if self.post_norm:
            x = self.attention_norm(x + self.alpha * self.attention(x, **attention_kwargs))
            return self.ffn_norm(x + self.alpha * self.ffn(x))
        x = x + self.alpha * self.attention(self.attention_norm(x), **attention_kwargs)
        return x + self.alpha * self.ffn(self.ffn_norm(x))

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention": keras.saving.serialize_keras_object(self.attention),
                "ffn": keras.saving.serialize_keras_object(self.ffn),
                "post_norm": self.post_norm,
                "alpha_initial": self.alpha_initial,
                "epsilon": self.epsilon,
            }
        )
        return config
