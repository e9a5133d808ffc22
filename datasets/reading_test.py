import io
import os
from unittest import mock

import numpy as np

from tests.testing import TestCase
from zoo.datasets.reading import TRUNCATED, Repairs, as_number, find_file, first_line
from zoo.errors import ZooError


class ReadingTest(TestCase):
    def write(self, text, name="rows.csv"):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "wb") as f:
            f.write(text.encode("latin-1") if isinstance(text, str) else text)
        return path

    def test_first_line_without_byte_order_mark(self):
        self.assertEqual(first_line(self.write(b"\xef\xbb\xbfuser,item\r\n196,242\n")), "user,item")
        self.assertEqual(first_line(self.write(b"")), "")
        with self.assertRaisesRegex(ZooError, "rows.csv: the file is UTF-16 encoded"):
            first_line(self.write("a,b\n".encode("utf-16")))

    def test_numbers_as_python_reads_them(self):
        self.assertEqual((as_number("3.0", int), as_number(" 4 ", int), as_number("1e3", int)), (3, 4, 1000))
        self.assertEqual((as_number("2.5"), as_number("-1e-3")), (2.5, -0.001))
        for bad, kind in (("abc", float), ("2.5", int), ("nan", float), ("inf", float), ("inf", int), ("", int)):
            self.assertIsNone(as_number(bad, kind))

    def test_number_errors_name_line_and_column(self):
        repairs = Repairs("f.csv")
        self.assertEqual(repairs.number("3.0", 1, "x", int), 3)
        self.assertEqual(repairs.number("2.5", 1, "x"), 2.5)
        for bad, kind in (("abc", float), ("2.5", int), ("nan", float), ("inf", float), ("", int)):
            with self.assertRaisesRegex(ZooError, r"f.csv, line 7: column 'x' should be a number"):
                repairs.number(bad, 7, "x", kind)

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

    def test_tally_counts_as_a_row_by_row_reader(self):
        repairs = Repairs("dir/f.csv")
        repairs.read = 6
        repairs.note("removed the UTF-8 byte-order mark at the start of the file")
        repairs.drop(TRUNCATED)  # the reading counts the last row first
        filled = np.array([0, 0, 2, 0, 1, 0])  # values filled in rows 3 and 5
        removed = np.array([0, 0, 1, 0, 0, 0])  # row 3 is checked for removals first
        empty = np.array([0, 1, 0, 0, 0, 0], bool)
        repairs.tally([("drop", "dropped {n} row(s) with an empty label", empty), ("repair", "removed {n} x", removed),
                       ("repair", "filled {n} y", filled), ("repair", "never {n}", np.zeros(6, int))])
        self.assertEqual(list(repairs.counts.items()), [
            ("removed the UTF-8 byte-order mark at the start of the file", 1),
            ("dropped {n} row(s) with an empty label", 1),
            ("removed {n} x", 1), ("filled {n} y", 3), (TRUNCATED, 1)])
        self.assertEqual((repairs.dropped, repairs.repaired), (2, 2))  # rows 3 and 5, each once
        self.assertEqual(repairs.finish(4).accounting()["kept"], 2)


class SourceFilesTest(TestCase):
    def test_a_pipe_or_a_device_is_refused_by_what_it_is(self):
        from zoo.datasets import spec_reading

        fifo = os.path.join(self.get_temp_dir(), "log.csv")
        os.mkfifo(fifo)
        for path in (fifo, "/dev/zero"):
            with self.assertRaises(ZooError) as caught:
                spec_reading.source_files(path, "csv")
            self.assertEqual(str(caught.exception), f"{path}: not a regular file or a folder (a pipe or a device): "
                                                    "write the log to a file first")
        with self.assertRaisesRegex(ZooError, "no such file, folder or matching files"):
            spec_reading.source_files(fifo + ".missing", "csv")
