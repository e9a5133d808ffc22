"""`reproduce` runs each paper's table as a smoke (tiny models, a few hundred rows, one seed) on the real
samples in ../shared/data, resumes finished cells, and writes the summary files.

The harness is backend-agnostic Keras (the models it trains are tested on every backend by their own
tests), so the smoke runs under the TensorFlow backend only, to keep CI short.
"""

import json
import unittest

import keras

from tests.testing import SHARED_DATA, TestCase
from zoo.errors import ZooError
from zoo.recipes.reproduce import TABLES, Reproduction, markdown

MOVIELENS = SHARED_DATA / "movielens-100k"
TAOBAO = SHARED_DATA / "taobao-userbehavior" / "UserBehavior.csv"
CRITEO = SHARED_DATA / "deepctr" / "criteo_sample.txt"
TF_ONLY = keras.backend.backend() != "tensorflow"


@unittest.skipIf(TF_ONLY, "the harness smoke runs under the TensorFlow backend only")
class ReproduceSmokeTest(TestCase):
    def smoke(self, table, path, rows, **options):
        lines = []
        run = Reproduction(table, str(path), self.get_temp_dir(), smoke=True, max_rows=200, rows=rows,
                           log=lines.append, **options)
        summary = run.run()
        return run, summary, lines

    @unittest.skipUnless(MOVIELENS.exists(), "shared MovieLens-100K not available")
    def test_rest_table2_runs_resumes_and_summarises(self):
        run, summary, lines = self.smoke("rest-table2", MOVIELENS, ["ReST", "FM"], data_options={"sequence_length": 20})
        self.assertEqual(sorted(r["label"] for r in summary["rows"]), ["FM", "ReST"])
        for row in summary["rows"]:
            self.assertTrue(0.0 <= row["auc_mean"] <= 1.0)
            self.assertEqual(row["seeds"], 1)
        rest = next(r for r in summary["rows"] if r["label"] == "ReST")
        self.assertIn("FM", rest["vs"])  # the paired bootstrap against the reference row
        self.assertTrue(0.0 <= rest["vs"]["FM"]["p_value"] <= 1.0)
        self.assertTrue((run.out / "table.md").is_file() and (run.out / "auc.png").is_file())
        written = json.loads((run.out / "table.json").read_text())["rows"]
        self.assertEqual(json.dumps(written), json.dumps(summary["rows"]))
        self.assertTrue(any(line.startswith("[1/2] ReST seed 0: test AUC") for line in lines), lines)
        # A second run keeps the finished cells.
        lines.clear()
        again = run.run()
        self.assertTrue(all(line.endswith("kept") for line in lines if line.startswith("[")), lines)
        self.assertEqual(json.dumps(again["rows"]), json.dumps(summary["rows"]))  # NaN s.d. of one seed
        # A run limited to one row still summarises every finished row.
        only_fm = Reproduction("rest-table2", str(MOVIELENS), run.out.parents[1], smoke=True, max_rows=200, rows=["FM"],
                               data_options={"sequence_length": 20}, log=lines.append).run()
        self.assertEqual(sorted(r["label"] for r in only_fm["rows"]), ["FM", "ReST"])

    @unittest.skipUnless(TAOBAO.exists(), "shared Taobao UserBehavior sample not available")
    def test_suan_table2_and_scaling(self):
        _, summary, _ = self.smoke("suan-table2", TAOBAO, ["SUAN", "TWIN"], data_options={"sequence_length": 10})
        self.assertEqual(sorted(r["label"] for r in summary["rows"]), ["SUAN", "TWIN"])
        _, summary, _ = self.smoke("scaling", TAOBAO, ["DIN 25%", "DIN 50%", "DIN 100%"],
                                   data_options={"sequence_length": 10})
        samples = [r["train_samples"] for r in sorted(summary["rows"], key=lambda r: r["fraction"])]
        self.assertEqual(len(samples), 3)
        self.assertTrue(samples[0] < samples[1] < samples[2], samples)
        self.assertIn("din", summary["fits"])  # a fit, or the reason it has none (3 points, 4 coefficients)

    @unittest.skipUnless(CRITEO.exists(), "shared Criteo sample not available")
    def test_deres_table2_on_the_criteo_sample(self):
        _, summary, _ = self.smoke("deres-table2", CRITEO, ["DeRes-P"])
        self.assertEqual([r["label"] for r in summary["rows"]], ["DeRes-P"])

    @unittest.skipUnless(CRITEO.exists(), "shared Criteo sample not available")
    def test_deres_scaling_fits_its_own_law(self):
        _, summary, _ = self.smoke("deres-scaling", CRITEO, ["DeRes-P L=2"])
        self.assertEqual([r["label"] for r in summary["rows"]], ["DeRes-P L=2"])
        self.assertGreater(summary["rows"][0]["train_samples"], 0)
        # one point cannot fit three coefficients: the fit says so, naming DeRes' law
        self.assertRegex(summary["fits"]["deres_p"]["error"], "the deres law has 3 coefficients")


