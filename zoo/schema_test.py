from unittest import mock

import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema


def schema(**overrides):
    config = dict(
        features=(Feature("item_id", "hist", 10), Feature("item_id", "cand", 10), Feature("age", "user", 5)),
        sequence_length=4,
        time=True,
    )
    config.update(overrides)
    return Schema(**config)


class SchemaTest(TestCase):
    def test_json_round_trip(self):
        original = small_simulator().schema
        self.assertEqual(Schema.from_json(original.to_json()), original)

    def test_keys_and_input_spec_follow_the_contract(self):
        spec = schema().input_spec()
        self.assertEqual(
            spec,
            {
                "hist_item_id": ((4,), "int32"),
                "hist_time": ((4,), "int64"),
                "user_age": ((), "int32"),
                "cand_item_id": ((1,), "int32"),
                "cand_time": ((1,), "int64"),
            },
        )
        self.assertEqual(schema().input_spec(num_candidates=16)["cand_time"], ((16,), "int64"))

    def test_invalid_schemas_name_the_problem(self):
        cases = [
            (dict(features=(Feature("x", "item", 5),), sequence_length=0, time=False), "unknown group 'item'"),
            (dict(features=(Feature("x", "user", 1),), sequence_length=0, time=False), "needs at least 2"),
            (dict(features=(Feature("x", "num", 5),), sequence_length=0, time=False), "takes no vocabulary_size"),
            (dict(sequence_length=0), "sequence_length is 0"),
            (dict(features=(Feature("x", "user", 5),), sequence_length=3, time=False), "no hist feature"),
            (dict(num_candidates=0), "num_candidates is 0"),
            (dict(features=(Feature("x", "user", 5),), sequence_length=0, time=True), "time=True but no hist"),
            (dict(features=(Feature("time", "hist", 5),)), "is not 'time'"),
            (
                dict(features=(Feature("item_id", "hist", 10), Feature("item_id", "cand", 11))),
                "share one embedding table",
            ),
            (dict(features=(Feature("a", "user", 3), Feature("a", "user", 3)), sequence_length=0, time=False),
             "appears twice"),
            (dict(features=(Feature("genre", "hist", 10), Feature("genre", "cand", 10, tags=2))),
             "^cand_genre is a tags feature and hist_genre one value a behaviour; the two would share one embedding"),
            (dict(features=(Feature("g", "user", 10, tags=-1),), sequence_length=0, time=False),
             "^feature 'user_g' has tags -1; it must be an integer >= 0$"),
            (dict(features=(Feature("g", "num", tags=2),), sequence_length=0, time=False),
             "^feature 'num_g' has tags 2: tags are features of a row"),
            (dict(features=(Feature("g", "ctx", 10, tags=10**9),), sequence_length=0, time=False),
             "^feature 'ctx_g' tags: 1,000,000,000 is past the budget"),
        ]
        for kwargs, message in cases:
            with self.assertRaisesRegex(ZooError, message):
                schema(**kwargs)

    def test_from_dict_rejects_unknown_keys(self):
        config = schema().to_dict()
        config["colour"] = 1
        with self.assertRaisesRegex(ZooError, "unknown key"):
            Schema.from_dict(config)
        with self.assertRaisesRegex(ZooError, "not valid JSON"):
            Schema.from_json("{")

    def test_require_names_the_missing_part(self):
        with self.assertRaisesRegex(ZooError, "suan needs behaviour times"):
            schema(time=False).require("suan", time=True)
        with self.assertRaisesRegex(ZooError, "needs at least one ctx_ feature"):
            schema().require("x", groups=("ctx",))

    def test_validate_accepts_a_simulated_batch(self):
        simulator = small_simulator()
        features, labels = simulator.sample(5)
        simulator.schema.validate(features, labels)

    def test_validate_rejects_bad_batches_in_one_line(self):
        simulator = small_simulator()
        good, _ = simulator.sample(3)
        vocab = simulator.schema.feature("hist_item_id").vocabulary_size
        cases = {
            "has length 9 but the schema allows 8": {"hist_item_id": np.ones((3, 9), "int32")},
            "has a negative value": {"user_age": np.array([1, -1, 2], "int32")},
            f"has id {vocab} but its vocabulary_size is {vocab}": {"hist_item_id": np.full((3, 8), vocab, "int32")},
            "must hold integer ids": {"ctx_hour": np.ones(3, "float32")},
            "contains NaN": {"num_price": np.array([0.0, np.nan, 1.0], "float32")},
            "batch size 2": {"user_age": np.ones(2, "int32")},
            "candidate features disagree on M": {"cand_item_id": np.ones((3, 2), "int32")},
            "has length 5 but the schema needs 8 \\(left-pad": {"hist_category": np.ones((3, 5), "int32")},
            "num_price has 3e\\+38, beyond": {"num_price": np.array([0.0, 3e38, 1.0], "float32")},
            "hist_item_id is ragged": {"hist_item_id": [[1, 2], [3], [4, 5, 6]]},
            "cand_item_id has shape \\[3\\] but the contract wants \\['B', 'M'\\]":
                {"cand_item_id": np.ones(3, "int32")},
            "hist_time must hold integer times \\(unix seconds\\)": {"hist_time": good["hist_time"] * 1.0},
            # Python ints past int64 arrive as uint64: refused, never wrapped to negative times.
            "cand_time has 9223372036854775809, beyond (9223372036854775807|2147483647)":
                {"cand_time": [[2**63 + 1]] * 3},
        }
        for message, change in cases.items():
            with self.assertRaisesRegex(ZooError, message):
                simulator.schema.validate({**good, **change})
        missing = dict(good)
        del missing["hist_time"]
        with self.assertRaisesRegex(ZooError, "missing feature 'hist_time'"):
            simulator.schema.validate(missing)
        with self.assertRaisesRegex(ZooError, "unknown feature"):
            simulator.schema.validate({**good, "hist_colour": good["hist_item_id"]})
        with self.assertRaisesRegex(ZooError, "the batch is empty \\(B = 0\\)"):
            simulator.schema.validate({k: v[:0] for k, v in good.items()}, empty_ok=False)
        simulator.schema.validate({k: v[:0] for k, v in good.items()})  # an empty split is a valid data set
        no_candidates = {k: (v[:, :0] if k.startswith("cand") else v) for k, v in good.items()}
        with self.assertRaisesRegex(ZooError, "no candidates to score \\(cand_\\* arrays have M = 0\\)"):
            simulator.schema.validate(no_candidates, empty_ok=False)
        unsorted = {k: v.copy() for k, v in good.items()}
        row = next(r for r in range(3) if np.count_nonzero(good["hist_item_id"][r]) >= 2)
        real = np.flatnonzero(unsorted["hist_item_id"][row])
        unsorted["hist_time"][row, real[-1]] = unsorted["hist_time"][row, real[-2]] - 1
        with self.assertRaisesRegex(ZooError, f"hist_time of row {row} is not sorted oldest first"):
            simulator.schema.validate(unsorted)
        as_lists = {k: v.tolist() for k, v in good.items()}  # Python lists: checked, returned as typed arrays
        arrays = simulator.schema.validate(as_lists)
        self.assertEqual({k: str(v.dtype) for k, v in arrays.items()}, {k: str(v.dtype) for k, v in good.items()})
        hist_keys = [k for k in good if k.startswith("hist")]
        validated = simulator.schema.validate({k: good[k] for k in hist_keys}, keys=hist_keys)
        self.assertEqual(sorted(validated), sorted(hist_keys))

    def test_times_the_backend_would_truncate_are_refused(self):
        """JAX without x64 truncates int64 inputs to int32: a time after 2038-01-19 would be wrapped to a
        negative one there, so it is refused there (and accepted where int64 holds it)."""
        import keras

        simulator = small_simulator()
        good, _ = simulator.sample(3)
        later = dict(good, cand_time=good["cand_time"] + 2**31)
        if keras.backend.backend() == "jax":
            with self.assertRaisesRegex(ZooError, "cand_time has .*, beyond 2147483647 \\(JAX without x64"):
                simulator.schema.validate(later)
        else:
            self.assertEqual(simulator.schema.validate(later)["cand_time"].tolist(), later["cand_time"].tolist())


