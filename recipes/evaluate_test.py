import contextlib
import io
import json
from pathlib import Path

import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.recipes import evaluate
from zoo.recipes.evaluate import StepLog
from zoo.recipes.metrics import auc, calibration, gauc

GENERAL = ["calibration.png", "roc_curve.png", "score_histograms.png"]


class EvaluateTest(TestCase):
    def test_report_metrics_calibration_and_figures(self):
        simulator = small_simulator()
        data = simulator.dataset(64, batch_size=16, seed=3, shuffle=False)
        model = zoo.get("din", schema=simulator.schema, attention_units=(4,), mlp_units=(8,))
        directory = Path(self.get_temp_dir())
        history = {"loss": [0.7, 0.6], "val_loss": [0.71, 0.65], "auc": [0.5, 0.6], "val_auc": [0.52, 0.58]}
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            report = evaluate(model, data, report_path=directory / "report.json", plots_dir=directory,
                              history=history, base_auc=0.51, verbose=1)
        self.assertIn("4/4", printed.getvalue())  # the progress bar knows the number of batches
        features, labels = simulator.sample(64, seed=3)
        scores = model.predict(features, verbose=0).reshape(-1)
        y = labels.reshape(-1)
        self.assertAlmostEqual(report["auc"], auc(y, scores), places=5)
        self.assertAlmostEqual(report["gauc"], gauc(features["user_user_id"], y, scores), places=5)
        self.assertEqual(report["rows"], 64)
        written = json.loads((directory / "report.json").read_text())
        self.assertEqual(written["rows"], 64)
        self.assertIn("rela_impr", report)
        clipped = np.clip(scores, 1e-7, 1 - 1e-7)
        logloss = -np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped))
        self.assertAlmostEqual(report["logloss"], logloss, places=5)
        expected = calibration(y, scores)
        self.assertAlmostEqual(report["calibration"]["ece"], expected["ece"], places=5)
        self.assertAlmostEqual(written["calibration"]["mean_pctr"], scores.mean(), places=5)
        self.assertAlmostEqual(written["calibration"]["observed_ctr"], y.mean(), places=7)
        self.assertEqual(report["figures"],
                         ["roc_curve.png", "calibration.png", "score_histograms.png", "training_curves.png"])
        for name in report["figures"]:
            self.assertGreater((directory / name).stat().st_size, 10_000, name)

    def test_scoring_batches_are_larger_but_bounded_by_the_history_tokens(self):
        from zoo.recipes.evaluate import SCORING_TOKENS, scoring_batch

        self.assertEqual(scoring_batch(1024), 4096)  # no history: 4x the training batch
        self.assertEqual(scoring_batch(1024, 50), 4096)
        self.assertEqual(scoring_batch(1024, 200), SCORING_TOKENS // 201)  # 1304: the tokens bound it
        self.assertEqual(scoring_batch(1024, 1000), 1024)  # never below the training batch
        self.assertEqual(scoring_batch(256, 50), 1024)

    def test_a_model_of_another_schema_is_refused_in_one_line(self):
        model = zoo.get("din", schema=small_simulator().schema, attention_units=(4,), mlp_units=(8,))
        other = small_simulator(sequence_length=12, num_items=90).dataset(16, batch_size=16, seed=3, shuffle=False)
        with self.assertRaisesRegex(ZooError, r"^din was built for another schema than this data: the history has "
                                              r"length 12 in the data but 8 in the model\. Build a model"):
            evaluate(model, other)

    def test_deres_connector_figures(self):
        from tests.model_configs import SMALL

        simulator = small_simulator()
        data = simulator.dataset(16, batch_size=16, seed=3, shuffle=False)
        model = zoo.get("deres_p", schema=simulator.schema, **SMALL["deres_p"])
        directory = Path(self.get_temp_dir())
        report = evaluate(model, data, plots_dir=directory)
        self.assertEqual(sorted(report["figures"]), sorted(GENERAL + ["alpha_heatmap.png", "gamma_per_layer.png"]))
        self.assertEqual(len(report["connector"]["gamma_mean"]), SMALL["deres_p"]["num_layers"])
        self.assertTrue((directory / "alpha_heatmap.png").stat().st_size > 1000)

    def test_step_log_counts_steps_across_epochs_and_a_resumed_start(self):
        log = StepLog(points=2)
        log.set_params({"epochs": 3, "steps": 4})
        log.on_epoch_begin(1)  # a run resumed after its first epoch
        for batch in range(4):
            log.on_train_batch_end(batch, {"loss": float(batch)})
        log.on_epoch_end(1)
        log.on_epoch_begin(2)
        for batch in range(4):
            log.on_train_batch_end(batch, {"loss": 10.0 + batch})
        log.on_epoch_end(2)
        self.assertEqual(log.history, {"step": [6, 8, 10, 12], "epoch_end": [8, 12], "loss": [1.0, 3.0, 11.0, 13.0]})
