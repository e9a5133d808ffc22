import json
from pathlib import Path

import numpy as np

import zoo
from tests.testing import TestCase, small_simulator
from zoo.recipes import evaluate
from zoo.recipes.metrics import auc, gauc


class EvaluateTest(TestCase):
    def test_report_metrics_and_figures(self):
        simulator = small_simulator()
        data = simulator.dataset(64, batch_size=16, seed=3, shuffle=False)
        model = zoo.get("din", schema=simulator.schema, attention_units=(4,), mlp_units=(8,))
        directory = Path(self.get_temp_dir())
        history = {"loss": [0.7, 0.6], "val_loss": [0.71, 0.65], "auc": [0.5, 0.6], "val_auc": [0.52, 0.58]}
        report = evaluate(model, data, report_path=directory / "report.json", plots_dir=directory, history=history, base_auc=0.51)
        features, labels = simulator.sample(64, seed=3)
        scores = model.predict(features, verbose=0).reshape(-1)
        self.assertAlmostEqual(report["auc"], auc(labels.reshape(-1), scores), places=5)
        self.assertAlmostEqual(report["gauc"], gauc(features["user_user_id"], labels.reshape(-1), scores), places=5)
        self.assertEqual(report["rows"], 64)
        self.assertEqual(json.loads((directory / "report.json").read_text())["rows"], 64)
        self.assertTrue((directory / "training_curves.png").stat().st_size > 1000)
        self.assertIn("rela_impr", report)
        clipped = np.clip(scores, 1e-7, 1 - 1e-7)
        y = labels.reshape(-1)
        self.assertAlmostEqual(report["logloss"], -np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)), places=5)

    def test_deres_connector_figures(self):
        from tests.model_configs import SMALL

        simulator = small_simulator()
        data = simulator.dataset(16, batch_size=16, seed=3, shuffle=False)
        model = zoo.get("deres_p", schema=simulator.schema, **SMALL["deres_p"])
        directory = Path(self.get_temp_dir())
        report = evaluate(model, data, plots_dir=directory)
        self.assertEqual(sorted(report["figures"]), ["alpha_heatmap.png", "gamma_per_layer.png"])
        self.assertEqual(len(report["connector"]["gamma_mean"]), SMALL["deres_p"]["num_layers"])
        self.assertTrue((directory / "alpha_heatmap.png").stat().st_size > 1000)
