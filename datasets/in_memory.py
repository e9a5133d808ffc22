"""Raw rows held in memory, read through a preset's preprocessor exactly as the same rows in a file.

    model = zoo.load("runs/my_din/preset")
    scores = model.predict(pandas.read_csv("today.csv"), history_from="logs/")   # one score per row

A pandas DataFrame, a pyarrow Table, a dict of columns (name -> list or array) or a list of dicts (one per
row) is written, once per call, into a temporary file in the format of the preset's spec (its CSV dialect:
delimiter, quoting, header or `column_names`; or Parquet, or JSON lines) and read from there by the same
engine as a file, so a DataFrame read from a file scores as the file does. What the writing does, per column:
- text and numbers as `spec_reading.as_text` gives them (the engine's own reading of a typed column:
  a float that is a whole number is written without ".0", as pandas makes an integer column with gaps a
  float column; a missing value is an empty field; a boolean is `true`/`false`);
- a time column of timestamps (pandas' `parse_dates`) in the spec's time format (ISO 8601 in UTC for
  a zoned timestamp, unix seconds or milliseconds, or the spec's strptime format);
- a list column (a tags or list column given as lists) joined by the spec column's separator.
Every error the reading raises names the rows by their position in the input ("row 3 of the rows
given": 0-based, as pandas' iloc), not the temporary file.
"""

import contextlib
import os
import re
import tempfile

from zoo.datasets import spec_reading
from zoo.errors import ZooError

WHAT = "the rows given"


def is_rows(value):
    """Whether `value` has the shape of raw rows held in memory: a pandas DataFrame, a pyarrow Table, a
    list of dicts, or a dict (of columns: a caller that also takes batches in the input contract tells a
    batch's dict apart first, as ZooModel.raw_rows does)."""
    if type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas"):
        return True
    if type(value).__module__.startswith("pyarrow") and type(value).__name__ in ("Table", "RecordBatch"):
        return True
    if isinstance(value, list):
        return bool(value) and all(isinstance(row, dict) for row in value)
    return isinstance(value, dict)


def as_table(rows):
    """The rows as a pyarrow Table; refused in one line when they are not rows of equal length."""
    import pyarrow as pa

    try:
        if type(rows).__name__ == "DataFrame":
            if len(set(map(str, rows.columns))) < len(rows.columns):
                raise ZooError(f"{WHAT} repeat a column name: {sorted(map(str, rows.columns))}")
            return pa.Table.from_pandas(rows.rename(columns=str), preserve_index=False)
        if isinstance(rows, pa.RecordBatch):
            return pa.Table.from_batches([rows])
        if isinstance(rows, pa.Table):
            return rows
        if isinstance(rows, list):  # one dict a row: its columns (a key a row lacks is a missing value there)
            names = list(dict.fromkeys(name for row in rows for name in row))
            rows = {name: [row.get(name) for row in rows] for name in names}
        lengths = {name: len(values) for name, values in rows.items() if hasattr(values, "__len__")
                   and not isinstance(values, (str, bytes))}
        if len(lengths) < len(rows):
            scalar = next(name for name in rows if name not in lengths)
            raise ZooError(f"{WHAT}: column '{scalar}' is one value, not a column of values (a dict of columns "
                           "maps each name to a list or array)")
        if len(set(lengths.values())) > 1:
            raise ZooError(f"{WHAT}: columns of different lengths ({', '.join(f'{k} {v}' for k, v in lengths.items())})")
        # from_pandas: a float NaN among values is a missing value (pandas' records and tolist() write them so)
        return pa.table({str(name): pa.array(values, from_pandas=True) for name, values in rows.items()})
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as error:
        raise ZooError(f"{WHAT} cannot be read as columns ({str(error).splitlines()[0]})") from None


def _time_text(array, time):
    """A timestamp column as the text the spec's time format reads (fractions of a second cut, as the
    engine's reading of a time cuts them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fmt = time["format"]
    if fmt in ("unix_s", "unix_ms"):
        unit = "ms" if fmt == "unix_ms" else "s"
        return pc.cast(pc.cast(pc.floor_temporal(array, unit="millisecond" if unit == "ms" else "second"),
                               pa.timestamp(unit, tz=array.type.tz)), pa.int64()).cast(pa.string())
    seconds = pc.cast(pc.floor_temporal(array, unit="second"), pa.timestamp("s", tz=array.type.tz))
    if fmt == "iso8601":
        if array.type.tz is not None:
            utc = pc.cast(seconds, pa.timestamp("s", tz="UTC"))
            return pc.binary_join_element_wise(pc.strftime(utc, format="%Y-%m-%dT%H:%M:%S"), "Z", "")
        return pc.strftime(pc.cast(seconds, pa.timestamp("s")), format="%Y-%m-%dT%H:%M:%S")
    return pc.strftime(seconds, format=fmt)


def _timed(table, spec):
    """`table` with its time column, when it holds timestamps, as the text of the spec's time format."""
    import pyarrow as pa

    time = spec.get("time")
    if not time or time["column"] not in table.column_names:
        return table
    at = table.column_names.index(time["column"])
    array = table.column(at).combine_chunks()
    return table.set_column(at, time["column"], _time_text(array, time)) if pa.types.is_timestamp(array.type) else table


