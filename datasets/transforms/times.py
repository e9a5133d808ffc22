"""A time column -> unix seconds, and the hour and weekday derived from it.

Formats: unix seconds, unix milliseconds, ISO 8601 (YYYY-MM-DD[(T| )HH:MM[:SS[.f]]][Z|+-HH[:]MM], UTC
without a zone), a Parquet/JSON timestamp, or a strptime format (batch form only: TensorFlow has no
strptime op, so such a spec cannot be served raw). A time is read from 1990-01-01 to 2100-01-01
(excluded): outside it, the time.format is wrong (unix_ms read as unix seconds puts every row in 1970).

    hour    = (local // 3600) % 24 + 1          ids 1..24
    weekday = (local // 86400 + 3) % 7 + 1      ids 1..7, 1 = Monday     (local = unix s + utc_offset_hours)
"""

import numpy as np

from zoo.datasets.spec_reading import as_numbers, as_text
from zoo.errors import ZooError

MAX_TIME = 2**63 // 10**9  # unix seconds: 2262-04-11 (nanoseconds in int64); a later time is refused (or dropped)
EARLIEST_TIME = 631_152_000  # 1990-01-01 UTC, in unix seconds: an earlier time is the wrong time.format
LATEST_TIME = 4_102_444_800  # 2100-01-01 UTC: a time at or after it is the wrong time.format
TIME_WHAT = {"unix_s": "unix seconds", "unix_ms": "unix milliseconds", "iso8601": "an ISO 8601 time"}


def _utc(seconds):
    """A unix time as its UTC date and time ("1970-01-20 16:13:20 UTC"); one beyond the years 1 .. 9999 as
    its year."""
    import datetime

    if not -62_135_596_800 <= seconds < 253_402_300_800:
        return f"the year {1970 + seconds / 31_556_952:,.0f}"
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=int(seconds))
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