class ScalingTablesTest(TestCase):
    def test_deres_scaling_rows_are_five_depths_per_model_with_valid_blocks(self):
        table = TABLES["deres-scaling"]
        self.assertEqual(table.scaling_law, "deres")
        self.assertEqual(TABLES["scaling"].scaling_law, "suan")
        for model in ("deres_p", "ctr_transformer", "denseformer"):
            depths = [r.hyperparameters["num_layers"] for r in table.rows if r.model == model]
            self.assertEqual(depths, [2, 4, 8, 12, 16])
        for row in table.rows:
            if row.model == "deres_p":
                self.assertEqual(row.hyperparameters["num_layers"] % row.hyperparameters["num_blocks"], 0, row.label)


class TablesTest(TestCase):
    def test_every_table_names_registered_models_or_says_which_are_missing(self):
        from zoo import registry

        for table in TABLES.values():
            for reference in table.references:
                self.assertIn(reference, [r.label for r in table.rows], table.name)
            for row in table.rows:
                self.assertIn(row.model, registry.names(), f"{table.name}: {row.label}")

    def test_unknown_table(self):
        with self.assertRaisesRegex(ZooError, "unknown table 'rest-table9'"):
            Reproduction("rest-table9", "x")

    def test_an_unknown_row_is_refused_by_name(self):
        with self.assertRaisesRegex(ZooError, r"^rest-table2 has no row 'trans' \(rows: 'ReST', 'Trans\.'"):
            Reproduction("rest-table2", "x", rows=["trans"])
        chosen = Reproduction("rest-table2", "x", rows=["Trans.", "din"]).selected  # a label or a model name
        self.assertEqual([r.label for r in chosen], ["Trans.", "DIN"])

    def test_cells_run_seed_major(self):
        ran = []

        class Recording(Reproduction):
            def run_cell(self, row, seed, grid_point=None, tag=None):
                ran.append((row.label, seed))
                return {"test_auc": 0.5, "val_auc": 0.5, "epochs_run": 1, "wall_seconds": 0.0}

            def summarise(self):
                return None

        Recording("rest-table2", "x", self.get_temp_dir(), rows=["ReST", "FM"], seeds=(0, 1, 2), grid=False,
                  log=lambda line: None).run()
        self.assertEqual(ran, [("ReST", 0), ("FM", 0), ("ReST", 1), ("FM", 1), ("ReST", 2), ("FM", 2)])

    def test_markdown_orders_rows_by_auc(self):
        row = dict(label="A", parameters=10, seeds=3, auc_mean=0.7, auc_sd=0.01, auc_ci95=[0.68, 0.72],
                   logloss_mean=0.6, gauc_mean=None, wall_seconds=5.0, vs={})
        other = dict(row, label="B", auc_mean=0.8, vs={"A": {"rela_impr": 50.0, "p_value": 0.001}})
        text = markdown({"table": "t", "data": "d", "claims": "B > A", "rows": [row, other], "smoke": False})
        self.assertLess(text.index("| B |"), text.index("| A |"))
        self.assertIn("+50.00%", text)
