"""Bad input for every reader (hypothesis): each corruption gives a ZooError naming the file (and the
line, for row-level faults) or a result that is still in the contract with no label's future in its
features. Synthetic rows only (the shared samples are never copied)."""

import os
import tempfile

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.testing import TestCase, small_simulator
from zoo.datasets import avazu, criteo, eleme, prepare, taobao
from zoo.errors import ZooError

DAY = 1511539200 + 3600  # inside Taobao's date range


def _criteo(rng):
    rows = [
        ",".join(
            [str(i % 2)] + [str(int(v)) for v in rng.integers(0, 50, 13)] + [f"{v:08x}" for v in rng.integers(0, 9, 26)]
        )
        for i in range(30)
    ]
    return ["label," + ",".join(criteo.NUMERIC + criteo.CATEGORICAL)] + rows


def _avazu(rng):
    rows = [
        ",".join([str(i), str(i % 2), str(14102100 + i // 10)] + [f"v{v}" for v in rng.integers(0, 5, 21)])
        for i in range(30)
    ]
    return [",".join(avazu.HEADER)] + rows


def _ratings(rng, delimiter):
    return [
        delimiter.join([f"u{u}", f"i{(u + k) % 7}", str(int(rng.integers(1, 6))), str(1_000_000 + 60 * k)])
        for u in range(6) for k in range(8)
    ]


def _behaviors(rng):
    kinds = ["pv", "fav", "cart", "buy"]
    return [f"{u},{(u + k) % 9},{(u + k) % 3},{kinds[k % 4]},{DAY + 9000 * k}" for u in range(6) for k in range(8)]


def _ads(rng):
    rows = [
        f"{i % 2},2017-05-06 00:00:0{i % 3},{i % 4},{i % 5},430548_1007,{i % 3},{i},{i},{i % 2},{1.5 * i},"
        f"0,3,2,3,,3,0,,{i % 5}^{(i + 1) % 5}"
        for i in range(10)
    ]
    return [",".join(taobao.ADS_HEADER)] + rows


FORMATS = {
    # name: (protocol, file name, writer, delimiter, has header, numeric columns, id columns, time column)
    "criteo": ("deres", "train.csv", _criteo, ",", True, list(range(1, 14)), [14, 20], None),
    "avazu": ("bars", "train.csv", _avazu, ",", True, [], [5, 11], None),
    "movielens": ("rest", "u.data", lambda rng: _ratings(rng, "\t"), "\t", False, [2, 3], [0, 1], 3),
    "amazon_books": ("rest", "ratings_Books.csv", lambda rng: _ratings(rng, ","), ",", False, [2, 3], [0, 1], 3),
    "taobao": ("suan", "UserBehavior.csv", _behaviors, ",", False, [4], [0, 1], 4),
    "taobao_ads": ("ads", "train.csv", _ads, ",", True, [9], [2, 3], None),
    "eleme": ("suan", "eleme.csv", None, ",", True, None, None, None),
}
CORRUPTIONS = ("none", "truncate", "extra_field", "missing_field", "non_numeric", "empty", "negative_id", "huge_id",
               "shuffle", "duplicate_time", "few_interactions")
SIMULATOR = small_simulator()


def _eleme(rng, folder):
    path = os.path.join(folder, "eleme.csv")
    eleme.write_simulated(path, SIMULATOR, 30, seed=int(rng.integers(0, 1000)))
    with open(path) as f:
        return f.read().splitlines()


def corrupt(lines, fmt, kind, data):
    """Applies `kind`; returns (lines, ends with newline, the file line number a ZooError must name or None)."""
    protocol, _, _, delimiter, header, numeric, ids, time = fmt
    first = 1 if header else 0
    j = data.draw(st.integers(first, len(lines) - 2), label="row")  # never the last row
    fields = lines[j].split(delimiter)
    if kind == "truncate":
        cut = data.draw(st.integers(0, max(len(lines[-1]) - 1, 0)), label="cut")
        return lines[:-1] + [lines[-1][:cut]], False, None
    if kind == "extra_field":
        lines[j] += delimiter + "x"
        return lines, True, j + 1
    if kind == "missing_field":
        lines[j] = delimiter.join(fields[:-1])
        return lines, True, j + 1
    if kind == "non_numeric" and numeric:
        fields[data.draw(st.sampled_from(numeric), label="column")] = "abc"
        lines[j] = delimiter.join(fields)
        return lines, True, j + 1
    if kind == "empty":
        fields[data.draw(st.integers(0, len(fields) - 1), label="column")] = ""
        lines[j] = delimiter.join(fields)
        return lines, True, j + 1  # if it errs, it names the line
    if kind in ("negative_id", "huge_id") and ids:
        fields[data.draw(st.sampled_from(ids), label="column")] = "-5" if kind == "negative_id" else "9" * 30
        lines[j] = delimiter.join(fields)
        return lines, True, j + 1
    if kind == "shuffle":
        body = lines[first:]
        order = data.draw(st.permutations(range(len(body))), label="order")
        return lines[:first] + [body[i] for i in order], True, None
    if kind == "duplicate_time" and time is not None:
        fields[time] = lines[j - 1 if j > first else j + 1].split(delimiter)[time]
        lines[j] = delimiter.join(fields)
        return lines, True, None
    if kind == "few_interactions" and time is not None:
        extra = lines[-1].split(delimiter)
        extra[0] = "lonely"
        return lines + [delimiter.join(extra)], True, None
    return lines, True, None


class ReaderFuzzTest(TestCase):
    def check(self, name, folder, path, protocol, line, must_fail):
        reader = "taobao" if name == "taobao_ads" else name
        try:
            cache = os.path.join(folder, "cache")
            processed = prepare(reader, folder, protocol=protocol, cache_dir=cache, verbose=False)
            self.assertFalse(must_fail, "a malformed row was accepted")
        except ZooError as error:
            message = str(error)
            self.assertIn(os.path.basename(path), message)
            if line is not None and "line" in message:
                self.assertIn(f"line {line}:", message)
            self.assertEqual(len(message.splitlines()), 1)
            return
        for split in ("train", "validation", "test"):
            features, labels = processed.take(split, np.arange(processed.rows[split]))
            processed.schema.validate(features, labels)
            if "hist_time" in features:
                valid = features["hist_item_id"] > 0
                cand = np.broadcast_to(features["cand_time"][:, :1], valid.shape)
                self.assertTrue(np.all(features["hist_time"][valid] < cand[valid]))

    def run_reader(self, name, data):
        fmt = FORMATS[name]
        kind = data.draw(st.sampled_from(CORRUPTIONS), label="corruption")
        rng = np.random.default_rng(data.draw(st.integers(0, 100), label="seed"))
        with tempfile.TemporaryDirectory() as folder:
            if name == "eleme":
                lines = _eleme(rng, folder)
                header = lines[0].split(",")
                fmt = fmt[:5] + ([header.index(c) for c in eleme.NUM] + [header.index("times")],
                                 [header.index("user_id"), header.index("item_id")], header.index("times"))
            else:
                lines = fmt[2](rng)
            lines, newline, line = corrupt(list(lines), fmt, kind, data)
            path = os.path.join(folder, fmt[1])
            with open(path, "w") as f:
                f.write("\n".join(lines) + ("\n" if newline else ""))
            if name == "taobao_ads":
                for other in ("valid.csv", "test.csv"):
                    with open(os.path.join(folder, other), "w") as f:
                        f.write("\n".join(_ads(rng)) + "\n")
            must_fail = kind in ("extra_field", "missing_field") or (kind == "non_numeric" and bool(fmt[5]))
            self.check(name, folder, path, fmt[0], line, must_fail)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_criteo(self, data):
        self.run_reader("criteo", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_avazu(self, data):
        self.run_reader("avazu", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_movielens(self, data):
        self.run_reader("movielens", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_amazon_books(self, data):
        self.run_reader("amazon_books", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_taobao_userbehavior(self, data):
        self.run_reader("taobao", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_taobao_ads(self, data):
        self.run_reader("taobao_ads", data)

    @settings(max_examples=6, deadline=None)
    @given(st.data())
    def test_eleme(self, data):
        self.run_reader("eleme", data)

    def test_expected_outcomes(self):
        """The fuzzed kinds, with the outcome each must have (not just 'error or valid')."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "UserBehavior.csv")
            lines = _behaviors(None)
            with open(path, "w") as f:
                f.write("\n".join(lines + ["77,1,1,pv"]))  # truncated last row
            processed = prepare("taobao", folder, cache_dir=os.path.join(folder, "c1"), verbose=False)
            self.assertIn("dropped 1 truncated last row(s)", processed.info["repairs"])
            lines[5] += ",x"
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            with self.assertRaisesRegex(ZooError, r"UserBehavior.csv, line 6: expected 5 fields, found 6"):
                prepare("taobao", folder, cache_dir=os.path.join(folder, "c2"))
            lines[5] = "1,2,3,pv,soon"
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            with self.assertRaisesRegex(ZooError, r"line 6: column 'timestamp' should be a number, found 'soon'"):
                prepare("taobao", folder, cache_dir=os.path.join(folder, "c3"))
            lines[5] = "1,2,3,pv,"
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            processed = prepare("taobao", folder, cache_dir=os.path.join(folder, "c4"), verbose=False)
            self.assertIn("dropped 1 row(s) with an empty field", processed.info["repairs"])
