"""`python -m zoo spec draft FILE`: a data spec drafted from a sample of a user's log.

The draft reads the first `sample_rows` rows and guesses, per column: its type (numeric when every
value is a number, a list when values hold a separator such as ^ | ; between several tokens, else
categorical), its cardinality, which column looks like the time (an ISO 8601 text, or numbers in the
range of unix seconds or milliseconds), the label (0/1 values under a name like click or label) and each
categorical column's role (user when it is constant per user, cand when constant per item, else ctx).
Every guess is written into the spec's `notes` ("guess: ...", with the evidence); what the flags gave
is noted "given". With --label, --time, --user and --item the draft trains as it is: the history is
the user's earlier rows carrying the item and its attributes, split by time 80/10/10.
"""

import numpy as np

from zoo.datasets import spec_reading
from zoo.datasets.spec import DataSpec, feature_name
from zoo.errors import ZooError

LABEL_NAMES = ("label", "click", "clicked", "clk", "is_click", "target", "y", "converted", "purchase")
SEPARATORS = ("^", "|", ";")
UNIX_S = (1e8, 1e11)
UNIX_MS = (1e11, 1e14)


def _source_of(path):
    files = spec_reading.source_files(path, "csv" if not str(path).endswith((".parquet", ".pq", ".jsonl", ".json"))
                                      else "parquet" if str(path).endswith((".parquet", ".pq")) else "jsonl")
    first = files[0]
    if first.endswith((".parquet", ".pq")):
        return files, {"format": "parquet"}
    if first.endswith((".jsonl", ".json", ".ndjson")):
        return files, {"format": "jsonl"}
    with open(first, "rb") as stream:
        head = stream.readline().decode("utf-8-sig", "replace")
    delimiter = max((",", "\t", ";", "|"), key=head.count)
    return files, {"format": "csv", "delimiter": delimiter, "quote": '"', "header": True}


def _sample(files, source, sample_rows):
    from zoo.datasets.reading import Repairs

    names = spec_reading.file_columns(files[0], dict(source, column_names=None))
    chunks = spec_reading.read_chunks(files[0], dict(source, column_names=None), names, Repairs(files[0]))
    chunk = next(chunks, None)
    if chunk is None:
        raise ZooError(f"{files[0]}: the file holds no data row")
    rows = min(chunk.rows, sample_rows)
    text = {name: np.asarray(spec_reading.as_text(chunk.columns[name]).to_numpy(zero_copy_only=False)[:rows],
                             dtype=object) for name in names}
    return names, text, chunk


def _numbers(values):
    out = np.full(values.size, np.nan)
    for i, value in enumerate(values):
        if value.strip() == "":
            continue
        try:
            out[i] = float(value)
        except ValueError:
            return None
    return out


def _time_format(name, values):
    present = [v for v in values if v.strip()]
    if not present:
        return None
    numbers = _numbers(np.asarray(present, dtype=object))
    if numbers is not None:
        low, high = np.nanmin(numbers), np.nanmax(numbers)
        if UNIX_S[0] <= low and high < UNIX_S[1]:
            return "unix_s"
        if UNIX_MS[0] <= low and high < UNIX_MS[1]:
            return "unix_ms"
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        for value in present[:200]:
            zoned = value.endswith("Z") or (len(value) > 6 and value[-6] in "+-" and value[-3] == ":")
            pc.cast(pa.array([value]), pa.timestamp("ns", tz="UTC") if zoned else pa.timestamp("ns"))
    except pa.ArrowInvalid:
        return None
    return "iso8601"


def _constant_within(keys, values):
    """Whether `values` are constant within each group of `keys` (and some key repeats)."""
    pairs = {}
    for key, value in zip(keys, values):
        if pairs.setdefault(key, value) != value:
            return False
    return len(pairs) < len(keys)


