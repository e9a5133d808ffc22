import io
import os
from unittest import mock

from tests.testing import TestCase
from zoo.datasets.reading import TRUNCATED, Repairs, count_rows, find_file, first_line, read_rows
from zoo.errors import ZooError


class ReadRowsTest(TestCase):
    def write(self, text, name="rows.csv"):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "wb") as f:
            f.write(text.encode("latin-1") if isinstance(text, str) else text)
        return path

    def test_header_and_rows(self):
        path = self.write("a,b\n1,2\n3,4\n")
        repairs = Repairs(path)
        rows = list(read_rows(path, ",", 2, repairs, header=("A", "B")))
        self.assertEqual(rows, [(2, ["1", "2"]), (3, ["3", "4"])])
        self.assertEqual(repairs.read, 2)  # the header is not a row

    def test_first_line_that_is_not_the_header_is_data(self):
        path = self.write("1,2\n")
        self.assertEqual(list(read_rows(path, ",", 2, Repairs(path), header=("a", "b"))), [(1, ["1", "2"])])

    def test_truncated_last_row_is_dropped_and_counted(self):
        path = self.write("1,2,3\n4,5")
        repairs = Repairs(path)
        self.assertEqual(list(read_rows(path, ",", 3, repairs)), [(1, ["1", "2", "3"])])
        self.assertEqual(repairs.summary(), "rows.csv: read 2 row(s); dropped 1 truncated last row(s)")
        self.assertEqual((repairs.read, repairs.dropped), (2, 1))

    def test_last_row_cut_inside_its_final_field_is_dropped(self):
        # ML-100K's u.data cut inside the last timestamp: all fields present, the time 4 digits short.
        path = self.write("196\t242\t3\t881250949\n186\t302\t3\t891717742\n12\t203\t3\t87995")
        repairs = Repairs(path)
        self.assertEqual([line for line, _ in read_rows(path, "\t", 4, repairs)], [1, 2])
        self.assertEqual(repairs.counts[TRUNCATED], 1)
        # An empty final field is as short as a cut can leave it.
        path = self.write("1,2,ab\n3,4,")
        self.assertEqual(len(list(read_rows(path, ",", 3, Repairs(path)))), 1)

    def test_complete_last_row_without_newline_is_kept(self):
        path = self.write("1::2\n3::4")
        self.assertEqual(len(list(read_rows(path, "::", 2, Repairs(path)))), 2)
        # As long as the shortest complete final field: a cut cannot be told, so the row is kept.
        path = self.write("1,22\n2,333\n3,22")
        self.assertEqual(len(list(read_rows(path, ",", 2, Repairs(path)))), 3)
        path = self.write("1,2,3")  # nothing to compare with
        self.assertEqual(len(list(read_rows(path, ",", 3, Repairs(path)))), 1)

    def test_wrong_field_count_names_file_and_line(self):
        path = self.write("1,2\n3,4,5\n6,7\n")
        with self.assertRaisesRegex(ZooError, r"rows.csv, line 2: expected 2 fields, found 3"):
            list(read_rows(path, ",", 2, Repairs(path)))

    def test_short_row_in_the_middle_is_an_error(self):
        path = self.write("1,2\n3\n6,7\n")
        with self.assertRaisesRegex(ZooError, "line 2"):
            list(read_rows(path, ",", 2, Repairs(path)))

    def test_blank_lines_are_counted_and_are_not_rows(self):
        path = self.write("1,2\n\n  \r\n3,4\n")
        repairs = Repairs(path)
        self.assertEqual([line for line, _ in read_rows(path, ",", 2, repairs)], [1, 4])
        self.assertEqual((repairs.read, repairs.blank_lines), (2, 2))
        self.assertIn("skipped 2 blank line(s)", repairs.summary())
        self.assertEqual(count_rows(path, ",", 2), 2)

    def test_byte_order_mark_is_removed(self):
        path = self.write(b"\xef\xbb\xbfuser,item\n196,242\n")
        repairs = Repairs(path)
        self.assertEqual(list(read_rows(path, ",", 2, repairs, header=("user", "item"))), [(2, ["196", "242"])])
        self.assertEqual(first_line(path), "user,item")
        path = self.write(b"\xef\xbb\xbf196\t242\n186\t302\n")
        repairs = Repairs(path)
        self.assertEqual(next(read_rows(path, "\t", 2, repairs)), (1, ["196", "242"]))
        self.assertIn("removed the UTF-8 byte-order mark", repairs.summary())
        path = self.write("a,b\n".encode("utf-16"))
        with self.assertRaisesRegex(ZooError, "rows.csv: the file is UTF-16 encoded"):
            list(read_rows(path, ",", 2, Repairs(path)))

    def test_files_without_data_rows_are_refused(self):
        for text, message in (
            ("", "the file is empty"),
            ("a,b\n", "the file holds only its header line, no data rows"),
            (b"\xef\xbb\xbfa,b", "the file holds only its header line, no data rows"),
            ("\n \n", "the file holds only blank lines"),
            ("1,", "the file holds no complete data row"),
        ):
            path = self.write(text)
            with self.assertRaisesRegex(ZooError, f"^{path}: {message}"):
                list(read_rows(path, ",", 3 if text == "1," else 2, Repairs(path), header=("a", "b")))

    def test_count_rows_is_the_rows_read_rows_yields(self):
        path = self.write("a,b\n1,2\n\n3,4\n5,6\n7")
        self.assertEqual(count_rows(path, ",", 2, header=("a", "b")), 3)

    def test_number_errors_name_line_and_column(self):
        repairs = Repairs("f.csv")
        self.assertEqual(repairs.number("3.0", 1, "x", int), 3)
        self.assertEqual(repairs.number("2.5", 1, "x"), 2.5)
        for bad, kind in (("abc", float), ("2.5", int), ("nan", float), ("inf", float), ("", int)):
            with self.assertRaisesRegex(ZooError, r"f.csv, line 7: column 'x' should be a number"):
                repairs.number(bad, 7, "x", kind)

    def test_progress_bar_when_asked(self):
        path = self.write("1,2\n3,4\n")
        with mock.patch("sys.stdout", new_callable=io.StringIO) as out:
            self.assertEqual(len(list(read_rows(path, ",", 2, Repairs(path), verbose=True))), 2)
        self.assertIn(f"reading {path}", out.getvalue())
        with mock.patch("sys.stdout", new_callable=io.StringIO) as out:
            list(read_rows(path, ",", 2, Repairs(path)))  # "auto": small files read silently
        self.assertEqual(out.getvalue(), "")

    def test_find_file(self):
        path = self.write("a\nb\nc")
        folder = os.path.dirname(path)
        self.assertEqual(find_file(folder, ("missing.csv", "rows.csv"), "x"), path)
        with self.assertRaisesRegex(ZooError, "found none of missing.csv"):
            find_file(folder, ("missing.csv",), "x")
        with self.assertRaisesRegex(ZooError, "does not exist"):
            find_file(os.path.join(folder, "nope"), ("a",), "x")


