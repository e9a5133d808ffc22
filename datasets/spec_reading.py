"""The data-spec engine's reading side: a spec's files as columnar chunks (pyarrow), and each value kind
(labels, times, numbers, lists) parsed vectorised, with one-line errors naming the file, line and column.

pyarrow's streaming CSV reader (`pyarrow.csv.open_csv`) handles any one-character delimiter, quoting
(a quoted field may hold the delimiter or a newline), a UTF-8 byte-order mark and blank lines (skipped);
Parquet is read by row groups and JSON lines by blocks. Every column is read as text (CSV) or in its own
type (Parquet, JSON) and converted here, so a CSV and a Parquet copy of one log give the same values.

Line numbers: a CSV row's line is its data-row index + 1 (+ 1 for the header line); a field holding a
quoted newline shifts the lines after it (the row index is still exact). Parquet and JSON rows are
numbered from 1.
"""

import bz2
import csv
import glob
import gzip
import io
import os

import numpy as np

from zoo.datasets.reading import TRUNCATED
from zoo.errors import ZooError

BLOCK_BYTES = 16 * 2**20
SUFFIXES = {"csv": (".csv", ".tsv", ".txt", ".gz", ".bz2"), "parquet": (".parquet", ".pq"),
            "jsonl": (".jsonl", ".json", ".ndjson")}


def source_files(path, fmt):
    """The files of a data path: one file, a glob, or a folder's files of the source format (name order); a
    path that exists but is neither a file nor a folder (a FIFO, /dev/zero) is refused in one line."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return [path]
    if os.path.isdir(path):
        files = sorted(os.path.join(path, name) for name in os.listdir(path)
                       if name.lower().endswith(SUFFIXES[fmt]) and not name.startswith("."))
        if not files:
            raise ZooError(f"{path}: the folder holds no {fmt} file ({', '.join(SUFFIXES[fmt])})")
        return files
    if os.path.exists(path):  # a FIFO, a device, a socket: no end or no size to read a log by
        raise ZooError(f"{path}: not a regular file or a folder (a pipe or a device): write the log to a file first")
    files = sorted(f for f in glob.glob(path) if os.path.isfile(f))
    if not files:
        raise ZooError(f"{path}: no such file, folder or matching files")
    return files


class Chunk:
    """Rows of one file: `columns` {name: pyarrow array}, `first_line` of its first row, `file`."""

    def __init__(self, file, columns, first_line, rows):
        self.file, self.columns, self.first_line, self.rows = file, columns, first_line, rows

    def line(self, index):
        return self.first_line + int(index)

    def lines(self):
        return self.first_line + np.arange(self.rows, dtype=np.int64)

    def error(self, index, column, message):
        raise ZooError(f"{self.file}, line {self.line(index)}: column '{column}' {message}")


def open_bytes(path):
    """A binary stream of a text file's bytes as pyarrow's reader sees them (a .gz or .bz2 file's decompressed)."""
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(os.path.splitext(str(path))[1].lower(), open)
    return opener(path, "rb")


def first_line(path):
    """The first line of a text file as text (a .gz or .bz2 file's decompressed, as pyarrow's reader sees
    it); a file that cannot be read is one ZooError line."""
    try:
        with open_bytes(path) as stream:
            return stream.readline().decode("utf-8-sig", "replace")
    except (OSError, EOFError) as error:
        raise ZooError(f"{path}: cannot read its first line ({error})") from None


def _csv_header(path, source):
    """The column names of a CSV file (its header line, or the spec's column_names)."""
    if not source["header"]:
        return list(source["column_names"])
    first = first_line(path)
    if not first.strip():
        raise ZooError(f"{path}: the file is empty (a header line was expected)")
    reader = csv.reader(io.StringIO(first), delimiter=source["delimiter"], quotechar=source["quote"] or '"',
                        quoting=csv.QUOTE_MINIMAL if source["quote"] else csv.QUOTE_NONE)
    try:
        return [name.strip() for name in next(reader)]
    except csv.Error as error:
        raise ZooError(f"{path}: its header line is not CSV ({error})") from None


def unique_names(names):
    """The names with each repeat of a name numbered as pandas numbers it: a, a.1, a.2 (per-position columns
    written under one name, as Alimama's 50 'his_cate' columns); a clash with a real column is refused."""
    seen, out = {}, []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if not count else f"{name}.{count}")
    if len(set(out)) < len(out):
        clash = next(n for n in out if out.count(n) > 1)
        raise ZooError(f"the header's repeated names, numbered, clash with its column '{clash}'")
    return out


