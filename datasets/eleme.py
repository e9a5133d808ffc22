"""Eleme (Ele.me food delivery, Tianchi dataset 131, as used by SUAN §4.1): one row per exposure with
user, item (shop/food) and context fields and behaviour lists of up to 50 earlier behaviours.

No public sample exists here, so the format is this module's reading of the SUAN authors' schema
(their data_struct.json: user, item and context fields plus the behaviour lists), with the Tianchi
column names: a comma-separated file with a header holding at least COLUMNS (other columns, e.g.
price_list or rank_7, are ignored and listed in the info). List columns are `list_separator`-separated
(";"), oldest behaviour first, all lists of a row of equal length; `times` is the exposure's unix time
and `timediff_list` holds (times - behaviour time) in seconds. `write_simulated` writes rows of this
format from a BehaviourSimulator (for tests and examples).

Protocol `suan`: hist_<field> = the last `sequence_length` behaviours, hist_time = times - timediff;
behaviours not strictly before their exposure (timediff <= 0) are removed and counted, so nothing at
or after the label's time reaches its features. Shop/item/category/food/brand/aoi/geohash6 share one
vocabulary between behaviours and candidates, fitted on the training rows (behaviours and candidates).
num_ features = log(1 + x) of the user statistics (missing -> the training mean, counted). Split by
time (`times`) in whole days (UTC+8), about 80/10/10, the last day always test.
"""

import collections
import math

import numpy as np

from zoo.datasets import preprocess, tabular
from zoo.datasets.reading import Repairs, find_file, first_line, read_rows
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema

PROTOCOLS = {"suan": "SUAN: 50-long behaviour lists with times, shared item vocabularies, day split"}
DEFAULT_PROTOCOL = "suan"
OPTIONS = {"suan": {"sequence_length": 50, "embedding_dim": 8, "list_separator": ";"}}
FILES = ("eleme.csv", "train.csv", "data.csv")
BEIJING = 8 * 3600

USER = {"user_id": "user_id", "gender": "gender", "visit_city": "visit_city", "is_supervip": "is_supervip"}
NUM = ("avg_price", "ctr_30", "ord_30", "total_amt_30")
# column -> (candidate name, behaviour list column): shared between hist_ and cand_
ITEM = {
    "shop_id": ("shop_id", "shop_id_list"),
    "item_id": ("item_id", "item_id_list"),
    "category_1_id": ("category", "category_1_id_list"),
    "merge_standard_food_id": ("food_id", "merge_standard_food_id_list"),
    "brand_id": ("brand_id", "brand_id_list"),
    "shop_aoi_id": ("aoi_id", "shop_aoi_id_list"),
    "shop_geohash_6": ("geohash6", "shop_geohash6_list"),
}
CONTEXT = {"city_id": "city_id", "district_id": "district_id", "hours": "hour", "time_type": "time_type",
           "weekdays": "weekday", "geohash12": "geohash12"}
BEHAVIOUR_ONLY = {"hours_list": "hour", "time_type_list": "time_type", "weekdays_list": "weekday"}
COLUMNS = (
    ("label",) + tuple(USER) + NUM + tuple(ITEM) + tuple(CONTEXT) + ("times",)
    + tuple(v[1] for v in ITEM.values()) + tuple(BEHAVIOUR_ONLY) + ("timediff_list",)
)


def raw_files(path, protocol):
    return [find_file(path, FILES, "eleme")]


def _header(path, delimiter=","):
    header = [h.strip() for h in first_line(path).split(delimiter)]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ZooError(
            f"{path}, line 1: the header lacks column(s) {', '.join(missing)} (eleme needs {', '.join(COLUMNS)})"
        )
    return header


