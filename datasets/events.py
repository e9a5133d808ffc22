"""Event-log data sets (one behaviour per row) -> `storage.Events`, and `read_log`, the paper readers' reading.

Every paper reader other than Criteo's (a data spec) reads its file with `read_log`: the data-spec
engine's pyarrow CSV reader (`spec_reading.read_chunks`, a block of rows at a time), each chunk converted
vectorised into integer columns (raw tokens numbered densely in first-seen order by an `Interner`, so
memory is a few bytes per value, never the text). The readers of MovieLens, Amazon Books and Taobao
UserBehavior then filter, sort by (user, time), split, fit vocabularies on the training events only and
write the events plus per-sample history pointers (`write_events`); those of Avazu, Taobao ads and
Eleme write one sample per row (zoo.datasets.tabular).
"""

import numpy as np

from zoo.datasets import preprocess, spec_reading, storage
from zoo.datasets.reading import TRUNCATED, UTF8_BOM, _decode_first
from zoo.errors import ZooError

MAX_TIME = 2**40  # unix seconds far beyond any real event; a larger value is a malformed time
EMPTY_FIELD = "dropped {n} row(s) with an empty field"
# Values of these forms are converted by pyarrow (to the number Python gives); any other goes through
# Repairs.number (as Python reads a number): "1e9" and "3.0" are whole seconds, " 4 " is 4.
PLAIN = {float: r"^[0-9]{1,15}(\.[0-9]{1,15})?$", "time": r"^[0-9]{1,12}$"}


class TokenList:
    """A `read_log` column kind: a list of tokens in one field, `separator`-separated."""

    def __init__(self, separator):
        self.separator = separator


class Interner:
    """Raw token -> dense int 0..n-1 in first-seen order (`index`: {token: int})."""

    def __init__(self):
        self.index = {}

    def extend(self, tokens):
        """int64 [len(tokens)]: the ints of `tokens` (given in first-seen order), the new ones numbered next."""
        index = self.index
        return np.fromiter((index.setdefault(token, len(index)) for token in tokens), np.int64, len(tokens))

    def __len__(self):
        return len(self.index)


def read_log(path, delimiter, columns, repairs, *, header=None, lines=False, interners=None):
    """The columns of a delimited event log, read by the engine's pyarrow reader a chunk at a time.

    Args:
        path: the file (no quoting: a field is the text between two delimiters).
        delimiter: one character, or one character repeated ("::" is read as ":", and the field between
            the two halves is checked to be empty).
        columns: {name: kind} of the file's fields, in order. Kinds: "id" (a raw token), float (a number),
            "time" (whole unix seconds, 0 <= t < 2**40) or a dict {token: code} (one of a closed set): an
            empty one drops its row, and a value not of its kind raises a ZooError naming the file, the
            line and the column (`name`); "text" (a raw token; an empty one is a value too), a
            `TokenList` (the field, stripped, split at its separator: the tokens as written, an empty
            field an empty list) or None (a field not read).
        repairs: the file's `Repairs`: rows read, blank lines and dropped rows are counted there.
        header: None, or a header's field names: a first line equal to them (case-insensitive) is
            skipped, any other first line is data.
        lines: also return each row's file line ("line").
        interners: those an earlier call returned, to number this file's tokens on from that file's
            (files read as one log: a token has one dense int in all).

    Returns:
        ({name: [E] array} (+ "line"), {name: Interner} of the "id", "text" and list columns): an "id" or
        "text" column as dense ints (int64, first-seen order), float as float64, "time" as int64, a dict
        column as its codes, a list column as (dense ints of its tokens [T], the rows' lengths [E]).

    The rules are zoo.datasets.reading's: a field is its bytes as latin-1 text, stripped; a row with an
    empty field (of a kind that drops it) is dropped and counted; blank lines are counted, not rows; a
    last line without a newline is dropped and counted as truncated when it has too few fields or a final
    field shorter than every complete row's; any other row with the wrong number of fields raises a
    ZooError naming its line; a file without data rows is refused in one line.
    """
    return _Log(path, delimiter, columns, repairs, header).read(lines, interners)


