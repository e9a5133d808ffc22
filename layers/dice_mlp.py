import keras

from zoo.layers.dice import Dice


@keras.saving.register_keras_serializable(package="zoo")
class DiceMLP(keras.layers.Layer):
    """The prediction MLP of DIN and SUAN (§4.1.4): hidden layers Dense -> BatchNorm -> Dice, then a
    Dense(1) logit.

    SUAN's head is [1024, 512, 256, 1]: `units=(1024, 512, 256)` here, the final 1 being the logit.

    Args:
        units: widths of the hidden layers.
        dice_momentum: moving-average decay of the BatchNorm and Dice statistics.
        dropout: dropout rate after each hidden layer (0 disables it).
    Returns the logit, shape [..., 1].
    """

    def __init__(self, units=(200, 80), dice_momentum=0.9, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.units = tuple(units)
        self.dice_momentum = dice_momentum
        self.dropout = dropout
        policy = self.dtype_policy
        self.hidden = []
        for i, width in enumerate(self.units):
            self.hidden.append(
                (
                    keras.layers.Dense(width, dtype=policy, name=f"dense_{i}"),
                    keras.layers.BatchNormalization(momentum=dice_momentum, dtype=policy, name=f"batch_norm_{i}"),
                    Dice(momentum=dice_momentum, dtype=policy, name=f"dice_{i}"),
                )
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy) if dropout else None
        self.logit = keras.layers.Dense(1, dtype=policy, name="logit")

    def build(self, input_shape):
        shape = tuple(input_shape)
        for dense, norm, dice in self.hidden:
            dense.build(shape)
            shape = shape[:-1] + (dense.units,)
            norm.build(shape)
            dice.build(shape)
        self.logit.build(shape)
        self.built = True

    def call(self, x, training=None):
        for dense, norm, dice in self.hidden:
            x = dice(norm(dense(x), training=training), training=training)
            if self.dropout_layer is not None:
                x = self.dropout_layer(x, training=training)
        return self.logit(x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (1,)

    def get_config(self):
        config = super().get_config()
        config.update({"units": list(self.units), "dice_momentum": self.dice_momentum, "dropout": self.dropout})
        return config
