import keras

from zoo.layers.embedding_uniform import drawn_on_host


@keras.saving.register_keras_serializable(package="zoo")
class EmbeddingNormal(keras.initializers.RandomNormal):
    """Small-normal embedding tables: N(0, stddev^2), stddev 1e-4 by default (DeepCTR's and FuxiCTR's
    embedding initializer), as Keras' RandomNormal.

    DIN and DeepFM start their tables here (issue #40: measured against FuxiCTR's at equal sizes on
    ML-100K, `benchmarks/vs_fuxictr_epochs.py`). As EmbeddingUniform does, under JAX the values are drawn
    on the host with NumPy (`np.random.default_rng([seed, call number])`): JAX would compile its random op
    once per distinct table shape. Under TensorFlow and torch its first call is RandomNormal's; each later
    call takes a seed of its own, so tables of one shape do not start equal (a shared Keras initializer
    gives them equal values at one seed).
    """

    def __init__(self, mean=0.0, stddev=1e-4, seed=None):
        super().__init__(mean=mean, stddev=stddev, seed=seed)
        self._calls = 0

    def __call__(self, shape, dtype=None):
        values = drawn_on_host(self, shape, dtype, lambda rng, shape: rng.normal(self.mean, self.stddev, shape))
        if values is not None:
            return values
        # One Keras initializer shared by every table draws the same values for equal shapes at one seed;
        # each call after the first takes its own seed, so tables of one shape start apart here too.
        seed, self._calls = self.seed, self._calls + 1
        if self._calls > 1 and isinstance(seed, int):
            seed = (seed + 7_919 * (self._calls - 1)) % 2**31
        return keras.random.normal(shape, mean=self.mean, stddev=self.stddev, seed=seed,
                                   dtype=dtype or keras.config.floatx())
