import unittest

import keras
import numpy as np

from tests.testing import TestCase, jax_compile_messages, to_numpy
from zoo.feature import Feature
from zoo.layers.embedding_normal import EmbeddingNormal
from zoo.layers.feature_embedding import FeatureEmbedding
from zoo.schema import Schema

SCHEMA = Schema([Feature(f"c{i}", "cand", size, 4) for i, size in enumerate((301, 301, 401, 503))])


def tables(seed):
    keras.utils.set_random_seed(seed)
    layer = FeatureEmbedding(SCHEMA, embeddings_initializer="normal")
    layer.build()
    return [to_numpy(table.embeddings) for table in layer.tables.values()]


class EmbeddingNormalTest(TestCase):
    def test_small_normal_values_and_a_seeded_build_repeats(self):
        first, again, other = tables(3), tables(3), tables(4)
        for a, b, c in zip(first, again, other):
            self.assertAlmostEqual(float(a.std()), 1e-4, delta=1e-5)  # >= 1,204 draws per table
            self.assertLess(abs(float(a.mean())), 2e-5)
            np.testing.assert_array_equal(a, b)
            self.assertFalse(np.array_equal(a, c))
        self.assertFalse(np.array_equal(first[0], first[1]))  # equal shapes start apart

    def test_it_is_keras_random_normal_outside_jax(self):
        if keras.backend.backend() == "jax":
            raise unittest.SkipTest("under JAX the values come from NumPy (the next test)")
        ours = to_numpy(EmbeddingNormal(stddev=0.3, seed=5)((6, 3)))
        keras_own = to_numpy(keras.initializers.RandomNormal(stddev=0.3, seed=5)((6, 3)))
        np.testing.assert_array_equal(ours, keras_own)

    def test_under_jax_tables_are_drawn_on_the_host_without_compiling(self):
        if keras.backend.backend() != "jax":
            raise unittest.SkipTest("JAX only")
        _, messages = jax_compile_messages(lambda: tables(3))
        self.assertEqual([m for m in messages if "normal" in m.lower()], [])
        initializer = EmbeddingNormal(seed=11)
        for call in range(2):
            np.testing.assert_allclose(to_numpy(initializer((7, 4))),
                                       np.random.default_rng([11, call]).normal(0, 1e-4, (7, 4)), rtol=1e-6)

    def test_serialization(self):
        restored = keras.initializers.deserialize(keras.initializers.serialize(EmbeddingNormal(stddev=0.2, seed=1)))
        self.assertIsInstance(restored, EmbeddingNormal)
        self.assertEqual((restored.stddev, restored.seed), (0.2, 1))