# ---------------------------------------------------------------------------------------- batch form
def read(chunk, time, repairs, alive):
    """(int64 unix seconds [n], kept [n] bool): a time of a row still `alive` (not dropped already) that
    does not parse, or (EARLIEST_TIME, LATEST_TIME) reads before 1990-01-01 or from 2100-01-01 on (no event
    log's time: unix_ms on unix seconds puts every row in January 1970), is an error naming the column, the
    format, the value and what it reads as, or with on_error "drop" dropped (counted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column, fmt = time["column"], time["format"]
    array = chunk.columns[column]
    other = None  # unix formats: (the other unit, each value read in it), a hint for a time outside the range
    if pa.types.is_timestamp(array.type):
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        values = pc.cast(array.cast(pa.timestamp("ns", tz=array.type.tz)), pa.int64()).to_numpy(zero_copy_only=False)
        readings = np.where(valid, np.nan_to_num(values) // 10**9, 0).astype(np.float64)
    elif fmt in ("unix_s", "unix_ms"):
        numbers = np.full(chunk.rows, np.nan)
        try:
            numbers = as_numbers(chunk, column)
        except ZooError:
            if time["on_error"] == "error":
                raise
            text = as_text(array).to_numpy(zero_copy_only=False)
            numbers = np.array([_float_or_nan(t) for t in text])
        valid = ~np.isnan(numbers)
        scale = 1000 if fmt == "unix_ms" else 1
        readings = np.floor(np.nan_to_num(numbers) / scale)  # (float: 1e20 stays 1e20, not an int64 overflow)
        other = ("unix_s", np.floor(np.nan_to_num(numbers))) if fmt == "unix_ms" else (
            "unix_ms", np.floor(np.nan_to_num(numbers) / 1000))
    else:
        text = pc.utf8_trim_whitespace(as_text(array))
        if fmt == "iso8601":
            zoned = pc.match_substring_regex(text, r"(Z|[+-]\d\d:?\d\d)$")
            parsed = np.zeros(chunk.rows, np.int64)
            valid = np.zeros(chunk.rows, bool)
            for mask, kind in ((zoned, pa.timestamp("ns", tz="UTC")), (pc.invert(zoned), pa.timestamp("ns"))):
                index = np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))
                if not index.size:
                    continue
                subset = text.take(pa.array(index))
                try:
                    values = pc.cast(pc.cast(subset, kind), pa.int64()).to_numpy(zero_copy_only=False)
                    parsed[index], valid[index] = values // 10**9, True
                except pa.ArrowInvalid:
                    for i, value in zip(index, subset.to_pylist()):
                        try:
                            one = pc.cast(pa.array([value]), kind).cast(pa.int64())[0].as_py()
                            parsed[i], valid[i] = one // 10**9, True
                        except pa.ArrowInvalid:
                            pass
            readings = parsed.astype(np.float64)
        else:
            parsed = pc.strptime(text, format=fmt, unit="s", error_is_null=True)
            valid = np.asarray(parsed.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            readings = np.where(valid, pc.cast(pc.fill_null(parsed.cast(pa.int64()), 0), pa.int64())
                                .to_numpy(zero_copy_only=False), 0).astype(np.float64)
    if other is None:  # (a text or timestamp outside 1970 .. 2262 does not parse into nanoseconds: unreadable)
        valid = valid & (readings >= 0) & (readings < MAX_TIME)
    within = valid & (readings >= EARLIEST_TIME) & (readings < LATEST_TIME)
    unreadable = ~valid & alive
    outside = valid & ~within & alive
    bad = unreadable | outside
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        if time["on_error"] == "error":
            shown = str(chunk.columns[column].slice(index, 1).to_pylist()[0])[:40]
            if unreadable[index]:
                chunk.error(index, column, f"should be {TIME_WHAT.get(fmt, 'a time ' + repr(fmt))} from 1970 to 2262, "
                                           f"found {shown!r} (or set time.on_error to 'drop')")
            hint = ""
            if other is not None and EARLIEST_TIME <= other[1][index] < LATEST_TIME:
                hint = f" (as {other[0]} it reads {_utc(other[1][index])})"
            chunk.error(index, column, f"(time.format {fmt}) holds {shown!r}, which reads as {_utc(readings[index])}, "
                                       f"outside 1990-01-01 .. 2100-01-01: check time.format{hint} "
                                       "(or set time.on_error to 'drop')")
        repairs.drop(f"dropped {{n}} row(s) with an unreadable '{column}'", int(unreadable.sum()))
        repairs.drop(f"dropped {{n}} row(s) whose '{column}' reads outside 1990-01-01 .. 2100-01-01",
                     int(outside.sum()))
    return np.where(within, readings, 0).astype(np.int64), ~bad


def _float_or_nan(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def derived(name, local):
    """The derived feature `name` ("hour" or "weekday") of local unix seconds (NumPy or TensorFlow integers)."""
    return (local // 3600) % 24 + 1 if name == "hour" else (local // 86400 + 3) % 7 + 1


# ---------------------------------------------------------------------------------------- graph form
def _days_from_civil(year, month, day):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm), int64 tensors."""
    import tensorflow as tf

    year = year - tf.cast(month <= 2, tf.int64)
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _iso_seconds(text):
    """(int64 unix seconds, valid bool) of ISO 8601 texts: YYYY-MM-DD[(T| )HH:MM[:SS[.f]]][Z|+-HH[:]MM];
    without a zone the time is UTC (as the engine reads it); a date or clock that does not exist (month 13,
    February 30, 25:00) is not valid."""
    import tensorflow as tf

    text = tf.strings.strip(text)
    shape = r"\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d:?\d\d)?"
    valid = tf.strings.regex_full_match(text, shape)
    safe = tf.where(valid, text, "1970-01-01")

    def number(start, length):
        part = tf.strings.substr(safe, start, length)
        return tf.strings.to_number(tf.where(tf.equal(part, ""), "0", part), tf.int64)

    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    has_clock = tf.strings.length(safe) >= 16
    clock = tf.where(has_clock, safe, "1970-01-01T00:00:00")
    hour = tf.strings.to_number(tf.strings.substr(clock, 11, 2), tf.int64)
    minute = tf.strings.to_number(tf.strings.substr(clock, 14, 2), tf.int64)
    has_seconds = tf.strings.regex_full_match(safe, r".{16}:\d\d.*")
    second = tf.where(has_seconds, tf.strings.to_number(
        tf.strings.substr(tf.where(has_seconds, safe, "1970-01-01T00:00:00"), 17, 2), tf.int64), 0)
    zone = tf.strings.regex_replace(safe, r"^.*?([+-]\d\d):?(\d\d)$", r"\1\2")
    zoned = tf.strings.regex_full_match(safe, r".*[+-]\d\d:?\d\d") & has_clock
    zone = tf.where(zoned, zone, "+0000")
    sign = tf.where(tf.strings.substr(zone, 0, 1) == "-", tf.constant(-1, tf.int64), 1)
    offset = sign * (tf.strings.to_number(tf.strings.substr(zone, 1, 2), tf.int64) * 3600
                     + tf.strings.to_number(tf.strings.substr(zone, 3, 2), tf.int64) * 60)
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    # a real calendar date and clock, as the engine's reader requires ("2024-13-45" is no time)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = tf.gather(tf.constant([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], tf.int64),
                     tf.clip_by_value(month - 1, 0, 11)) + tf.cast(leap & (month == 2), tf.int64)
    real = (month >= 1) & (month <= 12) & (day >= 1) & (day <= days) & (hour < 24) & (minute < 60) & (second < 60)
    return seconds, valid & real


def parse_times(text, fmt):
    """(int64 unix seconds, valid bool) of time texts in the spec's format; valid from 1990-01-01 to
    2100-01-01 (excluded), the window the engine reads (EARLIEST_TIME, LATEST_TIME)."""
    import tensorflow as tf

    from zoo.datasets.transforms.numeric import parsed_numbers

    if fmt == "iso8601":
        seconds, valid = _iso_seconds(text)
        return seconds, valid & (seconds >= EARLIEST_TIME) & (seconds < LATEST_TIME)
    scale = 1000.0 if fmt == "unix_ms" else 1.0
    values = parsed_numbers(text) / scale
    valid = tf.math.is_finite(values) & (values >= EARLIEST_TIME) & (values < LATEST_TIME)  # (NaN compares false)
    return tf.cast(tf.floor(tf.where(valid, values, 0.0)), tf.int64), valid
