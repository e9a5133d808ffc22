import csv
import os

import numpy as np

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase
from zoo.datasets import prepare
from zoo.recipes import score_raw_rows


class ScoreRawRowsTest(TestCase):
    def test_a_spec_preset_scores_labelled_rows_with_their_labels(self):
        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=200)
        later = write_impression_log(os.path.join(folder, "later.csv"), rows=40, seed=2, start="2024-03-20T00:00:00Z")
        cache = os.path.join(folder, "cache")
        state = prepare(impression_spec(sequence_length=4), log, cache_dir=cache, verbose=False).preprocessing()
        model = zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), **SMALL["din"])
        scores, lines, labels = score_raw_rows(model, None, later, state, cache_dir=cache, with_labels=True,
                                               verbose=0)
        with open(later, newline="") as f:
            clicked = [float(row["clicked"]) for row in csv.DictReader(f)]
        self.assertEqual(sorted(lines.tolist()), list(range(2, 42)))
        np.testing.assert_array_equal(labels, [clicked[line - 2] for line in lines])
        processed = prepare(None, later, preprocessing=state, cache_dir=cache, verbose=False)
        features, _ = processed.take("all", np.arange(40))
        self.assertAllClose(scores, np.asarray(model.score(features)).reshape(-1))
        two = score_raw_rows(model, None, later, state, cache_dir=cache, verbose=0)
        self.assertLen(two, 2)