def positions(path, have, name, count):
    """The `count` columns of the per-position list `name`: a header name repeated `count` times (name,
    name.1, ...), or name_1 .. name_N, or name1 .. nameN; a one-line error when the file has no such run."""
    for candidates in ([name] + [f"{name}.{k}" for k in range(1, count)], [f"{name}_{k}" for k in range(1, count + 1)],
                       [f"{name}{k}" for k in range(1, count + 1)]):
        if all(c in have for c in candidates):
            return candidates
    return_hint = sum(1 for c in have if c == name or c.startswith(name + "."))
    raise ZooError(f"{path}: the list '{name}' has {count} positions, but the header holds "
                   + (f"'{name}' {return_hint} time(s)" if return_hint else f"no {name}_1 .. {name}_{count}"))


def position_lists(chunk, columns, padding):
    """(flat tokens [T] object, lengths [n]) of a per-position list: the row's values in column order, empty
    values and the `padding` value skipped."""
    values = np.stack([np.asarray(as_text(chunk.columns[c]).to_numpy(zero_copy_only=False), dtype=object)
                       for c in columns], axis=1) if columns else np.zeros((chunk.rows, 0), object)
    values = np.char.strip(values.astype(str)) if values.size else values.astype(str)
    keep = (values != "") & (values != padding)
    return values[keep].astype(object), keep.sum(axis=1).astype(np.int64)


def file_columns(path, source):
    """The column names a file holds (a CSV's repeated header names numbered: `unique_names`)."""
    if source["format"] == "csv":
        return unique_names(_csv_header(path, source))
    if source["format"] == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.ParquetFile(path).schema_arrow.names)
        except Exception as error:  # noqa: BLE001  pyarrow raises several kinds for a bad file
            raise ZooError(f"{path}: not a Parquet file ({str(error).splitlines()[0]})") from None
    with open(path, "rb") as stream:
        first = stream.readline()
    import json

    try:
        row = json.loads(first)
    except ValueError:
        raise ZooError(f"{path}, line 1: not a JSON object per line") from None
    if not isinstance(row, dict):
        raise ZooError(f"{path}, line 1: not a JSON object per line")
    return list(row)


def check_columns(path, source, wanted, optional=(), positional=None, label=None):
    """The columns of `wanted` the file holds, and {list: its position columns} of `positional` ({name:
    count}); refuses, in one line, a file that lacks a column the spec names, and a repeated header name the
    spec names as one column (a per-position list wants "positions"), but for the `label`'s: its first
    column is the label, the repeats copies of it (`spec draft` leaves them out)."""
    have = file_columns(path, source)
    positional = positional or {}
    expanded = {name: positions(path, have, name, count) for name, count in positional.items()}
    for name in wanted:
        if name in positional:
            continue
        if name not in have and name not in optional:
            shown = ", ".join(have[:40]) + (" ..." if len(have) > 40 else "")
            raise ZooError(f"{path}: column '{name}' named in the spec is absent (columns: {shown})")
        if f"{name}.1" in have and name != label:
            count = sum(1 for c in have if c == name or c.startswith(name + ".") and c[len(name) + 1:].isdigit())
            raise ZooError(f"{path}: column '{name}' appears {count} times in the header: a per-position list? give it "
                           f"\"type\": \"list\", \"positions\": {count}")
    return [name for name in wanted if name in have and name not in positional], expanded


def first_row_line(source):
    """The line number a file of `source` gives its first row (a CSV's header is line 1)."""
    return 2 if source["format"] == "csv" and source["header"] else 1