class _Log:
    """One `read_log` call: the file's layout for pyarrow, and the account of its rows."""

    def __init__(self, path, delimiter, columns, repairs, header):
        step, self.char = len(delimiter), delimiter[0]
        if delimiter != self.char * step:
            raise ValueError(f"a delimiter is one character, or one character repeated, not {delimiter!r}")
        self.path, self.delimiter, self.columns, self.repairs = path, delimiter, columns, repairs
        self.width = len(columns) * step - (step - 1)  # pyarrow's fields: ours, step - 1 empty ones between two
        self.raw = [f"f{i}" for i in range(self.width)]
        self.fields = dict(zip(columns, self.raw[::step]))
        self.gaps = [name for i, name in enumerate(self.raw) if i % step]
        with open(path, "rb") as stream:
            first = stream.readline()
            marked = first.startswith(UTF8_BOM)
            first = _decode_first(first, path, repairs)  # refuses UTF-16, notes a UTF-8 byte-order mark
            self.nothing = not first and not stream.read(1)  # pyarrow refuses a file with no line at all
        self.marked_blank = marked and not first.rstrip(b"\r\n")  # a blank line the engine does not count
        names = [f.strip().lower() for f in first.decode("latin-1").rstrip("\r\n").split(delimiter)]
        self.has_header = header is not None and names == [h.lower() for h in header]
        # A carriage return not before a newline ends a line for pyarrow, not under `reading`'s rules:
        # then the file's lines are counted here, in one pass (the reader's rows are not its lines).
        self.lone_returns = _lone_returns(path)
        self.spaces = 0  # rows of blanks between whitespace delimiters: blank lines, though pyarrow's rows
        # The kinds whose empty value drops its row.
        self.drops = np.array([kind not in ("text", None) and not isinstance(kind, TokenList)
                               for kind in columns.values()], bool)

    def read(self, lines, interners=None):
        repairs = self.repairs
        if self.marked_blank:
            repairs.blank_lines += 1
        source = {"format": "csv", "delimiter": self.char, "quote": None, "header": False, "column_names": self.raw}
        chunks = () if self.nothing else spec_reading.read_chunks(self.path, source, self.raw, repairs)
        last_line = _unterminated_last_line(self.path)
        interners = interners or {name: Interner() for name, kind in self.columns.items()
                                  if kind in ("id", "text") or isinstance(kind, TokenList)}
        parts = {name: [] for name in list(self.columns) + ["line"]}
        shortest = None  # the shortest final field of the complete rows so far
        for chunk, final in self._with_last(chunks):
            skip = np.zeros(chunk.rows, bool)  # the header, a blank line or a truncated last row: no data row
            if self.has_header and chunk.first_line == 1:
                skip[0] = True
                repairs.read -= 1
            empty, bad, values = self._convert(chunk)
            if self.char.isspace():
                blank = empty.all(axis=0) & ~skip
                self.spaces += int(blank.sum())
                repairs.read -= int(blank.sum())
                repairs.blank_lines += int(blank.sum())
                skip |= blank
            length = _lengths(chunk.columns[self.raw[-1]])
            if final and self._cut(chunk, skip, length, shortest, last_line):
                skip[-1] = True
                repairs.drop(TRUNCATED)
            if (~skip).any():
                low = int(length[~skip].min())
                shortest = low if shortest is None else min(shortest, low)
            misplaced = np.zeros(chunk.rows, bool)  # "a::b:c::d" read with ':' puts 'b' where '' belongs
            for gap in self.gaps:
                misplaced |= _lengths(chunk.columns[gap]) > 0
            dropped = empty[self.drops].any(axis=0) & ~skip
            repairs.drop(EMPTY_FIELD, int(dropped.sum()))
            for row in np.flatnonzero(~skip & (misplaced | (bad.any(axis=0) & ~dropped))):
                line = self._line(chunk, row)
                if misplaced[row]:
                    found = len(self._text(chunk, row).split(self.delimiter))
                    repairs.error(line, f"expected {len(self.columns)} fields, found {found}")
                self._check([_clean(chunk.columns[self.fields[name]][int(row)].as_py()) for name in self.columns], line)
            kept = ~skip & ~dropped
            for name, kind in self.columns.items():
                if kind in ("id", "text"):
                    codes, tokens = values[name]
                    parts[name].append(_intern(codes[kept], tokens, interners[name]))
                elif isinstance(kind, TokenList):
                    codes, tokens, lengths = values[name]
                    in_kept = np.repeat(kept, lengths)
                    parts[name].append((_intern(codes[in_kept], tokens, interners[name]), lengths[kept]))
                elif kind is not None:
                    parts[name].append(values[name][kept])
            parts["line"].append(chunk.first_line + np.flatnonzero(kept))  # the reader's row numbers, from 1
        if TRUNCATED in repairs.counts:  # counted after the rows before it, as row by row
            repairs.counts[TRUNCATED] = repairs.counts.pop(TRUNCATED)
        if self.lone_returns:
            repairs.blank_lines = sum(not text.strip() for _, text, _ in self._lines())
        self._refuse_no_rows()
        arrays = {}
        for name, kind in self.columns.items():
            if isinstance(kind, TokenList):
                arrays[name] = tuple(np.concatenate(part) for part in zip(*parts[name]))
            elif kind is not None:
                arrays[name] = np.concatenate(parts[name])
        if lines:
            rows = np.concatenate(parts["line"]).astype(np.int64)
            arrays["line"] = rows if not self._shifted() else self._row_lines()[rows - 1]
        return arrays, interners

    def _cut(self, chunk, skip, length, shortest, last_line):
        """Whether the chunk's last row is the file's last line, without a newline and cut short: with too
        few fields, or a final field shorter than every complete row's (`length` [n], `shortest` before)."""
        if last_line is None or skip[-1] or self._text(chunk, -1) != last_line:
            return False
        complete = length[:-1][~skip[:-1]].tolist() + ([shortest] if shortest is not None else [])
        return len(last_line.split(self.delimiter)) < len(self.columns) or bool(complete and length[-1] < min(complete))

    def _with_last(self, chunks):
        """(chunk, whether it is the last); a block the reader refuses raises its first faulty line's error."""
        chunks, previous = iter(chunks), None
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except ZooError as error:
                if previous is not None:
                    yield previous, False  # its rows come first in the file, and so do their errors
                start = 1 if previous is None else previous.first_line + previous.rows
                raise ZooError(self._first_fault(start) or str(error)) from None
            if previous is not None:
                yield previous, False
            previous = chunk
        if previous is not None:
            yield previous, True

    def _convert(self, chunk):
        """(empty [fields, n], bad [fields, n], {name: values}) of a chunk: a field empty once stripped, a
        value not of its column's kind (a row with one is checked by `_check`), and the values: an "id"
        column's (codes [n], its distinct stripped tokens in first-seen order), the others' arrays [n]."""
        import pyarrow as pa
        import pyarrow.compute as pc

        empty = np.zeros((len(self.columns), chunk.rows), bool)
        bad = np.zeros((len(self.columns), chunk.rows), bool)
        values = {}
        for k, (name, kind) in enumerate(self.columns.items()):
            array = chunk.columns[self.fields[name]]
            if kind is None:
                if self.char.isspace():  # a blank line between whitespace delimiters
                    empty[k] = _lengths(pc.utf8_trim_whitespace(array)) == 0
                continue
            if isinstance(kind, TokenList):
                values[name] = _token_lists(array, kind.separator)
                empty[k] = values[name][2] == 0
                continue
            if kind in (float, "time"):
                plain = np.asarray(pc.match_substring_regex(array, PLAIN[kind]).to_numpy(zero_copy_only=False), bool)
                numbers = np.zeros(chunk.rows, np.float64 if kind is float else np.int64)
                numbers[plain] = pc.cast(array.filter(pa.array(plain)), pa.float64() if kind is float else pa.int64()
                                         ).to_numpy(zero_copy_only=False)
                for row, value in zip(np.flatnonzero(~plain), array.filter(pa.array(~plain)).to_pylist()):
                    text = _clean(value)
                    number = _number(text, name, kind, self.repairs) if text else None
                    empty[k, row], bad[k, row] = not text, bool(text) and number is None
                    numbers[row] = number or 0
                values[name] = numbers
                continue
            encoded = pc.dictionary_encode(array)
            codes = encoded.indices.to_numpy(zero_copy_only=False)
            tokens = [_clean(token) for token in encoded.dictionary.to_pylist()]
            empty[k] = np.array([not token for token in tokens], bool)[codes]
            if kind in ("id", "text"):
                values[name] = (codes, tokens)
            else:
                bad[k] = np.array([bool(token) and token not in kind for token in tokens], bool)[codes]
                values[name] = np.array([kind.get(token, 0) for token in tokens], np.int32)[codes]
        return empty, bad, values

    def _check(self, texts, line):
        """The checks of one row's (stripped, non-empty) values, in column order: the first value not of
        its column's kind raises."""
        for (name, kind), text in zip(self.columns.items(), texts):
            if isinstance(kind, dict) and text not in kind:
                self.repairs.error(line, f"column '{name}' should be one of {', '.join(kind)}, found {text[:40]!r}")
            if kind in (float, "time"):
                value = self.repairs.number(text, line, name, float if kind is float else int)
                if kind == "time" and not 0 <= value < MAX_TIME:
                    self.repairs.error(line, f"column '{name}' should be unix seconds, found {value}")

    def _text(self, chunk, row):
        """The line of a chunk's row, as the file holds it."""
        return self.char.join(chunk.columns[name][int(row)].as_py() for name in self.raw)

    def _shifted(self):
        """Whether the reader's row numbers may differ from the file's lines (it skipped lines)."""
        return self.lone_returns or self.repairs.blank_lines != self.spaces

    def _line(self, chunk, row):
        """The file line of a chunk's row."""
        number = chunk.first_line + int(row)
        return int(self._row_lines(stop=number)[number - 1]) if self._shifted() else number

    def _lines(self):
        """(line number, text, whether a newline ends it) of each line as `reading`'s rules split the file:
        at newlines; latin-1 text without the line's end, and without a byte-order mark."""
        with open(self.path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                if number == 1:
                    raw = raw.removeprefix(UTF8_BOM)
                text = raw.decode("latin-1")
                yield number, text.rstrip("\r\n"), text.endswith("\n")

    def _rows_in(self, text, ended):
        """How many rows pyarrow reads in a line of the file: it also ends a line at a lone carriage
        return, and skips empty lines and lines of spaces whose number of fields is not the file's."""
        body = text if ended or not text.endswith("\r") else text[:-1]
        return sum(bool(part) and (part.encode("latin-1").decode("utf-8", "replace").strip() != ""
                                   or part.count(self.char) + 1 == self.width) for part in body.split("\r"))

    def _row_lines(self, stop=None):
        """The file line of each row the reader yields, up to the `stop`-th: one pass over the lines."""
        found = []
        for number, text, ended in self._lines():
            found += [number] * self._rows_in(text, ended)
            if stop is not None and len(found) >= stop:
                break
        return np.asarray(found, np.int64)

    def _first_fault(self, start):
        """The error of the first faulty line of the block the reader refused (from its row number `start`
        on): a wrong number of fields, or a value not of its kind before it; None if none is found."""
        count, rows = len(self.columns), 0
        for number, text, ended in self._lines():
            rows += self._rows_in(text, ended)
            if rows < start or not text.strip() or (number == 1 and self.has_header):
                continue
            fields = text.split(self.delimiter)
            if len(fields) != count:
                if not ended and len(fields) < count:
                    continue  # a truncated last row, dropped
                return f"{self.path}, line {number}: expected {count} fields, found {len(fields)}"
            if text.count(self.char) + 1 != self.width:
                return f"{self.path}, line {number}: a field holds {self.char!r}, which separates the fields here"
            texts = [field.strip() for field in fields]
            if ended and all(text or not drops for text, drops in zip(texts, self.drops)):
                self._check(texts, number)
        return None

    def _refuse_no_rows(self):
        repairs = self.repairs
        if repairs.read > repairs.counts.get(TRUNCATED, 0):
            return
        if repairs.read:
            raise ZooError(f"{self.path}: the file holds no complete data row ({repairs.summary()})")
        if self.has_header:
            raise ZooError(f"{self.path}: the file holds only its header line, no data rows")
        if repairs.blank_lines:
            raise ZooError(f"{self.path}: the file holds only blank lines, no data rows")
        raise ZooError(f"{self.path}: the file is empty")


def _clean(value):
    """A field under `reading`'s rules: its bytes as latin-1 text, stripped."""
    return value.strip() if value.isascii() else value.encode("utf-8").decode("latin-1").strip()


def _token_lists(array, separator):
    """(codes [T], tokens, lengths [n]) of a list column: each field stripped, then split at `separator`
    (an empty field is an empty list); `tokens` the distinct tokens as latin-1 text, `codes` index them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    plain = np.asarray(pc.match_substring_regex(array, r"^([!-~](.*[!-~])?)?$").to_numpy(zero_copy_only=False), bool)
    lists = pc.split_pattern(pc.if_else(pa.array(plain), array, ""), separator)  # the others split below
    split = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    none = ~plain | (_lengths(array) == 0)  # no token from pyarrow ("" splits into one empty token)
    encoded = pc.dictionary_encode(pc.list_flatten(lists).filter(pa.array(np.repeat(~none, split))))
    tokens = [token if token.isascii() else token.encode("utf-8").decode("latin-1")
              for token in encoded.dictionary.to_pylist()]
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.where(none, 0, split)
    if plain.all():
        return codes, tokens, lengths
    # A field with a blank or non-ASCII first or last character: stripped as latin-1 text, one by one.
    index, odd = {token: code for code, token in enumerate(tokens)}, []
    for row, value in zip(np.flatnonzero(~plain), array.filter(pa.array(~plain)).to_pylist()):
        text = _clean(value)
        found = text.split(separator) if text else []
        lengths[row] = len(found)
        odd += [index.setdefault(token, len(index)) for token in found]
    merged = np.empty(int(lengths.sum()), np.int64)
    in_odd = np.repeat(~plain, lengths)
    merged[~in_odd], merged[in_odd] = codes, odd
    return merged, list(index), lengths


def _number(text, name, kind, repairs):
    """The value of a number that is not plain (Repairs.number's rules), or None if it is not one."""
    try:
        value = repairs.number(text, 0, name, float if kind is float else int)
    except ZooError:
        return None
    return value if kind is float or 0 <= value < MAX_TIME else None


def _lengths(array):
    import pyarrow.compute as pc

    return np.asarray(pc.binary_length(array).to_numpy(zero_copy_only=False), np.int64)


def _intern(codes, tokens, interner):
    """Dense ints of a chunk's kept rows ([n] codes into `tokens`), numbered in first-seen order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(pa.array(codes))  # the codes in the order the kept rows first show them
    order = encoded.dictionary.to_numpy(zero_copy_only=False)
    return interner.extend([tokens[code] for code in order])[encoded.indices.to_numpy(zero_copy_only=False)]


def _lone_returns(path):
    """Whether the file holds a carriage return that is not before a newline."""
    carry = b""
    with open(path, "rb") as stream:
        while block := stream.read(spec_reading.BLOCK_BYTES):
            block, carry = carry + block, b""
            if block.endswith(b"\r"):
                block, carry = block[:-1], b"\r"
            if block.count(b"\r") != block.count(b"\r\n"):
                return True
    return carry == b"\r"


def _unterminated_last_line(path):
    """The file's last line (as pyarrow decodes it) when the file does not end with a newline, else None."""
    with open(path, "rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(max(size - 65536, 0))
        tail = stream.read()
    if not tail or tail.endswith(b"\n"):
        return None
    return tail.rsplit(b"\n", 1)[-1].decode("utf-8", "replace").rstrip("\r")


def fit_ids(dense, train, size, min_count=1):
    """Vocabulary fitted on the training events: (lookup [size] dense -> id, vocabulary_size).

    Ids 1..n by descending training count (ties by first appearance); values never (or too rarely)
    seen in training map to the OOV id n + 1.
    """
    counts = np.bincount(dense[train], minlength=size)
    kept = np.flatnonzero(counts >= max(min_count, 1))
    kept = kept[np.argsort(-counts[kept], kind="stable")]
    lookup = np.full(size, kept.size + 1, dtype=np.int32)
    lookup[kept] = np.arange(1, kept.size + 1, dtype=np.int32)
    return lookup, kept.size + 2


def fit_vocabulary(interner, dense, train):
    """`fit_ids` on interned tokens: (the fitted preprocess.Vocabulary, lookup [len(interner)] -> id)."""
    lookup, size = fit_ids(dense, train, len(interner))
    tokens = np.empty(size - 2, dtype=object)
    fitted = lookup < size - 1
    tokens[lookup[fitted] - 1] = np.asarray(list(interner.index), dtype=object)[fitted]
    return preprocess.Vocabulary.from_tokens(tokens.tolist()), lookup


def apply_vocabulary(vocabulary, interner, dense):
    """A fitted vocabulary applied to interned tokens: (ids of `dense`, {"rows", "values"}: how many
    of them, and how many distinct tokens, are unknown to it and map to the OOV id)."""
    lookup = np.fromiter((vocabulary.lookup(t) for t in interner.index), dtype=np.int32, count=len(interner))
    ids = lookup[dense]
    unknown = ids == vocabulary.oov
    return ids, {"rows": int(unknown.sum()), "values": int(np.unique(dense[unknown]).size)}


UNKNOWN = "mapped the %s of {n} row(s) to the OOV id (unknown to the fitted vocabulary)"


def note_unknown(repairs, unknown_ids):
    """Notes, in the file's account, the rows whose id `apply_vocabulary` mapped to OOV, per field."""
    for name, unknown in unknown_ids.items():
        repairs.note(UNKNOWN % name, unknown["rows"])


def order_events(columns, user="user", time="time"):
    """Sorts every column by (user, time, file order); returns the sorted columns."""
    order = preprocess.sort_events(columns[user], columns[time])
    return {name: values[order] for name, values in columns.items()}


def write_events(out_dir, schema, events, samples, info):
    """Writes an Events store.

    Args:
        events: {hist key: [E] array} sorted by (user, time).
        samples: {split: {"start", "end", "user", "labels", and user_/cand_/ctx_/num_ keys: [S]}}; the
            splits are train, validation and test, or "all" when a fitted preprocessing is applied.
    """
    for key, values in events.items():
        storage.save(out_dir, f"events.{key}", values)
    rows = {}
    for split, part in samples.items():
        rows[split] = int(part["labels"].shape[0])
        for key, values in part.items():
            storage.save(out_dir, f"{split}.{key}", values)
    storage.write_meta(out_dir, "events", schema, rows, info)


def select(arrays, mask):
    return {key: values[mask] for key, values in arrays.items()}
