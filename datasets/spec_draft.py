"""`python -m zoo spec draft FILE`: a data spec drafted from a sample of a user's log.

The draft reads the first `sample_rows` rows and guesses, per column: its type (numeric when every
value is a number, unless whole numbers under an id-like name or constant per item: ids; a list, the
behaviour history, when values hold a separator such as ^ | ; between several tokens and the name says
a sequence or history; otherwise multi-valued tags of the row, a tags feature of up to the sample's
largest count of values (at most 32); else categorical), its cardinality, which column looks like the time (an ISO 8601 text, or numbers in the
range of unix seconds or milliseconds), the label (0/1 values under a name like click or label) and each
categorical column's role (user when it is constant per user, cand when constant per item, else ctx).
A column that reveals the label on the sample (`label_evidence`: equal to it, agreeing with it, present on
one class only, or ranking it alone at AUC >= 0.99) is left out, noted "left out: ..." (`left_out` gives
the lines `python -m zoo spec draft` prints). A file is read in bounded pieces: at most MAX_COLUMNS
columns and lines of at most MAX_LINE_BYTES bytes, else one line refuses it before the sample is read, and
at most MAX_SAMPLE_VALUES values (a wide file samples fewer rows, noted "sample").
Every guess is written into the spec's `notes` ("guess: ...", with the evidence); what the flags gave
is noted "given". With --label, --time, --user and --item the draft trains as it is: the history is
the user's earlier rows carrying the item, its attributes and the row's label (feedback), running
statistics (earlier rows, positives, rate) of the user and of the item are features, split by time
80/10/10.
"""

import numpy as np

from zoo.datasets import spec_reading
from zoo.datasets.transforms import labels as label_rules
from zoo.datasets.transforms.times import EARLIEST_TIME, LATEST_TIME
from zoo.datasets.spec import DataSpec, feature_name
from zoo.errors import ZooError

LABEL_NAMES = ("label", "click", "clicked", "clk", "is_click", "target", "y", "converted", "purchase")
SEPARATORS = ("^", "|", ";")
MAX_TAGS = 32  # a drafted tags column keeps at most this many values per row
UNIX_S = (EARLIEST_TIME, LATEST_TIME)  # numbers read as unix seconds: 1990 .. 2100
UNIX_MS = (EARLIEST_TIME * 1000, LATEST_TIME * 1000)  # as unix milliseconds
MAX_COLUMNS = 10_000  # a file of more columns is refused before its sample is read
MAX_LINE_BYTES = 2**20  # a line longer than this (1 MiB) is refused before its sample is read
MAX_SAMPLE_VALUES = 2_000_000  # a wide file samples fewer rows: rows x columns at most this