class SchemaBudgetTest(TestCase):
    """Every size a schema names stays within the resource budget (zoo/budget.py), refused in one line before
    any model allocates it: a fresh lightsuan for L = 100,000 once ran past 450 s and 5.7 GB."""

    def test_sizes_past_the_budget_are_refused_in_one_line(self):
        import zoo
        from zoo.budget import BUDGET

        config = small_simulator().schema.to_dict()
        cases = [
            ({"sequence_length": 100_000}, "schema sequence_length: 100,000 is past the budget of 4,096 "
                                           "(zoo/budget.py BUDGET['sequence_length'])"),
            ({"num_candidates": 100_000}, "schema num_candidates: 100,000 is past the budget of 4,096"),
            ({"features": [dict(config["features"][0], vocabulary_size=2**30)] + config["features"][1:]},
             "vocabulary_size: 1,073,741,824 is past the budget of 33,554,432"),
            ({"features": [dict(f, embedding_dim=1_000_000) for f in config["features"]]},
             "embedding_dim: 1,000,000 is past the budget of 1,024"),
        ]
        for change, message in cases:
            for build in (lambda c: Schema.from_dict(c), lambda c: zoo.get("lightsuan", schema=c)):
                with self.subTest(change=list(change)), self.assertRaises(ZooError) as caught:
                    build(dict(config, **change))  # the schema itself refuses: no layer is built
                self.assertIn(message, str(caught.exception))
                self.assertEqual(len(str(caught.exception).splitlines()), 1)
        Schema.from_dict(dict(config, sequence_length=BUDGET["sequence_length"]))  # the budget itself is allowed
        with mock.patch.dict(BUDGET, sequence_length=100_000):  # raised for a deliberately larger model
            self.assertEqual(Schema.from_dict(dict(config, sequence_length=100_000)).sequence_length, 100_000)
