import numpy as np
import pyarrow as pa

from tests.testing import TestCase
from zoo.datasets.reading import Repairs
from zoo.datasets.spec_reading import Chunk
from zoo.datasets.transforms import labels

RULES = [
    {"column": "y"},
    {"column": "kind", "op": "in", "value": ["order", "basket"]},
    {"column": "kind", "op": "==", "value": "order"},
    {"column": "stars", "op": ">=", "value": 4},
]
ROWS = {"y": ["1", "0", "", "1", "0"], "kind": ["order", " basket", "view", "", "order"],
        "stars": ["5", "3", "4", "", "1"]}


class LabelsTest(TestCase):
    def test_batch_labels_and_graph_feedback_ids_read_each_rule_alike(self):
        import tensorflow as tf

        chunk = Chunk("log.csv", {name: pa.array(v, pa.string()) for name, v in ROWS.items()}, 2, 5)
        expected = {  # (label, kept) per rule, by hand
            "y": ([1, 0, 0, 1, 0], [1, 1, 0, 1, 1]),
            "kind in ['order', 'basket']": ([1, 1, 0, 0, 1], [1, 1, 1, 0, 1]),
            "kind == 'order'": ([1, 0, 0, 0, 1], [1, 1, 1, 0, 1]),
            "stars >= 4": ([1, 0, 1, 0, 0], [1, 1, 1, 0, 1]),
        }
        for rule in RULES:
            with self.subTest(rule=labels.rule_text(rule)):
                repairs = Repairs("log.csv")
                label, kept = labels.read(chunk, rule, repairs)
                want, want_kept = expected[labels.rule_text(rule)]
                np.testing.assert_array_equal(label[kept], np.asarray(want, np.float32)[np.asarray(want_kept, bool)])
                np.testing.assert_array_equal(kept, np.asarray(want_kept, bool))
                self.assertEqual(repairs.dropped, 5 - sum(want_kept))  # an empty label drops its row, counted
                feedback = labels.feedback_ids(tf.constant(ROWS[rule["column"]]), rule).numpy()
                np.testing.assert_array_equal(feedback, np.where(kept, np.where(label == 1, 2, 1), 3))

    def test_a_zero_one_column_with_another_value_is_refused_in_one_line(self):
        chunk = Chunk("log.csv", {"y": pa.array(["1", "2"], pa.string())}, 2, 2)
        with self.assertRaisesRegex(Exception, r"^log.csv, line 3: column 'y' should be 0 or 1, found '2'"):
            labels.read(chunk, {"column": "y"}, Repairs("log.csv"))
