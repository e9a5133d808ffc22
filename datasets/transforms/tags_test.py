import numpy as np
import pyarrow as pa

from tests.testing import TestCase
from zoo.datasets.transforms import tags, vocabulary

STATE = {"kind": "vocabulary", "tokens": ["Comedy", "Drama", "War"]}


class TagsTest(TestCase):
    def test_batch_and_graph_forms_keep_the_first_max_tags_values(self):
        import tensorflow as tf

        cells = ["Comedy|Drama|War", " Drama ||Noir", "", "War"]
        # the reader's split (spec_reading.token_lists): trimmed, empty values skipped
        flat = np.array(["Comedy", "Drama", "War", "Drama", "Noir", "War"], dtype=object)
        lengths = np.array([3, 2, 0, 1])
        ids, cut = tags.ids(lambda kept, rows: vocabulary.ids(STATE, pa.array(kept, pa.string())), flat, lengths, 2)
        expected = [[1, 2], [2, 4], [0, 0], [3, 0]]  # 4 = OOV (Noir); the third tag of row 0 cut
        np.testing.assert_array_equal(ids, expected)
        np.testing.assert_array_equal(cut, [True, False, False, False])
        options = {"max_tags": 2, "separator": "|"}
        graph, unknown, graph_cut = tags.graph_ids(
            lambda texts: vocabulary.graph_ids(STATE, vocabulary.table(STATE), texts), tf.constant(cells), options)
        np.testing.assert_array_equal(graph.numpy(), expected)
        np.testing.assert_array_equal(unknown.numpy(), [0, 1, 0, 0])
        np.testing.assert_array_equal(graph_cut.numpy(), [1, 0, 0, 0])