def read_chunks(path, source, columns, repairs, block_bytes=None, blank_lines=True):
    """Yields the `Chunk`s of one file holding `columns`; counts its rows in `repairs.read`. `block_bytes`
    (default BLOCK_BYTES): CSV and JSON blocks (pyarrow parses some 30 blocks ahead of the caller);
    `blank_lines`: count the whole file's empty lines into `repairs` (a read of its first rows does not)."""
    block_bytes = block_bytes or BLOCK_BYTES
    import pyarrow as pa

    fmt = source["format"]
    line = first_row_line(source)
    if fmt == "csv":
        import pyarrow.csv as pcsv

        last = _unterminated_last_line(path)
        refused = []

        def invalid(row):
            if not row.text.strip():  # a line of spaces is blank, not a row
                repairs.blank_lines += 1
                return "skip"
            if last is not None and row.actual_columns < row.expected_columns and row.text == last:
                repairs.read += 1
                repairs.drop(TRUNCATED)  # a file cut off mid-row ends without a newline
                return "skip"
            refused.append(f"{path}: a row has {row.actual_columns} fields where the file has "
                           f"{row.expected_columns}: {row.text[:80]!r}")
            return "error"  # pyarrow stops with ArrowInvalid; the message above is raised instead

        if blank_lines:
            repairs.blank_lines += _empty_lines(path)
        names = unique_names(_csv_header(path, source))
        try:
            reader = pcsv.open_csv(
                path,
                read_options=pcsv.ReadOptions(column_names=names, skip_rows=1 if source["header"] else 0,
                                              block_size=block_bytes),
                parse_options=pcsv.ParseOptions(delimiter=source["delimiter"], quote_char=source["quote"] or False,
                                                newlines_in_values=bool(source["quote"]), invalid_row_handler=invalid),
                convert_options=pcsv.ConvertOptions(column_types={name: pa.string() for name in columns},
                                                    include_columns=columns, strings_can_be_null=False,
                                                    quoted_strings_can_be_null=False),
            )
            batches = iter(reader)
        except pa.ArrowInvalid as error:
            if refused:
                raise ZooError(refused[0]) from None
            raise ZooError(f"{path}: not a readable CSV ({str(error).splitlines()[0]})") from None
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        refused = []
        batches = pq.ParquetFile(path).iter_batches(columns=columns, batch_size=65536)
    else:
        import pyarrow.json as pj

        refused = []
        try:
            batches = iter(pj.open_json(path, read_options=pj.ReadOptions(block_size=block_bytes)))
        except pa.ArrowInvalid as error:
            raise ZooError(f"{path}: not JSON lines ({str(error).splitlines()[0]})") from None
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except pa.ArrowInvalid as error:
            if refused:
                raise ZooError(refused[0]) from None
            raise ZooError(f"{path}: unreadable after line {line - 1} ({str(error).splitlines()[0]})") from None
        if not batch.num_rows:
            continue
        have = set(batch.schema.names)
        chunk_columns = {name: batch.column(name) for name in columns if name in have}
        for name in columns:  # a JSON block may lack a key no row of it has
            if name not in have:
                chunk_columns[name] = pa.nulls(batch.num_rows, pa.string())
        repairs.read += batch.num_rows
        yield Chunk(path, chunk_columns, line, batch.num_rows)
        line += batch.num_rows


SAMPLE_BLOCK_BYTES = 2**20  # the blocks a read of a file's first rows parses (pyarrow reads ~30 ahead)


def first_rows(path, source, columns, rows, repairs):
    """The first `rows` rows of one file holding `columns`, as one `Chunk` (None: the file holds no data
    row), read in SAMPLE_BLOCK_BYTES blocks: what `spec draft` and a fit's leak check judge a file by."""
    import pyarrow as pa

    chunks, held = [], 0
    for chunk in read_chunks(path, source, columns, repairs, SAMPLE_BLOCK_BYTES, blank_lines=False):
        chunks.append(chunk)
        held += chunk.rows
        if held >= rows:
            break
    if not chunks:
        return None

    def joined(name):
        arrays = [chunk.columns[name] for chunk in chunks]
        if len({array.type for array in arrays}) > 1:  # JSON blocks typed apart (a number, then nulls)
            arrays = [as_text(array) for array in arrays]
        return pa.concat_arrays(arrays).slice(0, rows)

    return Chunk(path, {name: joined(name) for name in columns}, chunks[0].first_line, min(held, rows))


