"""The account of every raw file's rows, and the rules the readers read a raw file by.

Every reader reads through pyarrow: Criteo through the data-spec engine (zoo/datasets/spec_reading.py),
the others through `events.read_log`, which keeps these rules:

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
"""

import collections
import math
import os

import numpy as np

from zoo.errors import ZooError

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
        self.read = 0  # data rows read (not the header, not blank lines); set by the reading
        self.dropped = 0
        self.repaired = 0
        self.blank_lines = 0
        self.kept = None  # set by finish
        self.history_only = False  # set by finish: every row read for the histories of other files' rows
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

    def tally(self, changes):
        """Counts a whole file's drops and repairs at once, as if row by row: `changes` [(how, what,
        counts [n])] over its data rows, in the order a row is checked; `how` "drop" (counts: the rows
        left out) or "repair" (counts: changes to each kept row). Kinds enter the account in the order of
        the first row that shows each; a row counts once among the repaired; a truncated last row stays
        last."""
        first = sorted((int(np.flatnonzero(counts)[0]), position)
                       for position, (_, _, counts) in enumerate(changes) if np.any(counts))
        repaired = None
        for _, position in first:
            how, what, counts = changes[position]
            if how == "drop":
                self.drop(what, int(np.sum(counts)))
            else:
                self.counts[what] += int(np.sum(counts))
                repaired = counts > 0 if repaired is None else repaired | (counts > 0)
        self.repaired += 0 if repaired is None else int(repaired.sum())
        if TRUNCATED in self.counts:
            self.counts[TRUNCATED] = self.counts.pop(TRUNCATED)

    def error(self, line, message):
        raise ZooError(f"{self.path}, line {line}: {message}")

    def number(self, text, line, column, kind=float):
        """`text` as a number (int or float); a ZooError naming file, line and column if it is not one."""
        value = as_number(text, kind)
        if value is None:
            self.error(line, f"column '{column}' should be a number, found {text[:40]!r}")
        return value

    def finish(self, rows, context=False):
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
        if not rows and not context:  # (a context file's rows are read for the later rows' features)
            raise ZooError(f"{self.path}: no row is left ({self.summary()})")
        self.kept = kept
        self.history_only = context and self.counts.get(HISTORY_ONLY, 0) == self.read > 0
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
        if self.history_only:  # an earlier log (--history-from): none of its rows is scored, none is lost
            head += " for histories and statistics only (an earlier log: not scored)"
        elif self.kept is not None:
            head += f" = {self.kept} kept + {self.repaired} repaired + {self.dropped} dropped"
        parts = [what.format(n=n) for what, n in self.counts.items() if n and not (self.history_only and
                                                                                 what == HISTORY_ONLY)]
        if self.blank_lines:
            parts.append(f"skipped {self.blank_lines} blank line(s)")
        return "; ".join([head] + parts)

    def report(self):
        """Prints the summary."""
        print(f"zoo.datasets: {self.summary()}")


HISTORY_ONLY = "read {n} row(s) for histories and statistics only (an earlier log: not scored)"  # a drop's kind


def as_number(text, kind=float):
    """`text` as a number (int or float: "3.0" is an integer written as a float), or None when it is not
    one (or not finite)."""
    try:
        value = kind(text)
    except ValueError:
        value = None
        if kind is int:
            try:
                as_float = float(text)
                value = int(as_float) if as_float.is_integer() else None
            except (ValueError, OverflowError):
                value = None
    if value is None or (kind is float and not math.isfinite(value)):
        return None
    return value


def _decode_first(raw, path, repairs):
    """The first line without a UTF-8 byte-order mark (noted); a UTF-16 file is refused."""
    if raw.startswith(UTF16_BOMS):
        raise ZooError(f"{path}: the file is UTF-16 encoded; save it as UTF-8 (or plain ASCII) text")
    if raw.startswith(UTF8_BOM):
        if repairs is not None:
            repairs.note("removed the UTF-8 byte-order mark at the start of the file")
        raw = raw[len(UTF8_BOM) :]
    return raw


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
