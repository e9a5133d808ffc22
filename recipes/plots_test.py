"""The material and the figures of `zoo.recipes.evaluate` beyond the metrics: each model's `introspect`
(SUAN/LightSUAN attention over a request's history, ReST's RoTE positions) and the training curves."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
from keras import ops

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator, to_numpy
from zoo.layers.rote import HOUR, MINUTE
from zoo.models.suan import _candidate_attention
from zoo.recipes import plots
from zoo.recipes.evaluate import model_figures


class Batches:
    """Stands for a tf.data dataset of the given (features, labels) batches."""

    def __init__(self, *batches):
        self.batches = batches

    def as_numpy_iterator(self):
        return iter(self.batches)


class IntrospectionTest(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.simulator = small_simulator()
        cls.features, cls.labels = cls.simulator.sample(8, seed=3)
        for key in ("hist_item_id", "hist_category", "hist_behavior", "hist_time"):
            cls.features[key][:, :2] = 0  # every row left-padded: the request's history has padding
        cls.features["hist_item_id"][0, :5] = 0  # row 0 the shortest

    def test_suan_attention_is_the_weights_its_self_attention_uses(self):
        model = zoo.get("lightsuan", schema=self.simulator.schema, **SMALL["lightsuan"])  # k = 2, r = 2, L = 8
        stats = model.introspect(self.features)
        valid = self.features["hist_item_id"] > 0
        self.assertEqual(stats["row"], int(np.argmax(valid.sum(axis=1))))
        self.assertEqual(stats["attention"].shape, (1, 2, 9))
        attended = np.isfinite(stats["attention"][0, 0])
        # The candidate at position L = 8 sees slot j when 8 - j < k = 2 or (8 - j) mod r = 0, and itself.
        expected = [valid[stats["row"], j] and (8 - j < 2 or (8 - j) % 2 == 0) for j in range(8)] + [True]
        self.assertEqual(attended.tolist(), expected)
        self.assertAllClose(np.nansum(stats["attention"], axis=-1), np.ones((1, 2)), atol=1e-5)

        # The weights reproduce the layer's own output: E_self = sum_s p_s V_s + p_self V_self, through W^O.
        attention = model.get_layer("encoder").blocks[0].attention
        rng = np.random.default_rng(0)
        slots, heads, d = len(attention.candidate_slots), attention.num_heads, attention.query_kernel.shape[0]
        keys, values = (rng.normal(size=(2, slots, heads, d // heads)).astype("float32") for _ in range(2))
        valid = np.array([[False] * 2 + [True] * (slots - 2), [True] * slots])
        times = np.sort(rng.integers(-500, 0, (2, slots)), axis=1).astype("int32")
        context = (keys, values, valid, times)  # what candidate_context gives: the slots position L reads
        candidates = rng.normal(size=(2, 3, d)).astype("float32")
        candidate_times = np.full((2, 3), 60, "int32")
        probs = _candidate_attention(attention, candidates, context, candidate_times)  # [B, H, M, S + 1]
        v = attention._heads(ops.convert_to_tensor(candidates), attention.value_kernel)
        mixed = ops.einsum("bhms,bshd->bmhd", probs[..., :-1], context[1]) + ops.moveaxis(probs[..., -1:], 1, 2) * v
        self.assertAllClose(to_numpy(attention._merge(mixed)),
                            to_numpy(attention.attend_candidates(candidates, context, candidate_times)), atol=1e-5)

        # evaluate's figure of it (the model's introspect stands in: it ran above)
        directory, report = Path(self.get_temp_dir()), {}
        stand_in = SimpleNamespace(introspect=lambda features: stats)
        self.assertEqual(model_figures(stand_in, Batches((self.features, self.labels)), directory, report),
                         ["history_attention.png"])
        self.assertGreater((directory / "history_attention.png").stat().st_size, 10_000)
        self.assertIsNone(report["introspection"]["attention"][0][0][0])  # NaN (padding) is null in the report

    def test_rest_positions_are_the_rope_index_and_the_rote_buckets(self):
        model = zoo.get("rest", schema=self.simulator.schema, **dict(SMALL["rest"], time_granularities=[0, MINUTE]))
        stats = model.introspect(self.features)
        row = stats["row"]
        valid = self.features["hist_item_id"][row] > 0
        times = self.features["hist_time"][row][valid]
        self.assertEqual(stats["time_granularities"], [0, MINUTE])
        self.assertEqual(stats["positions"][0][valid].tolist(), np.flatnonzero(valid).tolist())  # RoPE: the slot
        self.assertEqual(stats["positions"][1][valid].tolist(), ((times - times[0]) // MINUTE).tolist())
        self.assertTrue(np.isnan(stats["positions"][:, ~valid]).all())
        self.assertEqual(stats["distinct_positions"], [valid.sum(), len(np.unique((times - times[0]) // MINUTE))])
        directory, report = Path(self.get_temp_dir()), {}
        self.assertEqual(model_figures(model, Batches((self.features, self.labels)), directory, report),
                         ["rote_positions.png"])
        self.assertGreater((directory / "rote_positions.png").stat().st_size, 10_000)
        self.assertEqual(report["introspection"]["row"], row)


class TrainingCurvesTest(TestCase):
    def test_loss_and_an_equal_logloss_share_one_panel(self):
        same = {"loss": [0.7], "logloss": [0.7], "val_loss": [0.6], "val_logloss": [0.6], "auc": [0.6]}
        merged, title = plots._merge_identical_loss(same)
        self.assertEqual((sorted(merged), title), (["auc", "loss", "val_loss"], "loss = LogLoss"))
        distilled = dict(same, loss=[0.9])  # distillation: the objective is not the LogLoss
        self.assertEqual(plots._merge_identical_loss(distilled), (distilled, None))

    def test_one_epoch_with_steps_and_a_resumed_run_without(self):
        directory = Path(self.get_temp_dir())
        history = {"loss": [0.69], "val_loss": [0.68], "auc": [0.55], "val_auc": [0.56]}
        steps = {"step": [1, 2, 3], "epoch_end": [3], "loss": [0.7, 0.69, 0.69], "auc": [0.5, 0.52, 0.55]}
        plots.training_curves(history, directory / "steps.png", steps)
        two_epochs = {k: v * 2 for k, v in history.items()}
        plots.training_curves(two_epochs, directory / "epochs.png", steps)  # steps of one epoch only: by epoch
        for name in ("steps.png", "epochs.png"):
            self.assertGreater((directory / name).stat().st_size, 10_000)

    def test_granularity_names(self):
        self.assertEqual([plots._granularity_name(tau) for tau in (0, 1, MINUTE, 2 * HOUR, 7884000, 31536000)],
                         ["RoPE (index)", "RoTE, tau = second", "RoTE, tau = minute", "RoTE, tau = 2 hours",
                          "RoTE, tau = quarter", "RoTE, tau = year"])
