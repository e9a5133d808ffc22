"""Streaming reads of the raw files: rows with their line numbers, progress, and an account of every row.

The Avazu, Taobao ads and Eleme readers go through `read_rows`; the data-spec engine and the Criteo,
MovieLens, Amazon Books and Taobao UserBehavior readers read through pyarrow (zoo/datasets/spec_reading.py,
events.read_log) with the same rules and the same `Repairs` account. The rules every reader keeps:

- a UTF-8 byte-order mark at the start of the file is removed (and noted); a UTF-16 file is refused;
- blank lines are skipped and counted; they are not rows (so they never move a split by row order);
- a last line without a newline is checked strictly, since a file cut off mid-row ends that way: it is
  dropped and counted ("dropped 1 truncated last row(s)") when it has too few fields, or when its final
  field is shorter than the shortest final field of the complete rows before it (a time stamp cut to
  fewer digits, an id cut short). A cut that leaves the final field as long as the shortest complete one
  (possible only where that column has values of different lengths, or empty ones) cannot be told from
  a complete row, and the row is kept; a last line with no complete row to compare with is kept;
- any other row with the wrong number of fields raises a ZooError naming the file and line;
- an empty file, a file that holds only its header, or only blank lines, raises a ZooError;
- a value that must be a number and is not raises a ZooError naming the file, line and column
  (`Repairs.number`).

`Repairs` keeps the account of one file: every data row read is kept, repaired (kept with a counted
change, `Repairs.repair`) or dropped (`Repairs.drop`), by kind; `Repairs.finish` checks that
rows read = rows kept + rows repaired + rows dropped against the rows the reader wrote, and refuses a
file that leaves no row. The account is printed once at the end of preprocessing (`Repairs.report`)
and stored in the processed data set's info (`info["accounting"][file name]`, `Repairs.accounting`).

Nothing reads a whole file into memory: rows are yielded one at a time from a binary stream
(latin-1 decoding, which never fails and keeps every byte of an id).
"""

import collections
import math
import os

from zoo.errors import ZooError

PROGRESS_BYTES = 32 * 2**20  # show a progress bar for files larger than this (verbose="auto")
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
TRUNCATED = "dropped {n} truncated last row(s)"


class Repairs:
    """The account of one raw file: rows read, and what became of them (kept, repaired, dropped), by kind.

    Kinds are format strings with `{n}` ("dropped {n} row(s) with an empty label"), counted in the order
    first seen. `drop` counts rows left out; `repair` counts changes to a row that is kept (a row counts
    once among the repaired rows however many of its values were changed); `note` counts facts about the
    file that change no row (a removed byte-order mark, an id mapped to OOV, a behaviour that makes no
    sample but stays in the histories).
    """

    def __init__(self, path):
        self.path = str(path)
        self.counts = collections.Counter()
        self.read = 0  # data rows read (not the header, not blank lines); set by read_rows
        self.dropped = 0
        self.repaired = 0
        self.blank_lines = 0
        self.kept = None  # set by finish
        self._repaired_line = None

    def drop(self, what, count=1):
        """Counts `count` rows of kind `what` left out of the data set."""
        if count:
            self.counts[what] += count
            self.dropped += count

    def repair(self, what, line, count=1):
        """Counts `count` changes of kind `what` to the row at `line` (kept); the row counts once."""
        if count:
            self.counts[what] += count
            if line != self._repaired_line:
                self._repaired_line = line
                self.repaired += 1

    def note(self, what, count=1):
        """Counts `count` facts of kind `what` that change no row."""
        if count:
            self.counts[what] += count

    def error(self, line, message):
        raise ZooError(f"{self.path}, line {line}: {message}")

    def number(self, text, line, column, kind=float):
        """`text` as a number (int or float); a ZooError naming file, line and column if it is not one."""
        try:
            value = kind(text)
        except ValueError:
            value = None
            if kind is int:  # "3.0" is an integer written as a float
                try:
                    as_float = float(text)
                    value = int(as_float) if as_float.is_integer() else None
                except (ValueError, OverflowError):
                    value = None
        if value is None or (kind is float and not math.isfinite(value)):
            self.error(line, f"column '{column}' should be a number, found {text[:40]!r}")
        return value

    def finish(self, rows):
        """Closes the account with the `rows` data rows the reader keeps (unchanged or repaired).

        Checks rows read = rows kept + rows repaired + rows dropped (a mismatch is a bug in the reader,
        not a fault of the file) and raises a ZooError when no row is left.
        """
        rows = int(rows)
        kept = rows - self.repaired
        if kept < 0 or self.read != kept + self.repaired + self.dropped:
            raise RuntimeError(
                f"{self.path}: the row account does not add up: read {self.read} != {kept} kept + "
                f"{self.repaired} repaired + {self.dropped} dropped (a bug in the reader)"
            )
        if not rows:
            raise ZooError(f"{self.path}: no row is left ({self.summary()})")
        self.kept = kept
        return self

    def accounting(self):
        """The account as plain data: {"read", "kept", "repaired", "dropped", "blank_lines", "kinds"}."""
        return {
            "read": self.read, "kept": self.kept, "repaired": self.repaired, "dropped": self.dropped,
            "blank_lines": self.blank_lines, "kinds": dict(self.counts),
        }

    def summary(self):
        """One line: 'u.data: read 100 rows = 98 kept + 0 repaired + 2 dropped; dropped 1 truncated ...'."""
        head = f"{os.path.basename(self.path)}: read {self.read} row(s)"
        if self.kept is not None:
            head += f" = {self.kept} kept + {self.repaired} repaired + {self.dropped} dropped"
        parts = [what.format(n=n) for what, n in self.counts.items()]
        if self.blank_lines:
            parts.append(f"skipped {self.blank_lines} blank line(s)")
        return "; ".join([head] + parts)

    def report(self):
        """Prints the summary."""
        print(f"zoo.datasets: {self.summary()}")