def _parser(header, separator):
    position = {name: header.index(name) for name in COLUMNS}
    lists = [v[1] for v in ITEM.values()] + list(BEHAVIOUR_ONLY) + ["timediff_list"]

    def parse(line, fields, repairs):
        get = lambda name: fields[position[name]].strip()  # noqa: E731
        label = get("label")
        if label == "" or get("times") == "":
            repairs.drop("dropped {n} row(s) with an empty label or times")
            return None
        if label not in ("0", "1"):
            repairs.error(line, f"column 'label' should be 0 or 1, found {label[:40]!r}")
        times = repairs.number(get("times"), line, "times", int)
        if not 0 <= times < 2**40:
            repairs.error(line, f"column 'times' should be unix seconds, found {times}")
        split_lists = {name: [t.strip() for t in get(name).split(separator)] if get(name) else [] for name in lists}
        lengths = {len(v) for v in split_lists.values()}
        if len(lengths) > 1:
            repairs.error(line, "the behaviour lists have different lengths " + str(sorted(lengths)))
        diffs = [repairs.number(t, line, "timediff_list", int) for t in split_lists["timediff_list"]]
        keep = [i for i, diff in enumerate(diffs) if diff > 0]
        if len(keep) < len(diffs):
            repairs.repair("removed {n} behaviour(s) not strictly before their exposure", line, len(diffs) - len(keep))
        values = {"cand_time": times, "hist_time": [times - diffs[i] for i in keep]}
        for column, name in USER.items():
            values[f"user_{name}"] = get(column)
        for column in NUM:
            text = get(column)
            if text == "":
                repairs.repair("filled {n} missing user statistic(s) with the training mean", line)
                values[f"num_{column}"] = math.nan
            else:
                x = repairs.number(text, line, column)
                values[f"num_{column}"] = math.copysign(math.log1p(abs(x)), x)
        for column, (name, list_column) in ITEM.items():
            values[f"cand_{name}"] = get(column)
            values[f"hist_{name}"] = [split_lists[list_column][i] for i in keep]
        for column, name in CONTEXT.items():
            values[f"ctx_{name}"] = get(column)
        for column, name in BEHAVIOUR_ONLY.items():
            values[f"hist_{name}"] = [split_lists[column][i] for i in keep]
        return values, float(label)

    return parse


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    header = _header(path)
    parse = _parser(header, options["list_separator"])
    # Pre-pass: exposures per day, for the time split.
    days = collections.Counter()
    column = header.index("times")
    for line, fields in read_rows(path, ",", len(header), Repairs(path), header=header, verbose=verbose):
        text = fields[column].strip()
        if text.lstrip("-").isdigit():
            days[(int(text) + BEIJING) // 86400] += 1
    unique = sorted(days)
    cuts = preprocess.day_cuts_from_counts(unique, [days[d] for d in unique], utc_offset=BEIJING)

    length, d = options["sequence_length"], options["embedding_dim"]
    encoders = {}
    for name in ("shop_id", "item_id", "category", "food_id", "brand_id", "aoi_id", "geohash6"):
        shared = preprocess.Vocabulary()
        encoders[f"hist_{name}"] = tabular.IdList(shared, length)
        encoders[f"cand_{name}"] = tabular.Ids(shared)
    for name in BEHAVIOUR_ONLY.values():
        encoders[f"hist_{name}"] = tabular.IdList(preprocess.Vocabulary(), length)
    encoders["hist_time"] = tabular.Raw(length)
    encoders["cand_time"] = tabular.Raw()
    for name in USER.values():
        encoders[f"user_{name}"] = tabular.Ids(preprocess.Vocabulary())
    for name in CONTEXT.values():
        encoders[f"ctx_{name}"] = tabular.Ids(preprocess.Vocabulary())
    for column in NUM:
        encoders[f"num_{column}"] = tabular.Number()

    def split_of(line, index, values):
        return int(preprocess.split_by_time(np.array([values["cand_time"]]), cuts)[0])

    def make_schema():
        order = {"hist": 0, "user": 1, "cand": 2, "ctx": 3, "num": 4}
        features = []
        for key, encoder in encoders.items():
            group, name = key.split("_", 1)
            if name == "time":
                continue
            features.append(Feature(name, group) if group == "num" else Feature(name, group, encoder.size, d))
        features.sort(key=lambda f: order[f.group])
        return Schema(features=features, sequence_length=length, time=True)

    ignored = [h for h in header if h not in COLUMNS]
    tabular.build_table(
        path, delimiter=",", num_fields=len(header), header=header, parse=parse, split_of=split_of,
        encoders=encoders, out_dir=out_dir, make_schema=make_schema, verbose=verbose,
        info={"ignored_columns": ignored},
    )



def write_simulated(path, simulator, num_rows, seed=None, separator=";"):
    """Writes `num_rows` rows of the Eleme format from a BehaviourSimulator's sample (synthetic
    stand-ins for the fields the simulator lacks: shop = item // 3, food = item % 7, ...)."""
    features, labels = simulator.sample(num_rows, seed=seed)
    header = list(COLUMNS) + ["price_list"]
    price = simulator.item_price
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in range(num_rows):
            valid = features["hist_item_id"][r] > 0
            items = features["hist_item_id"][r][valid]
            cats = features["hist_category"][r][valid]
            hist_time = features["hist_time"][r][valid]
            item, cat = int(features["cand_item_id"][r, 0]), int(features["cand_category"][r, 0])
            time = int(features["cand_time"][r, 0])
            city, age = int(features["user_city"][r]), int(features["user_age"][r])
            join = lambda values: separator.join(str(v) for v in values)  # noqa: E731
            hours = (hist_time + BEIJING) // 3600 % 24
            row = {
                "label": int(labels[r, 0]), "user_id": int(features["user_user_id"][r]),
                "gender": int(features["user_gender"][r]), "visit_city": city, "is_supervip": age % 2,
                "avg_price": round(abs(float(price[item])) * 10, 2), "ctr_30": 0.1, "ord_30": age,
                "total_amt_30": age * 10, "shop_id": item // 3 + 1, "item_id": item, "category_1_id": cat,
                "merge_standard_food_id": item % 7 + 1, "brand_id": cat * 2, "shop_aoi_id": cat % 5 + 1,
                "shop_geohash_6": f"g{cat % 9}", "city_id": city, "district_id": city * 10 + 1,
                "hours": (time + BEIJING) // 3600 % 24, "time_type": (time + BEIJING) // 3600 % 24 // 6,
                "weekdays": ((time + BEIJING) // 86400 + 4) % 7, "geohash12": f"gh{city}", "times": time,
                "shop_id_list": join(items // 3 + 1), "item_id_list": join(items), "category_1_id_list": join(cats),
                "merge_standard_food_id_list": join(items % 7 + 1), "brand_id_list": join(cats * 2),
                "shop_aoi_id_list": join(cats % 5 + 1), "shop_geohash6_list": join(f"g{c % 9}" for c in cats),
                "hours_list": join(hours), "time_type_list": join(hours // 6),
                "weekdays_list": join(((hist_time + BEIJING) // 86400 + 4) % 7),
                "timediff_list": join(time - hist_time), "price_list": join(np.round(price[items], 2)),
            }
            f.write(",".join(str(row[h]) for h in header) + "\n")


def load(path, **kwargs):
    """`zoo.datasets.load("eleme", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("eleme", path, **kwargs)
