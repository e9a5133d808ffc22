"""DataSpec's checks of values by type, range and the budget: one line naming the key, before anything is
built (issue #37's cases)."""

import copy
import json
import os
import re

from tests.impression_logs import impression_spec
from tests.testing import TestCase
from zoo.datasets.spec import BUDGET, DataSpec
from zoo.errors import ZooError


def mutated(change):
    spec = copy.deepcopy(impression_spec(sequence_length=4))
    change(spec)
    return spec


class DataSpecValuesTest(TestCase):
    def test_values_out_of_type_range_or_budget_are_one_line(self):
        random_split = {"by": "random", "fractions": [0.8, 0.1, 0.1]}
        cases = [
            (lambda s: s.update(split=dict(random_split, seed="abc")), r"'split.seed': should be a whole number"),
            (lambda s: s.update(split=dict(random_split, seed=-1)), r"'split.seed': .* found -1"),
            (lambda s: s.update(label={"events": True, "negatives": 1, "seed": "abc"}), r"'label.seed'"),
            (lambda s: s.update(split={"by": "date", "validation": "1997-13-45", "test": "1997-12-01"}),
             r"'split.validation': 1997-13-45 is not a date of the calendar"),
            (lambda s: s["columns"]["user_id"].update(hash_buckets=2**63),
             r"column 'user_id' 'hash_buckets': 9,223,372,036,854,775,808 is past the budget of 16,777,216"),
            (lambda s: s["columns"]["price"].update(fill=float("nan")), r"'fill' should be \"mean\" or a finite number"),
            (lambda s: s["columns"]["price"].update(fill=float("inf")), r"'fill' should be \"mean\" or a finite number"),
            (lambda s: s["columns"]["price"].update(fill=2**63), r"'fill' should be .* within \+-1e9, found 9223372036"),
            (lambda s: s.update(label={"events": True, "negatives": 1_000_000}),
             r"'label.negatives': 1,000,000 is past the budget of 100"),
            (lambda s: s.update(sequence_length=10_000_000), r"'sequence_length': 10,000,000 is past the budget"),
            (lambda s: s.update(embedding_dim=1_000_000), r"'embedding_dim': 1,000,000 is past the budget"),
        ]
        for change, message in cases:
            with self.assertRaisesRegex(ZooError, message):
                DataSpec(mutated(change))
        self.assertEqual(BUDGET["negatives"], 100)
        DataSpec(mutated(lambda s: s.update(sequence_length=BUDGET["sequence_length"])))  # the budget itself is allowed

    def test_feedback_and_statistics_are_checked_in_one_line(self):
        cases = [
            (lambda s: s["history"].pop("feedback"), r"'statistics.keys': 'user_id' is the user: .*\"feedback\": true"),
            (lambda s: s["statistics"].update(keys=["device_typo"]), r"'device_typo' should be the user or a categorical"),
            (lambda s: s["statistics"].update(keys=["price"]), r"'price' should be the user or a categorical"),
            (lambda s: s["statistics"].update(keys=[]), r"'statistics.keys': should list distinct column names"),
            (lambda s: s["statistics"].update(keys=[["item_id", "category"]]),
             r"\['item_id', 'category'\]: a pair is \[the user 'user_id', a categorical cand column\]"),
            (lambda s: s["statistics"].update(keys=[["user_id", "device"]]), r"a pair is \[the user 'user_id'"),
            (lambda s: s["statistics"].update(keys=[["user_id", "title"]]), r"so history.fields should list title"),
            (lambda s: s["statistics"].update(keys=[["user_id", "category"]] * 2), r"should list distinct column names"),
            (lambda s: s["statistics"].update(prior_rows=0), r"'statistics.prior_rows': should be a number in"),
            (lambda s: s["statistics"].update(buckets=10**6), r"'statistics.buckets': 1,000,000 is past the budget"),
            (lambda s: s["history"].update(feedback="yes"), r"'history.feedback': should be true or false"),
            (lambda s: (s.update(label={"events": True}), s.pop("statistics")),
             r"'history.feedback': needs a label column"),
            (lambda s: s["columns"].update(item_id_rate={"role": "cand"}), r"cand_item_id_rate of 'item_id' is also"),
            (lambda s: s["columns"].update(user_id_seen={"role": "user"}), r"user_user_id_seen of 'user_id' is also"),
        ]
        for change, message in cases:
            with self.assertRaisesRegex(ZooError, message):
                DataSpec(mutated(change))
        self.assertEqual(DataSpec(impression_spec()).statistics_features()[1],
                         ("item_id", "cand", ["item_id_seen", "item_id_positives", "item_id_rate"]))
        self.assertEqual(DataSpec(impression_spec()).statistics_features()[2], (("user_id", "category"), "cand", [
            "user_id_x_category_seen", "user_id_x_category_positives", "user_id_x_category_rate"]))
        self.assertEqual(DataSpec(impression_spec()).to_dict()["statistics"]["keys"][2], ["user_id", "category"])

    def test_a_spec_file_nested_too_deeply_is_one_line(self):
        path = os.path.join(self.get_temp_dir(), "deep.json")
        with open(path, "w") as f:
            f.write('{"notes": ' + "[" * 100_000 + "]" * 100_000 + "}")
        with self.assertRaisesRegex(ZooError, r"deep.json: not a spec \(JSON nested too deeply to read\)"):
            DataSpec.read(path)
        with open(path, "w") as f:
            json.dump(impression_spec(sequence_length=4), f)
        self.assertEqual(DataSpec.read(path).sequence_length, 4)

    def test_tags_columns_are_checked_in_one_line(self):
        cases = [
            (lambda s: s["columns"]["tags"].update(role="hist"), r"^spec column 'tags': tags are a feature of the row "
                                                                 r"\(role user, cand or ctx\)"),
            (lambda s: s["columns"]["tags"].update(separator=""), r"^spec column 'tags': 'separator' should be a "
                                                                  r"non-empty string$"),
            (lambda s: s["columns"]["tags"].update(max_tags=0), r"^spec column 'tags' 'max_tags'"),
            (lambda s: s["columns"]["tags"].update(max_tags=10**9), r"'max_tags': 1,000,000,000 is past the budget"),
            (lambda s: s["columns"]["tags"].update(positions=3), r"^spec column 'tags': 'positions' does not apply "
                                                                 r"to a tags column$"),
            (lambda s: s["columns"]["tags"].update(role="num"), r"tags are a feature of the row|role num is for numeric"),
            (lambda s: s.update(item="tags"), r"^spec 'item': 'tags' is a tags column; the item key is one value a row$"),
            (lambda s: s["statistics"].update(keys=["tags"]), r"'tags' should be the user or a categorical"),
        ]
        for change, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(ZooError, message) as raised:
                DataSpec(mutated(change))
            self.assertEqual(len(str(raised.exception).splitlines()), 1)
        drafted = DataSpec(mutated(lambda s: s["columns"].update(genres={"role": "user", "separator": ";"})))
        self.assertEqual(drafted.columns["genres"]["type"], "tags")  # a separator on a row's column: tags
        self.assertEqual(drafted.columns["genres"]["max_tags"], 8)

    def test_known_before_label_is_true_or_absent(self):
        """The opt-in that lets through a feature the fit would refuse as revealing the label
        (zoo.datasets.spec_engine.check_leaks): true, kept in the spec's JSON; false, as absent."""
        for value in ("yes", 1, None):
            with self.subTest(value=value), self.assertRaisesRegex(
                    ZooError, r"^spec column 'price': 'known_before_label' should be true or absent, found "
                              + re.escape(repr(value)) + "$"):
                DataSpec(mutated(lambda s: s["columns"]["price"].update(known_before_label=value)))
        unset = DataSpec(mutated(lambda s: s["columns"]["price"].update(known_before_label=False)))
        self.assertNotIn("known_before_label", unset.to_dict()["columns"]["price"])
        spec = DataSpec(mutated(lambda s: s["columns"]["price"].update(known_before_label=True)))
        self.assertIs(spec.to_dict()["columns"]["price"]["known_before_label"], True)