class _Progress:
    """A keras Progbar over bytes read, only for large files (or verbose=True)."""

    def __init__(self, path, verbose):
        size = os.path.getsize(path)
        show = size > PROGRESS_BYTES if verbose == "auto" else bool(verbose)
        self.bar = None
        if show:
            import keras

            print(f"reading {path}")
            self.bar = keras.utils.Progbar(size, unit_name="byte")
        self.done = 0

    def update(self, done):
        if self.bar is not None:
            self.bar.update(done)

    def close(self, done):
        if self.bar is not None:
            self.bar.update(done, finalize=True)


def _decode_first(raw, path, repairs):
    """The first line without a UTF-8 byte-order mark (noted); a UTF-16 file is refused."""
    if raw.startswith(UTF16_BOMS):
        raise ZooError(f"{path}: the file is UTF-16 encoded; save it as UTF-8 (or plain ASCII) text")
    if raw.startswith(UTF8_BOM):
        if repairs is not None:
            repairs.note("removed the UTF-8 byte-order mark at the start of the file")
        raw = raw[len(UTF8_BOM) :]
    return raw


def read_rows(path, delimiter, num_fields, repairs, *, header=None, verbose="auto"):
    """Yields (line_number, fields) for every data row of a delimited text file, streaming.

    Args:
        path: the file.
        delimiter: the field separator (any string: "," "\\t" "::").
        num_fields: the number of fields every row has.
        repairs: the `Repairs` of this file: rows read, blank lines and truncated last rows are counted
            there (see the module docstring for the rules).
        header: None (no header), or the expected first line's field names; a first line equal to
            them (case-insensitive) is skipped, any other first line is data.
        verbose: "auto" (a progress bar for large files), True or False.
    """
    progress = _Progress(path, verbose)
    done = 0
    expected_header = [h.lower() for h in header] if header else None
    shortest_final = None  # the shortest final field of the complete rows so far
    read = blank = yielded = 0  # counted locally (a hot loop), handed to `repairs` as the read goes
    saw_header = False
    try:
        with open(path, "rb") as stream:
            line_number = 0
            for raw in stream:
                line_number += 1
                done += len(raw)
                if line_number == 1:
                    raw = _decode_first(raw, path, repairs)
                elif line_number % 65536 == 0:
                    progress.update(done)
                text = raw.decode("latin-1")
                ended = text.endswith("\n")
                text = text.rstrip("\r\n")
                if not text.strip():
                    blank += 1
                    continue
                fields = text.split(delimiter)
                if line_number == 1 and expected_header is not None:
                    if [f.strip().lower() for f in fields] == expected_header:
                        saw_header = True
                        continue
                read += 1
                if len(fields) != num_fields:
                    if not ended and len(fields) < num_fields:
                        repairs.drop(TRUNCATED)
                        continue
                    repairs.error(line_number, f"expected {num_fields} fields, found {len(fields)}")
                final = len(fields[-1])
                if shortest_final is None or final < shortest_final:
                    if not ended and shortest_final is not None:
                        repairs.drop(TRUNCATED)  # cut inside its final field
                        continue
                    shortest_final = final
                yielded += 1
                yield line_number, fields
    finally:
        repairs.read += read
        repairs.blank_lines += blank
    progress.close(done)
    if not yielded:
        if read:
            raise ZooError(f"{path}: the file holds no complete data row ({repairs.summary()})")
        if saw_header:
            raise ZooError(f"{path}: the file holds only its header line, no data rows")
        if blank:
            raise ZooError(f"{path}: the file holds only blank lines, no data rows")
        raise ZooError(f"{path}: the file is empty")


def count_rows(path, delimiter, num_fields, *, header=None):
    """The number of data rows `read_rows` yields (blank lines, the header and a truncated last row
    are not rows): one quiet pass, for readers that split by row order."""
    return sum(1 for _ in read_rows(path, delimiter, num_fields, Repairs(path), header=header, verbose=False))


def first_line(path):
    """The first line of a file (decoded, without its newline or a UTF-8 byte-order mark); '' if empty."""
    with open(path, "rb") as stream:
        return _decode_first(stream.readline(), path, None).decode("latin-1").rstrip("\r\n")


def find_file(path, candidates, what):
    """`path` itself if it is a file, else the first of `candidates` inside the folder `path`."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise ZooError(f"{what}: {path} does not exist")
    for name in candidates:
        found = os.path.join(path, name)
        if os.path.isfile(found):
            return found
    raise ZooError(f"{what}: found none of {', '.join(candidates)} in {path}")
