"""The presets trained on real data score a user's raw rows through their fitted preprocessing, on every
backend, as they did when they were built (metadata.json's "reference": raw line numbers and scores)."""

import json
import unittest.mock
import tempfile
from pathlib import Path

import numpy as np

import zoo
from tests.testing import ROOT, SHARED_DATA, TestCase
from zoo.recipes.raw_rows import score_raw_rows

RAW_FILES = {"movielens": SHARED_DATA / "movielens-100k", "taobao": SHARED_DATA / "taobao-userbehavior"}


def real_presets():
    """(name, folder, reference) of every shipped preset that carries a fitted preprocessing."""
    found = []
    for folder in sorted((ROOT / "saved").iterdir()):
        if (folder / "preprocessing.json").is_file():
            reference = json.loads((folder / "metadata.json").read_text()).get("reference")
            found.append((folder.name, folder, reference))
    return found


class RealPresetsTest(TestCase):
    def test_real_data_presets_score_raw_rows_as_when_built(self):
        presets = real_presets()
        self.assertTrue(presets, "no shipped preset carries a preprocessing.json")
        for name, folder, reference in presets:
            with self.subTest(preset=name):
                self.assertIsNotNone(reference, f"{name}: metadata.json has no reference scores")
                source = RAW_FILES[reference["data"]] / reference["file"]
                if not source.is_file():
                    self.skipTest(f"{source} is not here (the data is not redistributed)")
                wanted = set(reference["lines"])
                model = zoo.get(name)
                with tempfile.TemporaryDirectory() as tmp:
                    rows = Path(tmp) / reference["file"]
                    with open(source, encoding="utf-8-sig") as f, open(rows, "w") as out:
                        out.writelines(line for number, line in enumerate(f, 1) if number in wanted)
                    scores, lines = score_raw_rows(model, reference["data"], rows, folder, cache_dir=tmp)
                # lines are numbered within the copied file; map them back to the source's numbering
                original = sorted(wanted)
                self.assertEqual([original[i - 1] for i in lines], reference["sample_lines"])
                np.testing.assert_allclose(scores, reference["scores"], rtol=1e-4, atol=1e-5)
                self.assertGreater(np.ptp(scores), 0.0)  # a model that scores every row alike is broken


class EvaluateRealPresetsTest(TestCase):
    """`python -m zoo evaluate rest_movielens --data movielens --path <ML-100K>` (and suan_userbehavior on the
    UserBehavior sample) with no other flag: the preset's protocol options (L = 50) are applied, the refit
    equals the preset's fit, and the test split scores exactly the test AUC the preset records. TensorFlow
    only: the same command path runs on every backend in zoo/main_test.py's YourOwnDataTest; here it
    scores 10,371 ReST and 22,754 SUAN rows."""

    def test_rest_movielens_evaluates_on_its_own_data_with_no_flags(self):
        self.check("rest_movielens", "movielens", SHARED_DATA / "movielens-100k", "u.data")

    def test_suan_userbehavior_evaluates_on_its_own_data_with_no_flags(self):
        # its protocol options include the negatives' `seed`, which must not reach load's shuffle seed
        folder = SHARED_DATA / "taobao-userbehavior"
        self.check("suan_userbehavior", "taobao", folder / "UserBehavior.csv", "UserBehavior.csv")

    def check(self, preset, data, path, file):
        import contextlib
        import io
        import os
        import unittest

        import keras

        from zoo.__main__ import main

        if keras.backend.backend() != "tensorflow" or not (path if path.is_file() else path / file).exists():
            raise unittest.SkipTest(f"TensorFlow with the shared {file} only")
        recorded = json.loads((ROOT / "saved" / preset / "metadata.json").read_text())["metrics"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                unittest.mock.patch.dict(os.environ, {"ZOO_DATA_CACHE": tempfile.mkdtemp()}):
            status = main(["evaluate", preset, "--data", data, "--path", str(path)])
        self.assertEqual(status, 0)
        self.assertIn("its fit equals the preset's", err.getvalue())  # (the lines on stderr, the JSON alone on stdout)
        report = json.loads(out.getvalue())
        self.assertEqual(report["rows"], recorded["test_rows"])
        self.assertAlmostEqual(report["auc"], recorded["test_auc"], places=5)
