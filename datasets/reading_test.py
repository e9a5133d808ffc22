import io
import os
from unittest import mock

from tests.testing import TestCase
from zoo.datasets.reading import Repairs, count_lines, find_file, read_rows
from zoo.errors import ZooError


class ReadRowsTest(TestCase):
    def write(self, text, name="rows.csv"):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_header_and_rows(self):
        path = self.write("a,b\n1,2\n3,4\n")
        rows = list(read_rows(path, ",", 2, Repairs(path), header=("A", "B")))
        self.assertEqual(rows, [(2, ["1", "2"]), (3, ["3", "4"])])

    def test_first_line_that_is_not_the_header_is_data(self):
        path = self.write("1,2\n")
        self.assertEqual(list(read_rows(path, ",", 2, Repairs(path), header=("a", "b"))), [(1, ["1", "2"])])

    def test_truncated_last_row_is_dropped_and_counted(self):
        path = self.write("1,2,3\n4,5")
        repairs = Repairs(path)
        self.assertEqual(list(read_rows(path, ",", 3, repairs)), [(1, ["1", "2", "3"])])
        self.assertEqual(repairs.summary(), "rows.csv: dropped 1 truncated last row(s)")

    def test_complete_last_row_without_newline_is_kept(self):
        path = self.write("1::2\n3::4")
        self.assertEqual(len(list(read_rows(path, "::", 2, Repairs(path)))), 2)

    def test_wrong_field_count_names_file_and_line(self):
        path = self.write("1,2\n3,4,5\n6,7\n")
        with self.assertRaisesRegex(ZooError, r"rows.csv, line 2: expected 2 fields, found 3"):
            list(read_rows(path, ",", 2, Repairs(path)))

    def test_short_row_in_the_middle_is_an_error(self):
        path = self.write("1,2\n3\n6,7\n")
        with self.assertRaisesRegex(ZooError, "line 2"):
            list(read_rows(path, ",", 2, Repairs(path)))

    def test_blank_lines_skipped_and_counted(self):
        path = self.write("1,2\n\n3,4\n")
        repairs = Repairs(path)
        self.assertEqual(len(list(read_rows(path, ",", 2, repairs))), 2)
        self.assertIn("skipped 1 blank line(s)", repairs.summary())

    def test_number_errors_name_line_and_column(self):
        repairs = Repairs("f.csv")
        self.assertEqual(repairs.number("3.0", 1, "x", int), 3)
        self.assertEqual(repairs.number("2.5", 1, "x"), 2.5)
        for bad, kind in (("abc", float), ("2.5", int), ("nan", float), ("inf", float), ("", int)):
            with self.assertRaisesRegex(ZooError, r"f.csv, line 7: column 'x' should be a number"):
                repairs.number(bad, 7, "x", kind)

    def test_report_prints_summary(self):
        repairs = Repairs("dir/f.csv")
        repairs.add("dropped {n} row(s) with an empty label", 2)
        repairs.add("dropped {n} row(s) with an empty label")
        repairs.add("nothing {n}", 0)
        self.assertEqual(repairs.summary(), "f.csv: dropped 3 row(s) with an empty label")

    def test_progress_bar_when_asked(self):
        path = self.write("1,2\n3,4\n")
        with mock.patch("sys.stdout", new_callable=io.StringIO) as out:
            self.assertEqual(len(list(read_rows(path, ",", 2, Repairs(path), verbose=True))), 2)
        self.assertIn(f"reading {path}", out.getvalue())
        with mock.patch("sys.stdout", new_callable=io.StringIO) as out:
            list(read_rows(path, ",", 2, Repairs(path)))  # "auto": small files read silently
        self.assertEqual(out.getvalue(), "")

    def test_count_lines_and_find_file(self):
        path = self.write("a\nb\nc")
        self.assertEqual(count_lines(path), 3)
        self.assertEqual(count_lines(self.write("a\nb\n", "two.csv")), 2)
        folder = os.path.dirname(path)
        self.assertEqual(find_file(folder, ("missing.csv", "rows.csv"), "x"), path)
        with self.assertRaisesRegex(ZooError, "found none of missing.csv"):
            find_file(folder, ("missing.csv",), "x")
        with self.assertRaisesRegex(ZooError, "does not exist"):
            find_file(os.path.join(folder, "nope"), ("a",), "x")
