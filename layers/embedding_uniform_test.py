import unittest

import keras
import numpy as np

from tests.testing import TestCase, jax_compile_messages, to_numpy
from zoo.feature import Feature
from zoo.layers.embedding_uniform import EmbeddingUniform
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.schema import Schema

SCHEMA = Schema([Feature(f"c{i}", "cand", size, 4) for i, size in enumerate((7, 7, 11, 13, 17, 19))])


def tables(seed):
    keras.utils.set_random_seed(seed)
    layer = FeatureEmbedding(SCHEMA)
    layer.build()
    return [to_numpy(table.embeddings) for table in layer.tables.values()]


class EmbeddingUniformTest(TestCase):
    def test_values_lie_in_the_interval_and_a_seeded_build_repeats(self):
        first, again, other = tables(3), tables(3), tables(4)
        for a, b, c in zip(first, again, other):
            self.assertTrue(np.all((a >= -0.05) & (a < 0.05)))
            self.assertGreater(a.std(), 0.02)  # U(-0.05, 0.05) has s.d. 0.0289
            np.testing.assert_array_equal(a, b)
            self.assertFalse(np.array_equal(a, c))

    def test_it_is_keras_random_uniform_outside_jax(self):
        if keras.backend.backend() == "jax":
            raise unittest.SkipTest("under JAX the values come from NumPy (the next test)")
        ours = to_numpy(EmbeddingUniform(-0.1, 0.1, seed=5)((6, 3)))
        keras_own = to_numpy(keras.initializers.RandomUniform(-0.1, 0.1, seed=5)((6, 3)))
        np.testing.assert_array_equal(ours, keras_own)

    def test_under_jax_tables_are_drawn_on_the_host_without_compiling(self):
        if keras.backend.backend() != "jax":
            raise unittest.SkipTest("JAX only")
        first, messages = jax_compile_messages(lambda: tables(3))
        self.assertEqual([m for m in messages if "_uniform" in m], [])
        # NumPy's streams: table i is default_rng([seed, i]) of the initializer's seed, so equal shapes differ
        self.assertFalse(np.array_equal(first[0], first[1]))
        initializer = EmbeddingUniform(seed=11)
        drawn = [to_numpy(initializer((7, 4))) for _ in range(2)]
        for call, values in enumerate(drawn):
            np.testing.assert_allclose(values, np.random.default_rng([11, call]).uniform(-0.05, 0.05, (7, 4)),
                                       rtol=1e-6)

    def test_serializes(self):
        initializer = EmbeddingUniform(-0.2, 0.3, seed=1)
        clone = keras.initializers.deserialize(keras.initializers.serialize(initializer))
        self.assertIsInstance(clone, EmbeddingUniform)
        self.assertEqual((clone.minval, clone.maxval), (-0.2, 0.3))
        layer = FeatureEmbedding.from_config(FeatureEmbedding(SCHEMA).get_config())
        self.assertIsInstance(layer.embeddings_initializer, EmbeddingUniform)