def _check_lines(path, lines):
    """Refuses, in one line, a text file whose first `lines` lines hold one longer than MAX_LINE_BYTES
    (read MAX_LINE_BYTES + 1 bytes at most at a time: a file of one huge line is never held whole)."""
    try:
        with spec_reading.open_bytes(path) as stream:
            for number in range(1, lines + 1):
                line = stream.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                if len(line.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                    raise ZooError(f"{path}, line {number}: longer than {MAX_LINE_BYTES:,} bytes, the most spec draft "
                                   "reads of a line (spec_draft.MAX_LINE_BYTES): is it a log of rows, one per line?")
    except (OSError, EOFError) as error:
        raise ZooError(f"{path}: cannot be read ({error})") from None


def _check_width(path, names):
    """Refuses, in one line, a file of more than MAX_COLUMNS columns."""
    if len(names) > MAX_COLUMNS:
        raise ZooError(f"{path}: {len(names):,} columns, more than the {MAX_COLUMNS:,} spec draft reads "
                       "(spec_draft.MAX_COLUMNS): is the delimiter right, and is the first line a header?")


def _source_of(path, columns=None, sample_rows=10_000):
    """(files, source): the format from the suffix; a CSV's delimiter from its first line, and its header:
    the first line, unless `columns` names them (a file without a header). A first line with a number
    among its fields is data, not a header: refused in one line asking for --columns. The first
    `sample_rows` lines of a CSV or JSON-lines file are checked first (`_check_lines`)."""
    files = spec_reading.source_files(path, "csv" if not str(path).endswith((".parquet", ".pq", ".jsonl", ".json"))
                                      else "parquet" if str(path).endswith((".parquet", ".pq")) else "jsonl")
    first = files[0]
    if first.endswith((".parquet", ".pq")):
        return files, {"format": "parquet"}
    _check_lines(first, sample_rows + 1)
    if first.endswith((".jsonl", ".json", ".ndjson")):
        return files, {"format": "jsonl"}
    head = spec_reading.first_line(first)
    delimiter = max((",", "\t", ";", "|"), key=head.count)
    if columns is not None:
        fields = head.rstrip("\r\n").split(delimiter)
        if len(columns) != len(fields):
            raise ZooError(f"--columns names {len(columns)} column(s) but the first line of {first} holds "
                           f"{len(fields)}")
        return files, {"format": "csv", "delimiter": delimiter, "quote": '"', "header": False,
                       "column_names": list(columns)}
    numbers = [field for field in head.rstrip("\r\n").split(delimiter) if _is_number(field.strip().strip('"'))]
    if numbers:
        raise ZooError(f"{first}: the first line holds data ({numbers[0]!r} ...), not a header: name the columns "
                       "with --columns a,b,c (in file order)")
    return files, {"format": "csv", "delimiter": delimiter, "quote": '"', "header": True}


def _position_groups(names, label=None):
    """{base: [its columns in order]} of per-position columns: a header name repeated (a, a.1, a.2: numbered
    by spec_reading.unique_names), or 3 or more columns <base>_1 .. <base>_N whose base names a sequence.
    Never a group holding the `label`: its repeats are copies of the label, not a history."""
    import re

    groups = {}
    for name in names:
        repeat = re.fullmatch(r"(.+)\.(\d+)", name)
        if repeat and repeat.group(1) in names:
            groups.setdefault(repeat.group(1), [repeat.group(1)]).append(name)
    for name in names:
        numbered = re.fullmatch(r"(.+?)_?(\d+)", name)
        if numbered and numbered.group(2) == "1" and any(w in numbered.group(1).lower() for w in SEQUENCE_WORDS):
            base, sep = numbered.group(1), name[len(numbered.group(1)):-1]
            members = [f"{base}{sep}{k}" for k in range(1, len(names) + 1) if f"{base}{sep}{k}" in names]
            if len(members) >= 3 and base not in groups and base not in names:
                groups[base] = members
    return {base: members for base, members in groups.items() if label not in members}


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return text != ""


def _sample(files, source, sample_rows):
    """(column names, {name: its texts [rows]}, the sampled Chunk, the rows it could read) of the first
    `sample_rows` rows, or of fewer in a wide file (MAX_SAMPLE_VALUES values in all)."""
    from zoo.datasets.reading import Repairs

    source = dict(source, column_names=source.get("column_names"))
    names = spec_reading.file_columns(files[0], source)  # a repeated header name numbered: a, a.1, a.2
    _check_width(files[0], names)
    sample_rows = min(sample_rows, max(MAX_SAMPLE_VALUES // len(names), 1))
    chunk = spec_reading.first_rows(files[0], source, names, sample_rows, Repairs(files[0]))
    if chunk is None:
        raise ZooError(f"{files[0]}: the file holds no data row")
    text = {name: np.asarray(spec_reading.as_text(chunk.columns[name]).to_numpy(zero_copy_only=False), dtype=object)
            for name in names}
    return names, text, chunk, sample_rows


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


def _zoned(value):
    """Whether an ISO 8601 text carries its zone (Z or +-HH:MM)."""
    return value.endswith("Z") or (len(value) > 6 and value[-6] in "+-" and value[-3] == ":")


def _time_format(name, values):
    """The time format of a column's texts: unix_s or unix_ms when every number reads as a time of 1990 ..
    2100 in that unit (UNIX_S, UNIX_MS: the range the engine accepts, zoo.datasets.transforms.times.EARLIEST_TIME ..
    LATEST_TIME), iso8601 when the texts parse as such, else None."""
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
            pc.cast(pa.array([value]), pa.timestamp("ns", tz="UTC") if _zoned(value) else pa.timestamp("ns"))
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


ID_WORDS = ("category", "cate", "brand", "shop", "seller", "store", "zip", "code", "customer", "campaign", "advertiser")  # whole numbers that name things
SEQUENCE_WORDS = ("seq", "hist", "behav", "click", "sequence", "history", "recent")  # a list that is a history
TRUE = ("1", "yes", "y", "true", "t")  # text labels read as 0/1, lower-cased
FALSE = ("0", "no", "n", "false", "f")
MISSING = ("", "null", "none", "nan", "na", "n/a", "\\n")  # texts (lower-cased, stripped) that say "no value" (\\N: SQL)
LEAK_AUC = 0.99  # a column whose values alone rank the sampled labels this well determines the label
AGREEMENT = 0.95  # a column read as 0/1 that agrees with the label this often (per class, averaged) is a copy
MIN_CLASS_ROWS = 10  # a column's values are judged on samples of at least this many rows of each class
CHANCE = 1e-6  # presence on one class only is evidence when independence would give it a smaller chance


def _auc(scores, labels):
    """The rank AUC of `scores` against 0/1 `labels` (ties averaged); None with one class."""
    from scipy.stats import rankdata

    positives = labels.sum()
    negatives = labels.size - positives
    if not positives or not negatives:
        return None
    ranks = rankdata(scores)
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _sample_labels(label_rule, chunk, rows):
    """float [rows] 0/1 (NaN where empty) of the sampled rows under the drafted label, as the engine reads
    them (zoo.datasets.transforms.labels.read)."""
    from zoo.datasets.reading import Repairs

    sample = spec_reading.Chunk(chunk.file, {label_rule["column"]: chunk.columns[label_rule["column"]].slice(0, rows)},
                                chunk.first_line, rows)
    labels, kept = label_rules.read(sample, label_rule, Repairs(chunk.file))
    return np.where(kept, labels, np.nan).astype(np.float64)


def _stripped(values):
    return np.char.strip(np.asarray(values, dtype=object).astype(str))


def _present(values):
    """bool [n]: the values that hold something (not empty, nor a text of MISSING such as NULL)."""
    return ~np.isin(np.char.lower(_stripped(values)), MISSING)


def single_auc(values, kind, labels):
    """The AUC, max(auc, 1 - auc), at which one column alone ranks the 0/1 `labels` of a sample (None where
    it cannot tell): by its presence (a value or none), numbers (kind "numeric") by value where present, and
    categories of few values (at most max(2, rows / 20): an id would separate its own rows trivially) by
    their sampled positive rate."""
    aucs = [_auc(_present(values).astype(np.float64), labels)]
    if kind == "numeric":
        numbers = _numbers(values)
        if numbers is not None and (~np.isnan(numbers)).sum() > 1:
            aucs.append(_auc(numbers[~np.isnan(numbers)], labels[~np.isnan(numbers)]))
    elif kind == "categorical" and len(set(values.tolist())) <= max(2, values.size // 20):
        _, codes = np.unique(_stripped(values), return_inverse=True)
        rates = np.bincount(codes, weights=labels) / np.bincount(codes)
        aucs.append(_auc(rates[codes], labels))
    aucs = [max(auc, 1 - auc) for auc in aucs if auc is not None]
    return max(aucs) if aucs else None


def _readings(values, rule):
    """Yields (how, float [n]: 1, 0, NaN where not read) of `values` read as 0/1: by the label's `rule` (its op
    and value on this column), by their own values where nearly all (AGREEMENT) are 0/1, yes/no, true/false,
    and, for a column of exactly two values, one of them as 1 (`label_evidence` judges both mappings)."""
    import operator

    text = _stripped(values)
    present = _present(values)
    if "op" in rule:
        ops = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge, ">": operator.gt, "<=": operator.le,
               "<": operator.lt}
        if rule["op"] == "in":
            held = np.isin(text, [v if isinstance(v, str) else f"{v:g}" for v in rule["value"]])
        elif isinstance(rule["value"], str):
            held = ops[rule["op"]](text, rule["value"])
        else:
            numbers = _numbers(values)
            held = None if numbers is None else ops[rule["op"]](np.nan_to_num(numbers), rule["value"])
        if held is not None:
            yield (f"by the label's rule ({rule['op']} {rule['value']!r})",
                   np.where(present, np.asarray(held, dtype=np.float64), np.nan))
    lowered = np.char.lower(text)
    ones, zeros = np.isin(lowered, TRUE), np.isin(lowered, FALSE)
    if present.any() and (ones | zeros)[present].mean() >= AGREEMENT:
        yield "as 0/1", np.where(ones, 1.0, np.where(zeros, 0.0, np.nan))
    two = np.unique(text[present])
    if two.size == 2:  # a flag coded otherwise (5/1, Y/N, a/b): one value as 1 (the other reading is 1 - agreement)
        yield f"as {two[1]!r} = 1, {two[0]!r} = 0", np.where(present, (text == two[1]).astype(np.float64), np.nan)


def _agreement(read, labels):
    """The share of rows where `read` (0/1, NaN where not read) equals the 0/1 `labels`, per class and
    averaged (a constant does not agree with a rare label); None with fewer than MIN_CLASS_ROWS of a class."""
    known = ~np.isnan(read)
    positive, negative = known & (labels == 1), known & (labels == 0)
    if positive.sum() < MIN_CLASS_ROWS or negative.sum() < MIN_CLASS_ROWS:
        return None
    return float((np.mean(read[positive] == 1) + np.mean(read[negative] == 0)) / 2)


def label_evidence(values, kind, rule, label_text, labels):
    """The evidence (a text) that one column reveals the label on a sample, or None. `values`: its texts [n];
    `kind`: "numeric", "categorical" or "tags"; `rule`: the spec's label ({"column"}, or a rule);
    `label_text`: the label column's texts [n]; `labels`: float [n] 0/1, NaN where a row has no label.

    A column reveals the label when it is present (a value, not empty nor MISSING) on rows of one class
    only, k rows, where a column independent of the label would do so with a chance q^k (q: that class's
    share) below CHANCE (a click's time or id, filled only when clicked); and, on samples of MIN_CLASS_ROWS
    rows of each class or more, when it equals the label column, when read as 0/1 (`_readings`) it agrees
    with the label or its opposite on AGREEMENT of the rows (per class, averaged: a renamed copy), or when
    it alone ranks the labels at LEAK_AUC or more (`single_auc`). (Both `spec draft` and a fit judge so.)"""
    known = ~np.isnan(labels)
    values, label_text, labels = values[known], label_text[known], labels[known]
    positives = int(labels.sum())
    negatives = labels.size - positives
    present = _present(values)
    on_positive, on_negative = int((present & (labels == 1)).sum()), int((present & (labels == 0)).sum())
    if present.any() and not (on_positive and on_negative):
        share = (positives if on_positive else negatives) / labels.size
        if share ** int(present.sum()) < CHANCE:
            return (f"present only on {'positive' if on_positive else 'negative'} rows ({on_positive:,} of "
                    f"{positives:,} positives, {on_negative:,} of {negatives:,} negatives)")
    if min(positives, negatives) < MIN_CLASS_ROWS:
        return None
    if np.array_equal(_stripped(values), _stripped(label_text)):
        return f"equal to the label column '{rule['column']}'"
    for how, read in _readings(values, rule):
        agreement = _agreement(read, labels)
        if agreement is not None and max(agreement, 1 - agreement) >= AGREEMENT:
            return (f"agreeing with {'the label' if agreement >= AGREEMENT else 'the opposite of the label'} on "
                    f"{max(agreement, 1 - agreement):.1%} of the sampled rows (per class, averaged) read {how}")
    auc = single_auc(values, kind, labels)
    if auc is not None and auc >= LEAK_AUC:
        return f"ranking the sampled labels at AUC {auc:.3f} by itself"
    return None


def left_out(spec):
    """The lines `python -m zoo spec draft` prints of the columns a draft left out: "left out <column>: <why>"."""
    return [f"left out {name}: {note[len('left out: '):]}" for name, note in spec["notes"].items()
            if note.startswith("left out: ")]


def _check_two_classes(rule, labels, label_text):
    """Refuses a label that is one class on every sampled row (nothing to learn), naming the values seen."""
    known = labels[~np.isnan(labels)]
    if known.size and 0 < known.sum() < known.size:
        return
    one = "positive (1)" if known.size and known.sum() else "negative (0)"
    raise ZooError(f"label {label_rules.rule_text(rule)} is {one} on all {known.size:,} sampled rows with a label, "
                   f"so there is nothing to learn (values of {rule['column']}: {label_rules.seen_values(label_text)}): "
                   "name the positive values with --positive V1,V2")


def draft(path, label=None, time=None, user=None, item=None, sample_rows=10_000, sequence_length=50, positive=None,
          columns=None):
    """The drafted spec (a dict) for the log at `path`; flags name the columns the user knows. `positive`:
    the label column's positive values (a list of texts: label = column in positive); `columns`: the
    names of a CSV's columns in file order, for a file without a header."""
    if columns is not None:
        repeated = sorted({name for name in columns if list(columns).count(name) > 1})
        if repeated:
            raise ZooError(f"--columns names {repeated[0]!r} twice: each column needs its own name")
    files, source = _source_of(path, columns, sample_rows)
    names, text, chunk, readable = _sample(files, source, sample_rows)
    rows = len(next(iter(text.values())))
    for flag, value in (("--label", label), ("--time", time), ("--user", user), ("--item", item)):
        if value is not None and value not in names:
            raise ZooError(f"{flag} {value}: {files[0]} has no such column (columns: {', '.join(names)})")
    if label is not None:
        for flag, key in (("--user", user), ("--item", item), ("--time", time)):
            if key == label:
                raise ZooError(f"--label {label} is also {flag}: the label is what a row's features predict, "
                               "so it cannot be a key or the time")
    notes = {}
    if rows == readable < sample_rows:
        notes["sample"] = (f"the first {rows:,} rows, not {sample_rows:,}: {len(names):,} columns, and the draft "
                           f"reads at most {MAX_SAMPLE_VALUES:,} values (spec_draft.MAX_SAMPLE_VALUES)")
    kinds = {}
    for name in names:
        values = text[name]
        distinct = len(set(values.tolist()))
        numbers = _numbers(values)
        separator = next((s for s in SEPARATORS if sum(s in v for v in values) > rows // 4), None)
        if name in (user, item):
            kinds[name] = "categorical"  # a key is an id whatever its type
        elif numbers is not None:
            whole = np.all(np.isnan(numbers) | (numbers == np.round(numbers)))
            named_id = name.lower().endswith("id") or any(w in name.lower() for w in ID_WORDS)
            attribute = whole and item is not None and name != label and _constant_within(
                text[item].tolist(), values.tolist())
            kinds[name] = "categorical" if whole and (distinct <= 30 or named_id or attribute) else "numeric"
            if whole and distinct > 30 and (named_id or attribute):
                notes[name] = ("guess: integer ids (whole numbers under an id's name)" if named_id else
                               "guess: integer ids (whole numbers constant per item: an attribute such as a category)")
        elif separator is not None and any(w in name.lower() for w in SEQUENCE_WORDS):
            kinds[name] = ("list", separator)
        elif separator is not None:  # tags of the row, not a behaviour history
            counts = np.asarray([sum(1 for t in v.split(separator) if t.strip()) for v in values.tolist()])
            kinds[name] = ("tags", separator, int(min(max(counts.max(), 1), MAX_TAGS)))
            notes[name] = (f"guess: multi-valued ({separator}-separated tags of the row, up to {counts.max()} per row, "
                           f"{counts.mean():.1f} on average), a tags feature of up to {kinds[name][2]} values that "
                           "models read as the mean of their embeddings (not a history: its name does not say "
                           "sequence or history)")
        else:
            kinds[name] = "categorical"
        notes[name] = f"{distinct} distinct of {rows} sampled" + (f"; {notes[name]}" if name in notes else "")
    given = {"label": label, "time": time, "user": user, "item": item}
    if time is None:
        time = next((n for n in names if n not in (label, user, item)
                     and any(w in n.lower() for w in ("time", "ts", "date", "stamp"))
                     and _present(text[n]).all() and _time_format(n, text[n])), None)  # (present on every row)
    if label is None:
        label = next((n for n in names if n.lower() in LABEL_NAMES and set(text[n].tolist()) <= {"0", "1", ""}), None)
    if label is None and positive is not None:
        raise ZooError(f"--positive {','.join(positive)}: no label column to apply it to: name it with --label")
    spec = {"source": source}
    # the label
    if label is None:
        spec["label"] = {"events": True, "negatives": 1, "seed": 0}
        notes["label"] = "guess: no 0/1 label column found, so every row is an event (a positive) with 1 sampled negative"
    elif positive is not None:
        seen = set(v.strip() for v in text[label].tolist()) - {""}
        unseen = [v for v in positive if v not in seen]
        if unseen:
            raise ZooError(f"--positive {','.join(positive)}: {label} has no value {unseen[0]!r} in the first {rows} "
                           f"rows (values: {', '.join(sorted(seen)[:8])})")
        spec["label"] = {"column": label, "op": "in", "value": list(positive)}
        notes[label] = f"given: label = {label} in {list(positive)} (values {', '.join(sorted(seen)[:8])})"
    else:
        values = set(v.strip() for v in text[label].tolist()) - {""}
        lowered = {v.lower() for v in values}
        if values <= {"0", "1"}:
            spec["label"] = {"column": label}
        elif lowered <= set(TRUE + FALSE) and lowered & set(TRUE) and not values <= {"0", "1"}:
            positives = sorted(v for v in values if v.lower() in TRUE)
            spec["label"] = {"column": label, "op": "in", "value": positives}
            notes[label] = f"guess: a yes/no label, positive when {label} is one of {positives}"
        else:
            numbers = _numbers(text[label])
            if numbers is None:
                raise ZooError(f"--label {label}: its values are text ({', '.join(sorted(values)[:4])} ...): name the "
                               "positive ones with --positive V1,V2")
            top = float(np.nanmax(numbers))
            present = numbers[~np.isnan(numbers)]
            binary = np.isin(present, (0, 1))
            if binary.mean() >= 0.99 and (present == 1).any():  # a 0/1 label with a few stray values (a 2: a
                others = sorted(set(present[~binary].tolist()))  # double click?): positive from 1, said so
                spec["label"] = {"column": label, "op": ">=", "value": 1}
                notes[label] = (f"guess: a 0/1 label, label = {label} >= 1: {int((~binary).sum())} of {present.size} "
                                f"sampled rows hold another value ({', '.join(f'{v:g}' for v in others[:4])}), "
                                "read as positive if >= 1; check them")
            elif 0 <= present.min() and present.max() <= 1:  # a probability: where to cut it is the user's call
                raise ZooError(f"label {label} holds probabilities ({present.min():g} .. {present.max():g}), not 0/1: "
                               "choose the threshold and write it into the spec's label, e.g. {\"column\": "
                               f"\"{label}\", \"op\": \">=\", \"value\": 0.5}} (or name the positive values with "
                               "--positive V1,V2)")
            else:
                spec["label"] = {"column": label, "op": ">=", "value": 4 if top == 5 else top}
                notes[label] = (f"guess: label = {label} >= {spec['label']['value']} (values "
                                f"{np.nanmin(numbers):g}..{top:g})")
        if "op" not in spec["label"]:
            notes[label] = f"{'given' if given['label'] else 'guess'}: the 0/1 label ({notes[label]})"
    if time is not None:
        fmt = _time_format(time, text[time])
        if fmt is None:
            raise ZooError(f"--time {time}: its values are not unix seconds or milliseconds of 1990 .. 2100, nor ISO "
                           f"8601 times ({text[time][0]!r} ...): write time.format (a strptime format) into the spec")
        spec["time"] = {"column": time, "format": fmt}
        notes[time] = f"{'given' if given['time'] else 'guess'}: the time, read as {fmt}"
        present = [v.strip() for v in text[time] if v.strip()]
        if fmt == "iso8601" and not any(_zoned(v) for v in present):
            notes[time] += ("; the zone cannot be told (no Z or +HH:MM): read as UTC, so the hour and weekday "
                            "derived from it are UTC's; if these are local times, set time.utc_offset_hours")
        elif fmt != "iso8601" or not all(_zoned(v) for v in present):
            notes[time] += ("; the users' zone cannot be told: the hour and weekday derived from it are UTC's "
                            "unless time.utc_offset_hours says where they are")
    for key in ("user", "item"):
        if locals()[key] is not None:
            spec[key] = locals()[key]
            notes[locals()[key]] += f"; given: the {key} key" if given[key] else f"; guess: the {key} key"
    columns = {}
    groups = _position_groups(names, label)
    skip = {label, time} | {member for members in groups.values() for member in members}
    for base, members in groups.items():  # one column per position: one list, a history
        values = np.concatenate([text[m] for m in members]).astype(str)
        padding = "0" if np.mean(values == "0") > 0.05 and set(values) - {"0", ""} else ""
        columns[base] = {"role": "hist", "type": "list", "positions": len(members), "padding": padding}
        notes[base] = (f"guess: {len(members)} per-position columns ({members[0]} .. {members[-1]}), one list, a "
                       f"history{', padding ' + repr(padding) + ' skipped' if padding else ''}")
    labels = None if label is None else _sample_labels(spec["label"], chunk, rows)
    if labels is not None:
        _check_two_classes(spec["label"], labels, text[label])
    for name in names:
        if name in skip:
            continue
        kind = kinds[name]
        listed = isinstance(kind, tuple) and kind[0] == "list"  # (a key or a history is not judged)
        leak = None if labels is None or name in (user, item) or listed else label_evidence(
            text[name], kind if isinstance(kind, str) else kind[0], spec["label"], text[label], labels)
        if leak is not None:
            notes[name] = (f"left out: {leak}, the label in another form; add it back by hand (with "
                           "\"known_before_label\": true) only if it is known before the label")
            continue
        distinct = len(set(text[name].tolist()))
        if isinstance(kind, tuple) and kind[0] == "list":
            columns[name] = {"role": "hist", "type": "list", "separator": kind[1]}
            notes[name] = f"guess: a list ({kind[1]}-separated, oldest first), a history"
            continue
        if kind == "numeric":
            numbers = _numbers(text[name])
            skewed = np.nanmin(numbers) >= 0 and np.nanmax(numbers) > 20 * max(np.nanmedian(numbers), 1e-9)
            columns[name] = {"role": "num", "type": "numeric", "log1p": bool(skewed), "scale": "standardize"}
            notes[name] = f"guess: numeric{', log1p (skewed, >= 0)' if skewed else ''}, standardised"
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
        if isinstance(kind, tuple):  # tags
            columns[name].update(type="tags", separator=kind[1], max_tags=kind[2])
        elif distinct > rows // 2 and rows >= 1000 and name not in (user, item):
            columns[name]["hash_buckets"] = 1 << 18
            notes[name] += "; guess: unbounded cardinality, hashed into 262,144 bins"
    lists = [n for n, o in columns.items() if o.get("type") == "list"]
    if item is None:  # a tabular log (or one whose history is a list column): the row's fields describe what is scored
        taken = [n for n, o in columns.items() if o["role"] == "ctx"]
        for name in taken:
            columns[name]["role"] = "cand"
        if taken:
            notes["item"] = (f"no item column given or found: the row's categorical fields ({', '.join(taken[:6])}"
                             f"{' ...' if len(taken) > 6 else ''}) are taken as the candidate's attributes (role cand), "
                             "so the interaction models (fm, deepfm, dcnv2, autoint, fibinet) train; sequence models "
                             "need --user, --time and --item")
    spec["columns"] = columns
    if user is not None and time is not None and item is not None and not lists:
        fields = [feature_name(item)] + [feature_name(n) for n, o in columns.items() if o["role"] == "cand" and n != item
                                         and "hash_buckets" not in o and o.get("type") != "tags"]
        kinds_of_label = set(text[label].tolist()) - {""} if label is not None else set()
        if label is not None and spec["label"].get("op") == "in" and len(kinds_of_label) > 2 and len(kinds_of_label) <= 30:
            columns[label] = {"role": "hist"}  # an event kind: each earlier row's kind, richer than its label
            fields.append(feature_name(label))
            notes[label] += f"; each earlier row's {label} ({', '.join(sorted(kinds_of_label))}) is a history attribute"
        spec["history"] = {"from": "log", "fields": fields, "feedback": label is not None}
        notes["history"] = ("the user's strictly earlier rows carry " + ", ".join(fields)
                            + (" and their label (hist_feedback: what the user did with what they were shown)"
                               if label is not None else ""))
    elif lists:
        spec["history"] = {"from": "columns"}
    keys = [key for key in (user if spec.get("history", {}).get("feedback") else None, item)
            if key is not None and label is not None and time is not None]
    if keys:
        spec["statistics"] = {"keys": keys}
        notes["statistics"] = ("running counts per " + " and per ".join(keys) + ": earlier rows, earlier positives and "
                               "a smoothed rate, from rows strictly earlier in time (<key>_seen/_positives/_rate)")
        attributes = [n for n, o in columns.items() if o["role"] == "cand" and n != item and "hash_buckets" not in o
                      and o.get("type") != "tags"]
        if user in keys and attributes:
            notes["statistics"] += (f"; on request, a pair: add [\"{user}\", \"{attributes[0]}\"] to keys for the user's "
                                    f"earlier rows of the candidate's {attributes[0]} (counted from the history)")
    spec["sequence_length"] = sequence_length
    if time:
        spec["split"] = {"by": "time", "fractions": [0.8, 0.1, 0.1]}
        notes["split"] = "by time 80/10/10: nothing after a validation or test row's time trains the model"
    elif user:
        spec["split"] = {"by": "held_out_users", "fractions": [0.8, 0.1, 0.1], "seed": 0}
        notes["split"] = (f"by held-out users 80/10/10 (seeded): no time column was found, so each {user}'s rows "
                          "stay in one split and validation and test users are unseen in training (a random split "
                          "would put a user's rows on both sides); give --time to split by time")
    else:
        spec["split"] = {"by": "random", "fractions": [0.8, 0.1, 0.1], "seed": 0}
        notes["split"] = ("guess: a seeded random split (no time column and no user key were found: a user's or an "
                          "item's rows sit on both sides; give --time or --user)")
    spec["notes"] = notes
    return DataSpec(spec).to_dict()
