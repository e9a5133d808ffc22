"""Streaming reads of the raw files: rows with their line numbers, progress, and counted repairs.

Every reader goes through `read_rows`, so every data set treats bad input the same way:

- a last line without a newline and with too few fields (a file cut off mid-row) is dropped and
  counted ("dropped 1 truncated last row");
- any other row with the wrong number of fields raises a ZooError naming the file and line;
- blank lines are skipped and counted;
- a value that must be a number and is not raises a ZooError naming the file, line and column
  (`Repairs.number`); readers count their own documented repairs (`Repairs.add`) and the summary is
  printed once at the end of preprocessing (`Repairs.report`).

Nothing reads a whole file into memory: rows are yielded one at a time from a binary stream
(latin-1 decoding, which never fails and keeps every byte of an id).
"""

import collections
import math
import os

from zoo.errors import ZooError

PROGRESS_BYTES = 32 * 2**20  # show a progress bar for files larger than this (verbose="auto")


class Repairs:
    """The repairs a reader made to one file, counted by kind, and its errors (file and line)."""

    def __init__(self, path):
        self.path = str(path)
        self.counts = collections.Counter()

    def add(self, what, count=1):
        """Counts `count` repairs of kind `what` ("dropped {n} truncated last row(s)")."""
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

    def summary(self):
        """One line: 'file: dropped 1 truncated last row; ...' (empty when nothing was repaired)."""
        if not self.counts:
            return ""
        parts = [what.format(n=n) for what, n in self.counts.items()]
        return f"{os.path.basename(self.path)}: " + "; ".join(parts)

    def report(self):
        """Prints the summary, if any repair was made."""
        text = self.summary()
        if text:
            print(f"zoo.datasets repairs: {text}")


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


def read_rows(path, delimiter, num_fields, repairs, *, header=None, verbose="auto"):
    """Yields (line_number, fields) for every data row of a delimited text file, streaming.

    Args:
        path: the file.
        delimiter: the field separator (any string: "," "\\t" "::").
        num_fields: the number of fields every row has.
        repairs: the `Repairs` of this file (truncated last rows and blank lines are counted there).
        header: None (no header), or the expected first line's field names; a first line equal to
            them (case-insensitive) is skipped, any other first line is data.
        verbose: "auto" (a progress bar for large files), True or False.
    """
    progress = _Progress(path, verbose)
    done = 0
    expected_header = [h.lower() for h in header] if header else None
    with open(path, "rb") as stream:
        line_number = 0
        for raw in stream:
            line_number += 1
            done += len(raw)
            if line_number % 65536 == 0:
                progress.update(done)
            text = raw.decode("latin-1")
            ended = text.endswith("\n")
            text = text.rstrip("\r\n")
            if not text.strip():
                repairs.add("skipped {n} blank line(s)")
                continue
            fields = text.split(delimiter)
            if line_number == 1 and expected_header is not None:
                if [f.strip().lower() for f in fields] == expected_header:
                    continue
            if len(fields) != num_fields:
                if not ended and len(fields) < num_fields:
                    repairs.add("dropped {n} truncated last row(s)")
                    continue
                repairs.error(line_number, f"expected {num_fields} fields, found {len(fields)}")
            yield line_number, fields  # (a complete last row without a final newline is kept)
    progress.close(done)


def first_line(path):
    """The first line of a file (decoded, without its newline); '' for an empty file."""
    with open(path, "rb") as stream:
        return stream.readline().decode("latin-1").rstrip("\r\n")


def count_lines(path):
    """The number of lines (a last line without newline counts), reading 1 MiB at a time."""
    count, last = 0, b"\n"
    with open(path, "rb") as stream:
        while True:
            block = stream.read(2**20)
            if not block:
                break
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


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
