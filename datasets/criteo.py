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
  truncated last row are not data rows, so they never move the boundaries.
- `bars` (BARS Criteo_x4): missing numerics -> 0; numeric x > 2 -> floor(ln(x)^2), else int(x), used as
  a category; categories (both kinds) with fewer than `min_count` training occurrences -> OOV; a
  seeded random 8:1:1 split.

Both protocols are data specs (`spec(protocol, options)`) built by the data-spec engine
(zoo/datasets/spec_engine.py): one pyarrow read of the file, vectorised fits. The fit is kept as
preprocessing.json, so a Criteo preset also scores new raw rows (scoring mode, split "all").
"""

from zoo.datasets.reading import find_file, first_line

NUMERIC = tuple(f"I{i}" for i in range(1, 14))
CATEGORICAL = tuple(f"C{i}" for i in range(1, 27))
HEADER = ("label",) + NUMERIC + CATEGORICAL
PROTOCOLS = {
    "deres": "DeRes/DCN-v2: mean-filled log numerics in 10 equal-frequency buckets, days 1-6 train, day 7 val/test",
    "bars": "BARS Criteo_x4: floor(ln(x)^2) numerics as categories, min category count, seeded 8:1:1 split",
}
DEFAULT_PROTOCOL = "deres"
APPLIES_PREPROCESSING = ("deres", "bars")  # protocols whose fit can be applied to new rows (scoring mode)
OPTIONS = {
    "deres": {"min_count": 10, "num_buckets": 10, "embedding_dim": 16, "seed": 0},
    "bars": {"min_count": 10, "embedding_dim": 16, "seed": 2019},
}
FILES = ("train.txt", "train.csv", "criteo_sample.txt", "dac_sample.txt")


def raw_files(path, protocol):
    return [find_file(path, FILES, "criteo")]


def spec(protocol, options, delimiter=",", header=True):
    """The protocol as a data spec (zoo.datasets.spec): the engine reads and fits it."""
    columns = {}
    for name in NUMERIC:
        if protocol == "deres":
            columns[name] = {"role": "cand", "type": "numeric", "log1p": True, "fill": "mean",
                             "buckets": options["num_buckets"]}
        else:
            columns[name] = {"role": "cand", "type": "numeric", "bars": True, "min_count": options["min_count"]}
    for name in CATEGORICAL:
        columns[name] = {"role": "cand", "min_count": options["min_count"]}
    split = ({"by": "order", "fractions": [6 / 7, 1 / 14, 1 - 6 / 7 - 1 / 14]} if protocol == "deres"
             else {"by": "random", "fractions": [0.8, 0.1, 0.1], "seed": options["seed"]})
    return {
        "source": {"format": "csv", "delimiter": delimiter, "quote": None, "header": header,
                   **({} if header else {"column_names": list(HEADER)})},
        "label": {"column": "label"}, "columns": columns, "embedding_dim": options["embedding_dim"], "split": split,
    }


def build(files, protocol, options, out_dir, verbose, fitted=None):
    from zoo.datasets import spec_engine
    from zoo.errors import ZooError

    if fitted is not None and "spec" not in fitted:
        raise ZooError("the criteo preprocessing carries no data spec (it was not fitted by this zoo's Criteo reader)")
    path = files[0]
    head = first_line(path)
    delimiter = "\t" if "\t" in head else ","
    has_header = head.split(delimiter)[0].strip().lower() == "label"
    spec_engine.build(spec(protocol, options, delimiter, has_header), [path], out_dir, verbose, fitted=fitted,
                      origin=("criteo", protocol, options))


def load(path, **kwargs):
    """`zoo.datasets.load("criteo", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("criteo", path, **kwargs)
