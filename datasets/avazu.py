"""Avazu mobile ads (the Kaggle train CSV: id, click, hour (YYMMDDHH), C1, banner_pos, site_*, app_*,
device_*, C14..C21). Every field becomes an id: device_* -> user_ (Avazu's device is its user), hour
(and the bars fields derived from it) -> ctx_, the ad/site/app fields and C1, C14..C21 -> cand_ ([B, 1],
the scored impression). An empty field is its own value.

Protocols:
- `deres` (DeRes, following AutoInt): the 22 categorical fields (all but id and click, hour included);
  a field with more than `max_vocabulary` distinct training values is hashed into that many buckets
  (Feature.hashed), the others get a vocabulary. Split 80/20 by time: the original file is in time
  order, so the first 80% of the data rows (blank lines and a truncated last row are not rows) train and
  the last 20% are split in two halves, validation then test;
  a row whose hour goes back in time is an error (the split would leak the future).
- `bars` (BARS Avazu_x4): id dropped; hour -> hour of day, weekday and weekend (ctx_hour, ctx_weekday,
  ctx_weekend); categories with fewer than `min_count` training occurrences -> OOV; a seeded random
  8:1:1 split.
"""

import datetime

from zoo.datasets import preprocess, tabular
from zoo.datasets.reading import count_rows, find_file
from zoo.feature import Feature
from zoo.schema import Schema

HEADER = (
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id",
    "app_domain", "app_category", "device_id", "device_ip", "device_model", "device_type",
    "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
)
FIELDS = HEADER[3:]  # categorical fields besides hour
PROTOCOLS = {
    "deres": "DeRes/AutoInt: 22 categorical fields, >max_vocabulary values hashed, 80/20 time split",
    "bars": "BARS Avazu_x4: id dropped, hour -> hour/weekday/weekend, min category count, seeded 8:1:1",
}
DEFAULT_PROTOCOL = "deres"
OPTIONS = {
    "deres": {"max_vocabulary": 100_000, "embedding_dim": 16},
    "bars": {"min_count": 2, "embedding_dim": 16, "seed": 2019},
}
FILES = ("train", "train.csv", "avazu_sample.txt")


def raw_files(path, protocol):
    return [find_file(path, FILES, "avazu")]


def _key(field):
    """The contract key of a field: device_* -> user_, hour/weekday/weekend -> ctx_, the rest cand_."""
    field = field.lower()
    if field.startswith("device_"):
        return f"user_{field}"
    return f"ctx_{field}" if field in ("hour", "weekday", "weekend") else f"cand_{field}"


def _hour(text, line, repairs):
    """YYMMDDHH -> datetime (a ZooError naming the line when it is not one)."""
    try:
        return datetime.datetime.strptime(text, "%y%m%d%H")
    except ValueError:
        repairs.error(line, f"column 'hour' should be YYMMDDHH, found {text[:40]!r}")


def _parse(protocol):
    last = {"hour": None, "line": 0}

    def parse(line, fields, repairs):
        if line <= last["line"]:  # a new pass over the file
            last["hour"] = None
        last["line"] = line
        click = fields[1].strip()
        if click == "":
            repairs.drop("dropped {n} row(s) with an empty click")
            return None
        if click not in ("0", "1"):
            repairs.error(line, f"column 'click' should be 0 or 1, found {click[:40]!r}")
        hour = _hour(fields[2].strip(), line, repairs)
        values = {_key(name): text.strip() for name, text in zip(FIELDS, fields[3:])}
        if protocol == "deres":
            if last["hour"] is not None and hour < last["hour"]:
                repairs.error(line, "rows are not in time order (hour goes back); deres splits by row order")
            last["hour"] = hour
            values["ctx_hour"] = fields[2].strip()
        else:
            values["ctx_hour"] = str(hour.hour)
            values["ctx_weekday"] = str(hour.weekday())
            values["ctx_weekend"] = str(int(hour.weekday() >= 5))
        return values, float(click)

    return parse


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    total = count_rows(path, ",", len(HEADER), header=HEADER)
    names = ["hour"] + [f.lower() for f in FIELDS]
    if protocol == "bars":
        names += ["weekday", "weekend"]
    encoders = {}
    for name in names:
        if protocol == "deres":
            table = preprocess.Vocabulary(1, max_size=options["max_vocabulary"])
        else:
            table = preprocess.Vocabulary(options["min_count"])
        encoders[_key(name)] = tabular.Ids(table)
    if protocol == "deres":
        split_of = tabular.order_split(total, (0.8, 0.1, 0.1))
    else:
        split_of = tabular.random_split(total, (0.8, 0.1, 0.1), options["seed"])
    def make_schema():
        return Schema(
            features=[
                Feature(key.split("_", 1)[1], key.split("_", 1)[0], e.size, options["embedding_dim"],
                        hashed=e.table.hashed is not None)
                for key, e in encoders.items()
            ]
        )

    tabular.build_table(
        path, delimiter=",", num_fields=len(HEADER), header=HEADER, parse=_parse(protocol),
        split_of=split_of, encoders=encoders, out_dir=out_dir, make_schema=make_schema, verbose=verbose,
    )


def load(path, **kwargs):
    """`zoo.datasets.load("avazu", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("avazu", path, **kwargs)
