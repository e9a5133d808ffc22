"""Avazu mobile ads (the Kaggle train CSV: id, click, hour (YYMMDDHH), C1, banner_pos, site_*, app_*,
device_*, C14..C21). Every field becomes an id: device_* -> user_ (Avazu's device is its user), hour
(and the bars fields derived from it) -> ctx_, the ad/site/app fields and C1, C14..C21 -> cand_ ([B, 1],
the scored impression). An empty field is its own value. The file is read by `events.read_log` (pyarrow,
in blocks, under zoo.datasets.reading's rules), each distinct value parsed once (zoo.datasets.tabular).

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
import os

import numpy as np

from zoo.datasets import events, tabular
from zoo.datasets.reading import Repairs, find_file
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


def _hour(text):
    """YYMMDDHH -> datetime, or None when it is not one."""
    try:
        return datetime.datetime.strptime(text, "%y%m%d%H")
    except ValueError:
        return None


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    repairs = Repairs(path)
    columns = {name: None if name == "id" else "text" for name in HEADER}
    data, tokens = events.read_log(path, ",", columns, repairs, header=HEADER, lines=True)
    total = data["click"].size  # every data row has its place in the split, one with an empty click too
    if protocol == "deres":
        split = tabular.order_split(total, (0.8, 0.1, 0.1))
    else:
        split = tabular.random_split(total, (0.8, 0.1, 0.1), options["seed"])
    click = tabular.zero_one(tokens["click"], data["click"])
    kept = click != tabular.EMPTY
    hours = tabular.per_token(tokens["hour"], _hour)  # a datetime (or None) per distinct hour

    def found(name, row):
        return tabular.shown(tokens[name], data[name][row])

    checks = [
        (kept & (click == tabular.OTHER), lambda row: f"column 'click' should be 0 or 1, found {found('click', row)}"),
        (kept & np.equal(hours, None)[data["hour"]],
         lambda row: f"column 'hour' should be YYMMDDHH, found {found('hour', row)}"),
    ]
    if protocol == "deres":  # split by row order: a row whose hour goes back would see the future in training
        hour = np.array([0 if h is None else h.toordinal() * 24 + h.hour for h in hours])[data["hour"]]
        rows = np.flatnonzero(kept)
        back = np.zeros(total, bool)
        back[rows[1:][np.diff(hour[rows]) < 0]] = True
        checks.append((back, lambda row: "rows are not in time order (hour goes back); deres splits by row order"))
    tabular.first_fault(repairs, data["line"], checks)
    repairs.tally([("drop", "dropped {n} row(s) with an empty click", ~kept)])

    values = [(_key(name), list(tokens[name].index), data[name]) for name in ("hour",) + FIELDS]
    if protocol == "bars":  # hour -> hour of day, weekday, weekend
        derive = {"hour": lambda h: h.hour, "weekday": lambda h: h.weekday(),
                  "weekend": lambda h: int(h.weekday() >= 5)}
        derived = [(f"ctx_{name}", [str(value(h)) if h else "" for h in hours], data["hour"])
                   for name, value in derive.items()]
        values = derived[:1] + values[1:] + derived[1:]
    limit = {"max_size": options["max_vocabulary"]} if protocol == "deres" else {"min_count": options["min_count"]}
    train = kept & (split == 0)
    features, schema = {}, []
    for key, names, codes in values:
        (features[key],), size, hashed = tabular.fit_ids([(names, codes, train)], **limit)
        group, name = key.split("_", 1)
        schema.append(Feature(name, group, size, options["embedding_dim"], hashed=hashed))
    features["labels"] = click.astype(np.float32)
    repairs.finish(int(kept.sum())).report()
    info = {"repairs": repairs.summary(), "accounting": {os.path.basename(path): repairs.accounting()}}
    tabular.write(out_dir, Schema(features=schema), np.where(kept, split, -1), features, info)


def load(path, **kwargs):
    """`zoo.datasets.load("avazu", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("avazu", path, **kwargs)
