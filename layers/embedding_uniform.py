import keras
import numpy as np


@keras.saving.register_keras_serializable(package="zoo")
class EmbeddingUniform(keras.initializers.RandomUniform):
    """The embedding tables' initializer: U(minval, maxval), as Keras' RandomUniform (default +-0.05).

    Under JAX the values are drawn on the host with NumPy instead: JAX compiles its eager random op once
    per distinct table shape (about 1-2 s each on a 2-core machine, and a Criteo model has 39 tables of
    about 20 shapes), while NumPy compiles nothing (`benchmarks/jax_build.py` measures both). Each call
    draws from its own stream, `np.random.default_rng([seed, call number])`, so equal-shaped tables start
    apart and a run seeded with `keras.utils.set_random_seed` (which fixes the seed Keras gives an
    initializer) repeats. Under TensorFlow and torch it is RandomUniform itself (the same values as before,
    so runs recorded under those backends repeat exactly).
    """

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(minval=minval, maxval=maxval, seed=seed)
        self._calls = 0

    def __call__(self, shape, dtype=None):
        if keras.backend.backend() != "jax" or not isinstance(self.seed, int):
            return super().__call__(shape, dtype=dtype)
        rng = np.random.default_rng([self.seed, self._calls])
        self._calls += 1
        dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
        return rng.uniform(self.minval, self.maxval, tuple(shape)).astype(dtype)
