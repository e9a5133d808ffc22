import os
from unittest import mock

import numpy as np

from tests.testing import TestCase
from zoo.datasets import events, spec_reading
from zoo.datasets.reading import TRUNCATED, Repairs
from zoo.errors import ZooError

RATINGS = {"user": "id", "item": "id", "rating": float, "timestamp": "time"}


def reference(lines, delimiter):
    """The line-by-line readers the event readers replaced, written out: stripped fields, rows with an
    empty field dropped, tokens numbered in the order the kept rows first show them."""
    index, rows = {"user": {}, "item": {}}, []
    for text in lines:
        text = text.encode().decode("latin-1")
        fields = [f.strip() for f in text.split(delimiter)]
        if not text.strip() or not all(fields):
            continue
        user, item = (index[k].setdefault(v, len(index[k])) for k, v in zip(("user", "item"), fields))
        rows.append((user, item, float(fields[2]), int(float(fields[3]))))
    return index, rows


def write_file(directory, data, name):
    """`data` (text or bytes) written as `directory/name`; returns the path."""
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


class ReadLogTest(TestCase):
    def write(self, data, name="log.txt"):
        return write_file(self.get_temp_dir(), data, name)

    def read(self, path, delimiter="\t", columns=RATINGS, **kwargs):
        repairs = Repairs(path)
        data, interners = events.read_log(path, delimiter, columns, repairs, **kwargs)
        return data, interners, repairs

    def test_tokens_are_numbered_in_first_seen_order_across_chunks(self):
        rng = np.random.default_rng(0)
        tokens = ["1", "2", " 2", "10", "é", "x y", "007"]
        lines = ["\t".join([rng.choice(tokens), rng.choice(tokens), str(rng.integers(1, 6)), str(1000 + i)])
                 for i in range(300)]
        lines[3] = "é9\t\t3\t5"  # dropped before its user is seen
        path = self.write("\n".join(lines) + "\n")
        index, rows = reference(lines, "\t")
        with mock.patch.object(spec_reading, "BLOCK_BYTES", 64):  # many chunks
            data, interners, repairs = self.read(path)
        self.assertEqual(list(interners["user"].index.items()), list(index["user"].items()))
        self.assertEqual(list(interners["item"].index.items()), list(index["item"].items()))
        self.assertEqual(list(zip(data["user"].tolist(), data["item"].tolist(), data["rating"].tolist(),
                                  data["timestamp"].tolist())), rows)
        self.assertEqual(repairs.counts[events.EMPTY_FIELD], 1)
        self.assertIn("Ã©", interners["user"].index)  # the bytes as latin-1 text, as a line-by-line read gives them

    def test_lines_are_the_files_lines(self):
        text = "userId,movieId,rating,timestamp\n1,2,3,100\n\n  \n1,3,4,101\r\r\n2,2,5,102\n\n2,3,1,103\n"
        path = self.write(text)
        header = ("userId", "movieId", "rating", "timestamp")
        data, _, repairs = self.read(path, ",", header=header, lines=True)
        self.assertEqual(data["line"].tolist(), [2, 5, 6, 8])
        self.assertEqual((repairs.read, repairs.blank_lines), (4, 3))
        with self.assertRaisesRegex(ZooError, r"log.txt, line 8: column 'timestamp' should be a number, found 'soon'$"):
            self.read(self.write(text.replace("103", "soon")), ",", header=header)

    def test_values_are_read_as_python_reads_them(self):
        path = self.write("1,2, 4 ,1e3\n1,3,4.,3.0\n1,4,+3,0007\n")
        data, _, _ = self.read(path, ",")
        self.assertEqual(data["rating"].tolist(), [4.0, 4.0, 3.0])
        self.assertEqual(data["timestamp"].tolist(), [1000, 3, 7])
        for value, message in (("nan", "should be a number, found 'nan'"),
                               ("3.5", "should be a number, found '3.5'"),
                               (str(2**40), f"should be unix seconds, found {2**40}")):
            with self.assertRaisesRegex(ZooError, rf"log.txt, line 2: column 'timestamp' {message}$"):
                self.read(self.write(f"1,2,4,5\n1,2,4,{value}\n"), ",")

    def test_a_closed_set_of_values(self):
        columns = {"user": "id", "kind": {"pv": 1, "buy": 4}, "timestamp": "time"}
        data, _, _ = self.read(self.write("1, buy ,5\n2,pv,6\n"), ",", columns)
        self.assertEqual((data["kind"].dtype, data["kind"].tolist()), (np.int32, [4, 1]))
        with self.assertRaisesRegex(ZooError, r"line 2: column 'kind' should be one of pv, buy, found 'click'$"):
            self.read(self.write("1,pv,5\n2,click,x\n"), ",", columns)  # the first failing column is named

    def test_the_earliest_fault_of_a_block_is_named(self):
        # pyarrow refuses the block for its extra field (line 3); line 2 comes first, as line by line.
        with self.assertRaisesRegex(ZooError, r"line 2: column 'rating' should be a number, found 'abc'$"):
            self.read(self.write("1\t2\t3\t4\n1\t2\tabc\t4\n1\t2\t3\t4\t5\n"))
        with self.assertRaisesRegex(ZooError, r"log.txt, line 4: expected 4 fields, found 5$"):
            self.read(self.write("1\t2\t3\t4\n\n1\t2\t3\t4\n1\t2\t3\t4\t5\n"))

    def test_a_repeated_character_delimiter(self):
        data, _, _ = self.read(self.write("1::2::3::4\n5::6::4.5::7\n"), "::")
        self.assertEqual(data["rating"].tolist(), [3.0, 4.5])
        with self.assertRaisesRegex(ZooError, r"line 2: expected 4 fields, found 3$"):
            self.read(self.write("1::2::3::4\n1::2:x:3::4\n"), "::")
        with self.assertRaisesRegex(ZooError, r"line 1: a field holds ':', which separates the fields here$"):
            self.read(self.write("1:0::2::3::4\n"), "::")
        _, _, repairs = self.read(self.write("1::2::3::4\n5::6::4.5::"), "::")  # cut after a separator
        self.assertEqual((repairs.read, repairs.counts[TRUNCATED]), (2, 1))

    def test_lines_of_blanks_between_tabs_are_blank_lines(self):
        data, _, repairs = self.read(self.write("1\t2\t3\t4\n \t\t\t\n5\t6\t3\t7"), lines=True)
        self.assertEqual(data["line"].tolist(), [1, 3])
        self.assertEqual((repairs.read, repairs.blank_lines), (2, 1))

    def test_files_without_rows(self):
        for data, message in ((b"", "the file is empty"), (b"\xef\xbb\xbf", "the file holds only blank lines"),
                              (b"\n \n", "the file holds only blank lines"),
                              (b"1\t2", "the file holds no complete data row")):
            with self.assertRaisesRegex(ZooError, f"log.txt: {message}"):
                self.read(self.write(data))