def _text_columns(table, spec):
    """{name: text array} of every column, written as the engine reads a file's text (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _timed(table, spec)
    columns = {}
    for name in table.column_names:
        array = table.column(name).combine_chunks()
        if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            separator = spec["columns"].get(name, {}).get("separator")
            if separator is None:
                raise ZooError(f"{WHAT}: column '{name}' holds lists, which the preset's spec does not read as a list "
                               "(no separator): give it as text")
            lists = pc.fill_null(array, pa.scalar([], array.type)).cast(pa.list_(pa.string()))
            array = pc.binary_join(lists, separator)
        columns[name] = spec_reading.as_text(array)
    return columns


def write(rows, spec, path):
    """Writes `rows` into `path` in the format of `spec` (a data spec's dict); returns the number of rows."""
    import pyarrow as pa

    table = as_table(rows)
    if not table.num_rows:
        raise ZooError(f"{WHAT} hold no row")
    source = spec["source"]
    if source["format"] == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
        return table.num_rows
    if source["format"] == "jsonl":
        import json

        with open(path, "w", encoding="utf-8") as stream:
            for row in _timed(table, spec).to_pylist():
                stream.write(json.dumps(row, default=str) + "\n")
        return table.num_rows
    columns = _text_columns(table, spec)
    if not source["header"]:
        missing = [name for name in source["column_names"] if name not in columns]
        if missing:
            raise ZooError(f"{WHAT} lack the column(s) {', '.join(missing)} of the preset's spec (its file has no "
                           f"header; its columns: {', '.join(source['column_names'])})")
        columns = {name: columns[name] for name in source["column_names"]}
    text = pa.table(columns)
    if source["quote"] in ('"', None):
        import pyarrow.csv as pcsv

        options = pcsv.WriteOptions(include_header=source["header"], delimiter=source["delimiter"],
                                    quoting_style="needed" if source["quote"] else "none")
        try:
            pcsv.write_csv(text, path, write_options=options)
        except pa.ArrowInvalid as error:
            raise ZooError(f"{WHAT}: a value holds the delimiter or a line break, which the preset's CSV (without "
                           f"quoting) cannot hold ({str(error).splitlines()[0]})") from None
        return table.num_rows
    import csv

    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream, delimiter=source["delimiter"], quotechar=source["quote"], lineterminator="\n")
        if source["header"]:
            writer.writerow(text.column_names)
        writer.writerows(zip(*(column.to_pylist() for column in text.columns)))
    return table.num_rows


@contextlib.contextmanager
def rows_file(rows, spec):
    """(path, cache folder, number of rows) of `rows` written in a temporary folder (`write`), removed on
    leaving; every ZooError raised inside names the rows by position instead of the file."""
    folder = tempfile.mkdtemp(prefix="zoo-rows-")
    suffix = {"csv": ".csv", "parquet": ".parquet", "jsonl": ".jsonl"}[spec["source"]["format"]]
    path = os.path.join(folder, "rows" + suffix)
    try:
        count = write(rows, spec, path)
        try:
            yield path, os.path.join(folder, "cache"), count
        except ZooError as error:
            raise ZooError(renamed(str(error), path, spec_reading.first_row_line(spec["source"]))) from None
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def renamed(message, path, first):
    """`message` with the temporary file's "PATH, line N" as the row's position and PATH as WHAT."""
    message = re.sub(re.escape(path) + r", line (\d+)", lambda m: f"row {int(m.group(1)) - first} of {WHAT}", message)
    return message.replace(path, WHAT)


def positions(lines, spec):
    """The 0-based positions among the rows given of the temporary file's `lines`."""
    return lines - spec_reading.first_row_line(spec["source"])


def renamed_info(info, path, spec):
    """A reading's info (JSON-like) with the temporary file `path` named as the rows given (`renamed`)."""
    import json

    return json.loads(renamed(json.dumps(info), path, spec_reading.first_row_line(spec["source"])))
