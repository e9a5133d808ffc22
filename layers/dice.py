import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class Dice(keras.layers.Layer):
    """Dice activation (Zhou et al., DIN, KDD 2018, eq 9; SUAN §4.1.4 uses it in the prediction MLP).

        p(s) = sigmoid((s - E[s]) / sqrt(Var[s] + eps))
        f(s) = p(s) * s + (1 - p(s)) * alpha * s

    E[s] and Var[s] are per-channel batch statistics in training and moving averages at inference
    (Keras' BatchNormalization without scale or offset computes exactly this normalisation). alpha is
    learned per channel and starts at 0, as in the SUAN authors' code.

    Args:
        momentum: decay of the moving averages. 0.9 by default: with 0.99-0.999 the inference statistics lag the
            weights for thousands of steps and squeeze the predictions (LogLoss 0.67 vs 0.57 on ML-100K DIN); the
            SUAN authors use 0.999 over 10^10 samples.
        epsilon: eps above.
    """

    def __init__(self, momentum=0.9, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.epsilon = epsilon
        self.normalize = keras.layers.BatchNormalization(
            momentum=momentum, epsilon=epsilon, center=False, scale=False, dtype=self.dtype_policy, name="normalize"
        )

    def build(self, input_shape):
        self.alpha = self.add_weight(name="alpha", shape=(input_shape[-1],), initializer="zeros")
        self.normalize.build(input_shape)
        self.built = True

    def call(self, s, training=None):
        p = ops.sigmoid(self.normalize(s, training=training))
        return p * s + (1.0 - p) * self.alpha * s

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"momentum": self.momentum, "epsilon": self.epsilon})
        return config
