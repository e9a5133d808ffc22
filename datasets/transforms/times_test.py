import datetime

import numpy as np
import pyarrow as pa

from tests.testing import TestCase
from zoo.datasets.reading import Repairs
from zoo.datasets.spec_reading import Chunk
from zoo.datasets.transforms import times

ISO = ["2024-03-01T12:00:00Z", "2024-03-01 12:00:00", "2024-03-01T12:00:00+08:00", "2024-02-29",
       "1999-12-31T23:59:59.75Z", "2024-03-01T12:00-05:30", "not a time", "", "2024-02-30", "1970-01-02"]


def python_seconds(text):
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() // 1)


class TimesTest(TestCase):
    def test_batch_and_graph_forms_read_iso_and_unix_times_alike(self):
        import tensorflow as tf

        expected = [python_seconds(text) for text in ISO[:6]]
        for fmt, texts, want in (("iso8601", ISO, expected), ("unix_ms", ["1709294400123", "", "x1", "5"],
                                                               [1709294400]),
                                 ("unix_s", ["1709294400", "1709294400.9", "-5", "1e20"], [1709294400] * 2)):
            with self.subTest(fmt=fmt):
                chunk = Chunk("log.csv", {"t": pa.array(texts, pa.string())}, 2, len(texts))
                repairs = Repairs("log.csv")
                seconds, kept = times.read(chunk, {"column": "t", "format": fmt, "on_error": "drop"}, repairs,
                                           np.ones(len(texts), bool))
                np.testing.assert_array_equal(seconds[:len(want)], want)
                np.testing.assert_array_equal(kept, np.arange(len(texts)) < len(want))  # the rest: unreadable or
                self.assertEqual(repairs.dropped, len(texts) - len(want))                # before 1990, dropped
                graph, valid = times.parse_times(tf.constant(texts), fmt)
                np.testing.assert_array_equal(valid.numpy(), kept)
                np.testing.assert_array_equal(graph.numpy()[kept], seconds[kept])

    def test_derived_hour_and_weekday(self):
        import tensorflow as tf

        monday_noon = python_seconds("2024-03-04T12:30:00Z")  # a Monday
        local = np.array([monday_noon, monday_noon + 86400 * 6 + 12 * 3600])  # the next Monday, 00:30
        np.testing.assert_array_equal(times.derived("hour", local), [13, 1])  # ids 1..24
        np.testing.assert_array_equal(times.derived("weekday", local), [1, 1])  # 1 = Monday
        np.testing.assert_array_equal(times.derived("weekday", tf.constant(local + 86400)).numpy(), [2, 2])