class RepairsTest(TestCase):
    def account(self):
        repairs = Repairs("dir/f.csv")
        repairs.read = 6
        repairs.drop("dropped {n} row(s) with an empty label", 2)
        repairs.drop("dropped {n} row(s) with an empty label")
        repairs.drop("nothing {n}", 0)
        repairs.repair("filled {n} missing value(s)", line=4, count=2)  # one row, two values
        repairs.repair("removed {n} late behaviour(s)", line=4)
        repairs.note("mapped {n} unknown id(s) to OOV", 5)  # changes no row
        return repairs

    def test_rows_read_are_kept_repaired_or_dropped(self):
        repairs = self.account().finish(3)
        self.assertEqual(
            repairs.accounting(),
            {
                "read": 6, "kept": 2, "repaired": 1, "dropped": 3, "blank_lines": 0,
                "kinds": {"dropped {n} row(s) with an empty label": 3, "filled {n} missing value(s)": 2,
                          "removed {n} late behaviour(s)": 1, "mapped {n} unknown id(s) to OOV": 5},
            },
        )
        self.assertEqual(
            repairs.summary(),
            "f.csv: read 6 row(s) = 2 kept + 1 repaired + 3 dropped; dropped 3 row(s) with an empty label; "
            "filled 2 missing value(s); removed 1 late behaviour(s); mapped 5 unknown id(s) to OOV",
        )
        with mock.patch("sys.stdout", new_callable=io.StringIO) as out:
            repairs.report()
        self.assertEqual(out.getvalue(), f"zoo.datasets: {repairs.summary()}\n")

    def test_the_identity_is_checked(self):
        with self.assertRaisesRegex(RuntimeError, r"read 6 != 3 kept \+ 1 repaired \+ 3 dropped"):
            self.account().finish(4)  # one row more than read - dropped: a reader's bug
        with self.assertRaisesRegex(ZooError, r"f.csv: no row is left \(f.csv: read 3 row"):
            repairs = Repairs("dir/f.csv")
            repairs.read = 3
            repairs.drop("removed {n} rating(s) (5-core)", 3)
            repairs.finish(0)