class ReadLogKindsTest(TestCase):
    """The kinds the row-per-sample readers read (Avazu, Taobao ads, Eleme)."""

    def write(self, data, name="rows.csv"):
        return write_file(self.get_temp_dir(), data, name)

    def test_text_lists_and_unread_columns(self):
        rng = np.random.default_rng(1)
        words = ["1", "22", " 3", "é", "", "4 ", "x y", "\xa0"]
        lines = []
        for i in range(200):
            items = "^".join(rng.choice(words, size=int(rng.integers(0, 4))))
            lines.append(",".join([str(i), rng.choice(words), f" {items} " if i % 7 == 0 else items]))
        path = self.write("\n".join(lines) + "\n")
        columns = {"id": None, "kind": "text", "items": events.TokenList("^")}
        with mock.patch.object(spec_reading, "BLOCK_BYTES", 128):  # many chunks
            data, interners = events.read_log(path, ",", columns, Repairs(path))
        self.assertNotIn("id", data)
        kinds = list(interners["kind"].index)
        items = list(interners["items"].index)
        codes, lengths = data["items"]
        rows = np.split(codes, np.cumsum(lengths)[:-1])
        for line, kind, row in zip(lines, data["kind"], rows):  # the line-by-line reader's values, as latin-1 text
            fields = line.encode().decode("latin-1").split(",")
            self.assertEqual(kinds[kind], fields[1].strip())  # an empty value is a value
            self.assertEqual([items[c] for c in row], fields[2].strip().split("^") if fields[2].strip() else [])

    def test_files_read_as_one_log_share_their_numbers(self):
        first, second = self.write("a,x\nb,y\n", "1.csv"), self.write("c,y\na,z\n", "2.csv")
        columns = {"user": "text", "item": "text"}
        _, interners = events.read_log(first, ",", columns, Repairs(first))
        data, interners = events.read_log(second, ",", columns, Repairs(second), interners=interners)
        self.assertEqual((data["user"].tolist(), data["item"].tolist()), ([2, 0], [1, 2]))
        self.assertEqual(list(interners["user"].index), ["a", "b", "c"])

    def test_the_last_line_cut_short(self):
        for text, width, rows in (("1,2,ab\n3,4,", 3, 1),  # an empty final field is as short as a cut leaves it
                                  ("1,22\n2,333\n3,22", 2, 3),  # as long as the shortest complete one: kept
                                  ("1,2,3", 3, 1),  # nothing to compare with: kept
                                  ("1,2,3\n4,5", 3, 1)):  # too few fields
            path = self.write(text)
            repairs = Repairs(path)
            data, _ = events.read_log(path, ",", {f"c{i}": "text" for i in range(width)}, repairs)
            self.assertEqual(data["c0"].size, rows, text)
            self.assertEqual(repairs.read - repairs.counts.get(TRUNCATED, 0), rows)
