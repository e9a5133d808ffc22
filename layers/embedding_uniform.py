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
        values = drawn_on_host(self, shape, dtype, lambda rng, shape: rng.uniform(self.minval, self.maxval, shape))
        return super().__call__(shape, dtype=dtype) if values is None else values


def drawn_on_host(initializer, shape, dtype, draw):
    """Under JAX with a seeded initializer: `draw(rng, shape)` from the initializer's next NumPy stream,
    `np.random.default_rng([seed, call number])`, as `dtype`; elsewhere None (the Keras initializer's own)."""
    if keras.backend.backend() != "jax" or not isinstance(initializer.seed, int):
        return None
    rng = np.random.default_rng([initializer.seed, initializer._calls])
    initializer._calls += 1
    dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
    return draw(rng, tuple(shape)).astype(dtype)
