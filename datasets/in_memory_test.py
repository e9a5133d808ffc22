import csv
import os

import numpy as np

from tests.testing import TestCase
from zoo.datasets import in_memory
from zoo.errors import ZooError

SPEC = {"source": {"format": "csv", "delimiter": ";", "quote": '"', "header": True},
        "time": {"column": "ts", "format": "iso8601"},
        "columns": {"tags": {"role": "cand", "type": "tags", "separator": "|"}}}


class InMemoryRowsTest(TestCase):
    def written(self, rows, spec=SPEC):
        path = os.path.join(self.get_temp_dir(), "rows.csv")
        self.assertEqual(in_memory.write(rows, spec, path), 2)
        with open(path, newline="", encoding="utf-8") as f:  # (the fields, as the engine's CSV reader parses them)
            source = spec["source"]
            return [row for row in csv.reader(
                f, delimiter=source["delimiter"], quotechar=source["quote"] or '"',
                quoting=csv.QUOTE_MINIMAL if source["quote"] else csv.QUOTE_NONE)]

    def test_typed_columns_are_written_as_the_engine_reads_a_files_text(self):
        import pandas

        rows = pandas.DataFrame({
            "item": [3.0, np.nan],  # an integer column with a gap: pandas makes it float
            "price": [1.5, 2.0],
            "title": ["a;b", 'say "hi"'],  # the delimiter and a quote: quoted as CSV does
            "ts": pandas.to_datetime(["2024-03-01T08:00:00+02:00", "2024-03-02T00:00:01Z"], utc=True, format="ISO8601"),
            "tags": [["new", "sale"], []],
            "flag": [True, False],
        })
        self.assertEqual(self.written(rows), [
            ["item", "price", "title", "ts", "tags", "flag"],
            ["3", "1.5", "a;b", "2024-03-01T06:00:00Z", "new|sale", "true"],
            ["", "2", 'say "hi"', "2024-03-02T00:00:01Z", "", "false"],
        ])

    def test_a_timestamp_is_written_in_the_specs_time_format(self):
        import pyarrow as pa

        times = pa.array([1_709_280_000_123, 1_709_366_401_999], pa.timestamp("ms", tz="UTC"))  # (fractions cut)
        for fmt, expected in (("unix_s", ["1709280000", "1709366401"]), ("unix_ms", ["1709280000123", "1709366401999"]),
                              ("%d/%m/%Y %H:%M", ["01/03/2024 08:00", "02/03/2024 08:00"])):
            spec = dict(SPEC, time={"column": "ts", "format": fmt})
            self.assertEqual(self.written(pa.table({"ts": times}), spec)[1:], [[e] for e in expected])

    def test_a_headerless_spec_gets_its_column_order_and_refuses_a_missing_column(self):
        spec = dict(SPEC, source={"format": "csv", "delimiter": "\t", "quote": None, "header": False,
                                  "column_names": ["user", "item", "label"]})
        rows = [{"label": 1, "item": "i1", "user": "u1"}, {"item": "i2", "user": "u2", "label": 0}]
        self.assertEqual(self.written(rows, spec), [["u1", "i1", "1"], ["u2", "i2", "0"]])
        with self.assertRaisesRegex(ZooError, "^the rows given lack the column\\(s\\) label of the preset's spec"):
            in_memory.write([{"user": "u1", "item": "i1"}], spec, os.path.join(self.get_temp_dir(), "x.csv"))

    def test_a_list_of_dicts_with_nan_and_missing_keys_gives_missing_values(self):
        rows = [{"item": "i1", "price": float("nan")}, {"item": float("nan"), "price": 2.5, "extra": "x"}]
        self.assertEqual(self.written(rows), [["item", "price", "extra"], ["i1", "", ""], ["", "2.5", "x"]])

    def test_what_is_not_rows_is_refused_in_one_line(self):
        path = os.path.join(self.get_temp_dir(), "x.csv")
        with self.assertRaisesRegex(ZooError, "column 'b' is one value"):
            in_memory.write({"a": [1, 2], "b": 3}, SPEC, path)
        with self.assertRaisesRegex(ZooError, "hold no row"):
            in_memory.write({"a": []}, SPEC, path)
        with self.assertRaisesRegex(ZooError, "holds lists"):
            in_memory.write({"hist": [["a"], ["b"]]}, SPEC, path)
        self.assertFalse(in_memory.is_rows([1, 2]))
        self.assertTrue(in_memory.is_rows([{"a": 1}]))

    def test_errors_name_the_rows_position(self):
        message = in_memory.renamed("/tmp/x/rows.csv, line 7: column 'ts' is bad in /tmp/x/rows.csv", "/tmp/x/rows.csv", 2)
        self.assertEqual(message, "row 5 of the rows given: column 'ts' is bad in the rows given")

    def test_a_json_lines_spec_gets_its_times_in_its_format(self):
        import json

        import pyarrow as pa

        spec = dict(SPEC, source={"format": "jsonl"}, time={"column": "ts", "format": "unix_s"})
        path = os.path.join(self.get_temp_dir(), "rows.jsonl")
        rows = pa.table({"ts": pa.array([1_709_280_000_500], pa.timestamp("ms", tz="UTC")), "item": ["i1"]})
        self.assertEqual(in_memory.write(rows, spec, path), 1)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(json.loads(f.readline()), {"ts": "1709280000", "item": "i1"})
