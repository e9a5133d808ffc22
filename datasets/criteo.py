"""Criteo display ads (label, I1..I13 counts, C1..C26 hashed categories).

Accepted files: the original tab-separated train.txt (no header) or a comma-separated file with the
header label,I1..I13,C1..C26 (DeepCTR's sample); the delimiter is read from the first line. An empty
numeric is missing; an empty categorical is its own value ("missing"). There is no date column: the
rows are in time order, as in the original file.

Every field becomes a cand_ id ([B, 1]: the fields of the impression being scored; the fields are
anonymised, so none can be told to be user or context), no num_ features. Protocols:
- `deres` (DeRes, following DCN-v2): missing numerics -> the field's training mean of log(1 + x)
  (sign kept for Criteo's few negative values), then 10 equal-frequency buckets fitted on the training
  split (cand_i1..cand_i13); categories with fewer than `min_count` training occurrences -> OOV.
  Split by row order: the first 6/7 of the data rows (days 1-6) train, the last 1/7 (day 7) split in
  two halves, validation then test (DCN-v2 splits day 7 into validation and test). Blank lines and a
  truncated last row are not data rows, so they never move the boundaries (an extra quiet pass counts
  the rows first).
- `bars` (BARS Criteo_x4): missing numerics -> 0; numeric x > 2 -> floor(ln(x)^2), else int(x), used as
  a category; categories (both kinds) with fewer than `min_count` training occurrences -> OOV; a
  seeded random 8:1:1 split.
"""

import math

from zoo.datasets import preprocess, tabular
from zoo.datasets.reading import count_rows, find_file, first_line
from zoo.feature import Feature
from zoo.schema import Schema

NUMERIC = tuple(f"I{i}" for i in range(1, 14))
CATEGORICAL = tuple(f"C{i}" for i in range(1, 27))
HEADER = ("label",) + NUMERIC + CATEGORICAL
PROTOCOLS = {
    "deres": "DeRes/DCN-v2: mean-filled log numerics in 10 equal-frequency buckets, days 1-6 train, day 7 val/test",
    "bars": "BARS Criteo_x4: floor(ln(x)^2) numerics as categories, min category count, seeded 8:1:1 split",
}
DEFAULT_PROTOCOL = "deres"
OPTIONS = {
    "deres": {"min_count": 10, "num_buckets": 10, "embedding_dim": 16, "seed": 0},
    "bars": {"min_count": 10, "embedding_dim": 16, "seed": 2019},
}
FILES = ("train.txt", "train.csv", "criteo_sample.txt", "dac_sample.txt")


def raw_files(path, protocol):
    return [find_file(path, FILES, "criteo")]


def _parse(protocol):
    def parse(line, fields, repairs):
        label = fields[0].strip()
        if label == "":
            repairs.drop("dropped {n} row(s) with an empty label")
            return None
        if label not in ("0", "1"):
            repairs.error(line, f"column 'label' should be 0 or 1, found {label[:40]!r}")
        values = {}
        for name, text in zip(NUMERIC, fields[1:14]):
            text = text.strip()
            x = math.nan if text == "" else repairs.number(text, line, name)
            if protocol == "deres":
                values[f"cand_{name.lower()}"] = x if math.isnan(x) else preprocess.log_count(x)
            else:
                values[f"cand_{name.lower()}"] = preprocess.bars_numeric(0.0 if math.isnan(x) else x)
        for name, text in zip(CATEGORICAL, fields[14:]):
            values[f"cand_{name.lower()}"] = text.strip()
        return values, float(label)

    return parse


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    head = first_line(path)
    delimiter = "\t" if "\t" in head else ","
    has_header = head.split(delimiter)[0].strip().lower() == "label"
    total = count_rows(path, delimiter, len(HEADER), header=HEADER if has_header else None)
    encoders = {}
    for name in NUMERIC:
        key = f"cand_{name.lower()}"
        if protocol == "deres":
            encoders[key] = tabular.Buckets(options["num_buckets"], seed=options["seed"])
        else:
            encoders[key] = tabular.Ids(preprocess.Vocabulary(options["min_count"]))
    for name in CATEGORICAL:
        encoders[f"cand_{name.lower()}"] = tabular.Ids(preprocess.Vocabulary(options["min_count"]))
    if protocol == "deres":
        split_of = tabular.order_split(total, (6 / 7, 1 / 14, 1 / 14))
    else:
        split_of = tabular.random_split(total, (0.8, 0.1, 0.1), options["seed"])

    def make_schema():
        return Schema(
            features=[
                Feature(key[5:], "cand", encoder.size, options["embedding_dim"])
                for key, encoder in encoders.items()
            ]
        )

    tabular.build_table(
        path, delimiter=delimiter, num_fields=len(HEADER), header=HEADER if has_header else None,
        parse=_parse(protocol), split_of=split_of, encoders=encoders, out_dir=out_dir,
        make_schema=make_schema, verbose=verbose,
    )


def load(path, **kwargs):
    """`zoo.datasets.load("criteo", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("criteo", path, **kwargs)