def _unterminated_last_line(path):
    """The file's last line when the file does not end with a newline (else None)."""
    with open(path, "rb") as stream:
        stream.seek(0, os.SEEK_END)
        size = stream.tell()
        stream.seek(max(size - 65536, 0))
        tail = stream.read()
    if not tail or tail.endswith(b"\n"):
        return None
    return tail.rsplit(b"\n", 1)[-1].decode("utf-8", "replace").rstrip("\r")


def _empty_lines(path):
    """Empty lines of a text file (pyarrow skips them without a word; they are counted, not rows)."""

    def pairs(data):  # "\n\n" and "\n\r\n", overlapping
        data = np.frombuffer(data, np.uint8)
        newline = data == 10
        return int((newline[:-1] & newline[1:]).sum() + (newline[:-2] & (data[1:-1] == 13) & newline[2:]).sum())

    count, previous = 0, b"\n"  # a first line that is empty counts too
    with open(path, "rb") as stream:
        while True:
            block = stream.read(BLOCK_BYTES)
            if not block:
                return count
            count += pairs(previous + block) - pairs(previous)
            previous = block[-2:]


# ---------------------------------------------------------------------------------------- values
def as_text(array):
    """Strings (numbers as their text, null as ''): categorical values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_floating(array.type):  # 3.0 -> "3": an id written as a float in Parquet/JSON
        whole = pc.equal(array, pc.floor(array))
        array = pc.if_else(whole, pc.cast(pc.cast(array, pa.int64(), safe=False), pa.string()),
                           pc.cast(array, pa.string()))
    elif not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            array = pc.cast(array, pa.string())
    return pc.fill_null(array, "").cast(pa.string())


def _first_bad(chunk, column, values, convert, what):
    for index, value in enumerate(values.to_pylist()):
        if value in (None, ""):
            continue
        try:
            convert(value)
        except (ValueError, TypeError, OverflowError):
            chunk.error(index, column, f"should be {what}, found {str(value)[:40]!r}")
    raise ZooError(f"{chunk.file}: column '{column}' holds a value that is not {what}")


def as_numbers(chunk, column, what="a number"):
    """float64 [n]: NaN where the value is empty or null; a value that is not a finite number is refused
    (one line: 'column ... should be <what>')."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = chunk.columns[column]
    if pa.types.is_boolean(array.type) or pa.types.is_integer(array.type) or pa.types.is_floating(array.type):
        values = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)
    else:
        text = pc.utf8_trim_whitespace(as_text(array))
        try:
            values = pc.cast(pc.if_else(pc.equal(text, ""), None, text), pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            _first_bad(chunk, column, text, float, what)
    values = np.asarray(values, dtype=np.float64)
    bad = np.isinf(values)
    if bad.any():
        chunk.error(int(np.flatnonzero(bad)[0]), column, "should be a finite number, found an infinity")
    return values


def token_lists(chunk, column, separator):
    """(flat tokens [T] object, lengths [n]): a list per row, oldest first; empty tokens are skipped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = chunk.columns[column]
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        lists = pc.fill_null(array, pa.scalar([], array.type))
        flat = as_text(pc.list_flatten(lists))
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    else:
        if separator is None:
            raise ZooError(f"{chunk.file}: column '{column}' holds text, not lists: give it a 'separator'")
        lists = pc.split_pattern(as_text(array), separator)
        flat = pc.list_flatten(lists)
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    tokens = np.asarray(pc.utf8_trim_whitespace(flat).to_numpy(zero_copy_only=False), dtype=object)
    keep = tokens != ""
    row_of = np.repeat(np.arange(chunk.rows), np.asarray(lengths, dtype=np.int64))
    lengths = np.bincount(row_of[keep], minlength=chunk.rows).astype(np.int64)
    return tokens[keep], lengths

