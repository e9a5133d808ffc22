import numpy as np

from tests.testing import TestCase
from zoo.datasets.process_group import ProcessGroup
from zoo.datasets.transforms import numeric


def options(**overrides):
    return {"log1p": False, "fill": "mean", "scale": "standardize", "buckets": None, **overrides}


class NumericTest(TestCase):
    def test_the_fit_over_batches_is_numpy_on_the_training_values(self):
        rng = np.random.default_rng(0)
        values = rng.normal(3.0, 2.0, 1000)
        values[rng.random(1000) < 0.1] = np.nan
        moments = numeric.Moments(bucketed=True)
        for part in np.array_split(values, 7):
            moments.add(part)
        state = moments.state(options(buckets=4), ProcessGroup())
        present = values[~np.isnan(values)]
        filled = np.where(np.isnan(values), present.mean(), values)  # missing values count at the fill
        self.assertAllClose(state["fill"], present.mean(), atol=1e-12)
        self.assertAllClose(state["mean"], filled.mean(), atol=1e-12)
        self.assertAllClose(state["std"], filled.std(), atol=1e-12)
        self.assertEqual(state["edges"], list(np.quantile(filled, [0.25, 0.5, 0.75])))  # np.quantile's, exactly

    def test_minmax_scales_by_the_training_rows_least_and_greatest_values(self):
        import tensorflow as tf

        moments = numeric.Moments(bucketed=False)
        for part in (np.array([4.0, np.nan, 10.0]), np.array([6.0, 2.0])):
            moments.add(part)
        state = moments.state(options(scale="minmax", fill=12.0), ProcessGroup())
        self.assertEqual((state["min"], state["max"]), (2.0, 12.0))  # the fill of the missing value among them
        self.assertIsNone(numeric.scaler_problem(state))
        texts = ["2", "7", "", "22"]
        values, _, _ = numeric.encoded(state, numeric.parsed_numbers(tf.constant(texts)).numpy())
        np.testing.assert_allclose(values, [0.0, 0.5, 1.0, 2.0])  # (x - 2) / 10; the fill 12 -> 1; not clipped
        np.testing.assert_array_equal(numeric.graph_encoded(state, tf.constant(texts))[0].numpy(), values)
        one = numeric.Moments(bucketed=False)
        one.add(np.array([3.0, 3.0]))
        flat = one.state(options(scale="minmax"), ProcessGroup())
        np.testing.assert_array_equal(numeric.encoded(flat, np.array([3.0, 4.0]))[0], [0.0, 1.0])  # range 0: / 1
        self.assertEqual(numeric.scaler_problem(dict(flat, max=1.0)),
                         ("max", "a scaler's greatest value is at least its least value"))
        self.assertEqual(numeric.scaler_problem({"min": 0.0}),
                         ("max", "a scaler needs its least value and greatest value"))

    def test_drift_is_the_psi_over_the_presets_buckets_or_the_shift_of_its_scale(self):
        rng = np.random.default_rng(3)
        before = rng.normal(0.0, 1.0, 4000)
        state = numeric.Moments(bucketed=True)
        state.add(before)
        state = state.state(options(scale="none", buckets=10), ProcessGroup())
        for shift, moved in ((0.0, False), (1.0, True)):
            after = rng.normal(shift, 1.0, 3000)
            moments = numeric.Moments(bucketed=True)
            moments.add(after)
            found = numeric.drift(state, moments)
            shares = np.maximum(np.bincount(np.searchsorted(state["edges"], after, side="right"), minlength=10) / 3000,
                                1e-4)
            psi = np.sum((shares - 0.1) * np.log(shares / 0.1))  # the credit-scoring index, by hand
            self.assertAlmostEqual(found["psi"], psi, places=4)
            self.assertEqual(found["moved"], moved)
        scaled = {"kind": "numeric", "log1p": False, "fill": 0.0, "mean": 10.0, "std": 2.0}
        moments = numeric.Moments(bucketed=False)
        moments.add(np.array([12.0, 14.0, np.nan]))  # the missing value counts at the preset's fill, 0
        values = np.array([12.0, 14.0, 0.0])
        found = numeric.drift(scaled, moments)
        self.assertAlmostEqual(found["mean_shift"], abs(values.mean() - 10.0) / 2.0, places=4)
        self.assertAlmostEqual(found["sd_ratio"], values.std() / 2.0, places=4)
        self.assertTrue(found["moved"])
        self.assertIsNone(numeric.drift(scaled, numeric.Moments(bucketed=False)))  # no new value

    def test_log1p_keeps_the_sign_and_a_constant_fill_is_the_constant(self):
        np.testing.assert_allclose(numeric.transformed(options(log1p=True), np.array([-3.0, 0.0, 9.0])),
                                   [-np.log(4.0), 0.0, np.log(10.0)])
        moments = numeric.Moments(bucketed=False)
        moments.add(np.array([1.0, np.nan, 3.0]))
        state = moments.state(options(fill=-1.0, scale=None), ProcessGroup())
        self.assertEqual(state, {"kind": "numeric", "log1p": False, "fill": -1.0})

    def test_batch_and_graph_forms_encode_alike(self):
        import tensorflow as tf

        texts = ["2.5", "", "abc", "-1e3", "1e300", "7", " 4 ", "inf"]
        standardized = {"kind": "numeric", "log1p": True, "fill": 0.5, "mean": 1.0, "std": 2.0}
        parsed = numeric.parsed_numbers(tf.constant(texts)).numpy()
        np.testing.assert_array_equal(np.isnan(parsed), [False, True, True, False, False, False, False, True])
        values, missing, clipped = numeric.encoded(standardized, numeric.transformed(standardized, parsed))
        expected = (np.where(np.isnan(parsed), 0.5, np.sign(parsed) * np.log1p(np.abs(parsed))) - 1.0) / 2.0
        np.testing.assert_allclose(values, expected.astype(np.float32))
        graph, repaired = numeric.graph_encoded(standardized, tf.constant(texts))
        np.testing.assert_array_equal(graph.numpy(), values)
        # repaired: a text that is not a finite number (filled), not an empty one (missing)
        np.testing.assert_array_equal(repaired.numpy(), [0, 0, 1, 0, 0, 0, 0, 1])
        plain = {"kind": "numeric", "log1p": False, "fill": 0.0}
        values, _, clipped = numeric.encoded(plain, parsed)
        self.assertEqual(values[4], np.float32(1e9))  # 1e300, clipped to the contract's bound
        np.testing.assert_array_equal(clipped, [False, False, False, False, True, False, False, False])
        graph, repaired = numeric.graph_encoded(plain, tf.constant(texts))
        np.testing.assert_array_equal(graph.numpy(), values)
        self.assertEqual(repaired.numpy()[4], 1)  # clipped
        bucketed = {"kind": "numeric", "log1p": False, "fill": 0.0, "buckets": 3, "edges": [0.0, 5.0]}
        ids, _, _ = numeric.encoded(bucketed, parsed)
        np.testing.assert_array_equal(ids, [2, 2, 2, 1, 3, 3, 2, 2])  # 1 + #{edges <= x}; missing -> fill 0.0
        np.testing.assert_array_equal(numeric.graph_encoded(bucketed, tf.constant(texts))[0].numpy(), ids)

    def test_bars_tokens_follow_the_criteo_x4_rule(self):
        tokens = numeric.bars_tokens(np.array([np.nan, 0.0, 1.7, 2.0, 3.0, 100.0]))
        self.assertEqual(tokens.to_pylist(), ["0", "0", "1", "2", str(int(np.log(3.0) ** 2)),
                                              str(int(np.log(100.0) ** 2))])
