import types

import numpy as np
import pyarrow as pa

from tests.testing import TestCase
from zoo.datasets.process_group import ProcessGroup
from zoo.datasets.transforms.fit import Fit

COLUMNS = {
    "item": {"type": "categorical", "role": "cand", "feature": "item", "min_count": 1, "max_size": None},
    "price": {"type": "numeric", "role": "num", "log1p": True, "fill": "mean", "scale": "standardize",
              "buckets": None},
    "age": {"type": "numeric", "role": "user", "log1p": False, "fill": 0.0, "scale": None, "buckets": 3},
    "genres": {"type": "tags", "role": "cand", "max_tags": 2, "min_count": 1, "max_size": None},
    "clicked": {"type": "list", "role": "hist", "feature": "item"},
    "queries": {"type": "list", "role": "hist", "feature": "query", "min_count": 1, "max_size": None},
}


def rows(n, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 4, n)
    genres = rng.integers(0, 3, n)
    return {
        "text": {"item": pa.array([f"i{v}" for v in rng.integers(0, 9, n)], pa.string())},
        "numeric": {"price": np.where(rng.random(n) < 0.2, np.nan, rng.exponential(5.0, n)),
                    "age": rng.integers(18, 60, n).astype(np.float64)},
        "list": {"genres": (np.array([f"g{v}" for v in rng.integers(0, 4, genres.sum())], dtype=object), genres),
                 "queries": (np.array([f"q{v}" for v in rng.integers(0, 6, lengths.sum())], dtype=object), lengths)},
    }


def joined(parts):
    return {
        "text": {"item": pa.concat_arrays([p["text"]["item"] for p in parts])},
        "numeric": {k: np.concatenate([p["numeric"][k] for p in parts]) for k in ("price", "age")},
        "list": {k: tuple(np.concatenate([p["list"][k][i] for p in parts]) for i in (0, 1)) for k in ("genres", "queries")},
    }


class FitTest(TestCase):
    def test_a_fit_batch_by_batch_equals_the_fit_of_all_rows_at_once(self):
        spec = types.SimpleNamespace(columns=COLUMNS, sequence_length=2)
        parts = [rows(40, seed) for seed in range(3)]
        trains = [np.random.default_rng(9 + i).random(40) < 0.7 for i in range(3)]
        streamed = Fit(spec)
        for part, train in zip(parts, trains):
            streamed.add(part, train)
        streamed = streamed.states(ProcessGroup())
        whole = Fit(spec).add(joined(parts), np.concatenate(trains)).states(ProcessGroup())
        self.assertEqual(list(whole), ["item", "price", "age", "genres", "clicked", "queries"])  # lists last
        self.assertEqual(whole["clicked"], {"kind": "shared", "column": "item"})  # the cand column's vocabulary
        for name in ("item", "age", "genres", "queries"):
            self.assertEqual(streamed[name], whole[name])
        self.assertEqual(streamed["price"].keys(), whole["price"].keys())
        for key in ("fill", "mean", "std"):
            self.assertAllClose(streamed["price"][key], whole["price"][key], atol=1e-12)
        # the fit reads the training rows only: a value of the other rows alone is not in the vocabulary
        data, train = joined(parts), np.concatenate(trains)
        items = np.asarray(data["text"]["item"].to_pylist())
        self.assertEqual(set(whole["item"]["tokens"]), set(items[train]))
        prices = np.log1p(data["numeric"]["price"][train])
        self.assertAllClose(whole["price"]["fill"], np.nanmean(prices), atol=1e-12)
        # a list column's vocabulary: the newest L = 2 tokens of each training row's list
        tokens, lengths = data["list"]["queries"]
        starts = np.cumsum(lengths) - lengths
        newest = {t for row in np.flatnonzero(train) for t in tokens[starts[row]:starts[row] + lengths[row]][-2:]}
        self.assertEqual(set(whole["queries"]["tokens"]), newest)

    def test_a_continued_fit_keeps_the_presets_numeric_state_and_grows_its_vocabulary(self):
        spec = types.SimpleNamespace(columns=COLUMNS, sequence_length=2)
        base = {"price": {"kind": "numeric", "log1p": True, "fill": 9.0, "mean": 1.0, "std": 2.0},
                "item": {"kind": "vocabulary", "tokens": ["old"]}}
        states = Fit(spec).add(rows(30, 0), np.ones(30, bool)).states(ProcessGroup(), base)
        self.assertEqual(states["price"], base["price"])
        self.assertEqual(states["item"]["tokens"][0], "old")
        self.assertGreater(len(states["item"]["tokens"]), 1)
