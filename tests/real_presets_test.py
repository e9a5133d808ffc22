"""The presets trained on real data score a user's raw rows through their fitted preprocessing, on every
backend, as they did when they were built (metadata.json's "reference": raw line numbers and scores)."""

import json
import tempfile
from pathlib import Path

import numpy as np

import zoo
from tests.testing import ROOT, SHARED_DATA, TestCase
from zoo.recipes import score_raw_rows

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
