import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SRN(keras.layers.Layer):
    """Scaled residual with depth-dependent normalisation, SRN (ReST §2.1), around one SubLayer:

        x_{l+1} = LN(x_l + α_l · SubLayer(x_l))      for l <= L_switch   (post_norm=True)
        x_{l+1} = x_l + α_l · SubLayer(LN(x_l))      for l >  L_switch   (post_norm=False)

    α_l is one learned scalar per layer, initialised to 0.01 so a deep stack starts close to the
    identity. The model decides post_norm from the layer index (`switch_layer`: L_switch, about 25% of
    the depth and at least 1).

    Args:
        sublayer: the wrapped layer (DGA or the FFN); extra call arguments are passed to it.
        post_norm: True for the Post-LN form (l <= L_switch), False for the Pre-LN form.
        alpha_initial: the initial α_l (0.01 in the paper).
        epsilon: LayerNorm epsilon.
    Call:
        x [..., d], **sublayer_kwargs -> [..., d].
    """

    def __init__(self, sublayer, post_norm, alpha_initial=0.01, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if isinstance(sublayer, dict):
            sublayer = keras.saving.deserialize_keras_object(sublayer)
        self.sublayer = sublayer
        self.post_norm = bool(post_norm)
        self.alpha_initial = alpha_initial
        self.epsilon = epsilon
        self.norm = keras.layers.LayerNormalization(epsilon=epsilon, name="norm")

    def build(self, x_shape, *args, **kwargs):
        self.alpha = self.add_weight(
            shape=(), initializer=keras.initializers.Constant(self.alpha_initial), name="alpha"
        )
        self.norm.build(x_shape)
        if not self.sublayer.built:
            self.sublayer.build(x_shape)
        self.built = True

    def call(self, x, **sublayer_kwargs):
        if self.post_norm:
            return self.norm(x + self.alpha * self.sublayer(x, **sublayer_kwargs))
        return x + self.alpha * self.sublayer(self.norm(x), **sublayer_kwargs)

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sublayer": keras.saving.serialize_keras_object(self.sublayer),
                "post_norm": self.post_norm,
                "alpha_initial": self.alpha_initial,
                "epsilon": self.epsilon,
            }
        )
        return config