def draft(path, label=None, time=None, user=None, item=None, sample_rows=10_000, sequence_length=50):
    """The drafted spec (a dict) for the log at `path`; flags name the columns the user knows."""
    files, source = _source_of(path)
    names, text, _ = _sample(files, source, sample_rows)
    rows = len(next(iter(text.values())))
    for flag, value in (("--label", label), ("--time", time), ("--user", user), ("--item", item)):
        if value is not None and value not in names:
            raise ZooError(f"{flag} {value}: {files[0]} has no such column (columns: {', '.join(names)})")
    notes = {}
    kinds = {}
    for name in names:
        values = text[name]
        distinct = len(set(values.tolist()))
        numbers = _numbers(values)
        separator = next((s for s in SEPARATORS if sum(s in v for v in values) > rows // 4), None)
        if numbers is not None:
            whole = np.all(np.isnan(numbers) | (numbers == np.round(numbers)))
            kinds[name] = "categorical" if whole and distinct <= 30 else "numeric"
        elif separator is not None:
            kinds[name] = ("list", separator)
        else:
            kinds[name] = "categorical"
        notes[name] = f"{distinct} distinct of {rows} sampled"
    given = {"label": label, "time": time, "user": user, "item": item}
    if time is None:
        time = next((n for n in names if n not in (label, user, item) and _time_format(n, text[n])
                     and any(w in n.lower() for w in ("time", "ts", "date", "stamp"))), None)
    if label is None:
        label = next((n for n in names if n.lower() in LABEL_NAMES and set(text[n].tolist()) <= {"0", "1", ""}), None)
    spec = {"source": source}
    # the label
    if label is None:
        spec["label"] = {"events": True, "negatives": 1, "seed": 0}
        notes["label"] = "guess: no 0/1 label column found, so every row is an event (a positive) with 1 sampled negative"
    else:
        values = set(text[label].tolist()) - {""}
        if values <= {"0", "1"}:
            spec["label"] = {"column": label}
        else:
            numbers = _numbers(text[label])
            if numbers is None:
                raise ZooError(f"--label {label}: its values are not numbers ({sorted(values)[:3]} ...)")
            top = float(np.nanmax(numbers))
            spec["label"] = {"column": label, "op": ">=", "value": 4 if top == 5 else top}
            notes[label] = f"guess: label = {label} >= {spec['label']['value']} (values {np.nanmin(numbers):g}..{top:g})"
        if "op" not in spec["label"]:
            notes[label] = f"{'given' if given['label'] else 'guess'}: the 0/1 label ({notes[label]})"
    if time is not None:
        fmt = _time_format(time, text[time])
        if fmt is None:
            raise ZooError(f"--time {time}: its values are not unix seconds, milliseconds or ISO 8601 times "
                           f"({text[time][0]!r} ...): write time.format (a strptime format) into the spec")
        spec["time"] = {"column": time, "format": fmt}
        notes[time] = f"{'given' if given['time'] else 'guess'}: the time, read as {fmt}"
    for key in ("user", "item"):
        if locals()[key] is not None:
            spec[key] = locals()[key]
            notes[locals()[key]] += f"; given: the {key} key" if given[key] else f"; guess: the {key} key"
    columns = {}
    skip = {label, time}
    for name in names:
        if name in skip:
            continue
        kind = kinds[name]
        distinct = len(set(text[name].tolist()))
        if isinstance(kind, tuple):
            columns[name] = {"role": "hist", "type": "list", "separator": kind[1]}
            notes[name] = f"guess: a list ({kind[1]}-separated, oldest first), a history"
            continue
        if kind == "numeric":
            numbers = _numbers(text[name])
            skewed = np.nanmin(numbers) >= 0 and np.nanmax(numbers) > 20 * max(np.nanmedian(numbers), 1e-9)
            columns[name] = {"role": "num", "type": "numeric", "log1p": bool(skewed)}
            notes[name] = f"guess: numeric{', log1p (skewed, >= 0)' if skewed else ''}"
            continue
        if distinct == rows and name not in (user, item) and rows > 50:
            notes[name] = "ignored: unique on every sampled row (an id of the row, not a feature)"
            continue
        if name == user:
            role = "user"
        elif name == item:
            role = "cand"
        elif item is not None and _constant_within(text[item].tolist(), text[name].tolist()):
            role = "cand"
            notes[name] += "; guess: an attribute of the item (constant per item), role cand"
        elif user is not None and _constant_within(text[user].tolist(), text[name].tolist()):
            role = "user"
            notes[name] += "; guess: a user attribute (constant per user), role user"
        else:
            role = "ctx"
            notes[name] += "; guess: context (varies per row), role ctx"
        columns[name] = {"role": role}
        if distinct > rows // 2 and rows >= 1000 and name not in (user, item):
            columns[name]["hash_buckets"] = 1 << 18
            notes[name] += "; guess: unbounded cardinality, hashed into 262,144 bins"
    spec["columns"] = columns
    lists = [n for n, o in columns.items() if o.get("type") == "list"]
    if user is not None and time is not None and item is not None and not lists:
        fields = [feature_name(item)] + [feature_name(n) for n, o in columns.items()
                                         if o["role"] == "cand" and n != item and "hash_buckets" not in o]
        spec["history"] = {"from": "log", "fields": fields}
        notes["history"] = ("the user's strictly earlier rows carry " + ", ".join(fields)
                            + ("; only the clicked ones? add \"only\": {\"column\": \"%s\", \"op\": \"==\", \"value\": 1}"
                               % label if label and "op" not in spec["label"] else ""))
    elif lists:
        spec["history"] = {"from": "columns"}
    spec["sequence_length"] = sequence_length
    spec["split"] = {"by": "time", "fractions": [0.8, 0.1, 0.1]} if time else {
        "by": "random", "fractions": [0.8, 0.1, 0.1], "seed": 0}
    notes["split"] = "by time 80/10/10: nothing after a validation or test row's time trains the model" if time else \
        "guess: a seeded random split (no time column was found)"
    spec["notes"] = notes
    return DataSpec(spec).to_dict()
