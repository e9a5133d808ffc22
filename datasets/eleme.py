"""Eleme (Ele.me food delivery, Tianchi dataset 131, as used by SUAN §4.1): one row per exposure with
user, item (shop/food) and context fields and behaviour lists of up to 50 earlier behaviours.

No public sample exists here, so the format is this module's reading of the SUAN authors' schema
(their data_struct.json: user, item and context fields plus the behaviour lists), with the Tianchi
column names: a comma-separated file with a header holding at least COLUMNS (other columns, e.g.
price_list or rank_7, are ignored and listed in the info). List columns are `list_separator`-separated
(";"), oldest behaviour first, all lists of a row of equal length; `times` is the exposure's unix time
and `timediff_list` holds (times - behaviour time) in seconds. `write_simulated` writes rows of this
format from a BehaviourSimulator (for tests and examples). The file is read by `events.read_log`
(pyarrow, in blocks, under zoo.datasets.reading's rules), each distinct value parsed once
(zoo.datasets.tabular).

Protocol `suan`: hist_<field> = the last `sequence_length` behaviours, hist_time = times - timediff;
behaviours not strictly before their exposure (timediff <= 0) are removed and counted, so nothing at
or after the label's time reaches its features. Shop/item/category/food/brand/aoi/geohash6 share one
vocabulary between behaviours and candidates, fitted on the training rows (behaviours and candidates).
num_ features = log(1 + x) of the user statistics (missing -> the training mean, counted). Split by
time (`times`) in whole days (UTC+8), about 80/10/10, the last day always test.
"""

import collections
import math
import os

import numpy as np

from zoo.datasets import events, preprocess, tabular
from zoo.datasets.reading import Repairs, as_number, find_file, first_line
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


def _columns(header, separator):
    """`read_log`'s columns of a file with this header (lists as TokenLists; other columns not read), and
    the list columns."""
    lists = [v[1] for v in ITEM.values()] + list(BEHAVIOUR_ONLY) + ["timediff_list"]
    columns = {}
    for i, name in enumerate(header):
        if name in COLUMNS and header.index(name) == i:
            columns[name] = events.TokenList(separator) if name in lists else "text"
        else:
            columns[f"_{i}"] = None
    return columns, lists


def _day_cuts(tokens, codes):
    """The time split's day cuts from the exposures per day (UTC+8) of every row whose times is an integer."""
    def day(text):
        try:
            return (int(text) + BEIJING) // 86400 if text.lstrip("-").isdigit() else None
        except ValueError:
            return None

    days = collections.Counter()
    for found, rows in zip(tabular.per_token(tokens, day), np.bincount(codes, minlength=len(tokens)).tolist()):
        if found is not None and rows:
            days[found] += rows
    unique = sorted(days)
    return preprocess.day_cuts_from_counts(unique, [days[d] for d in unique], utc_offset=BEIJING)


def _rows(data, tokens, repairs, lists):
    """The rows checked as the reader reads one: label and times, the lists, the time differences, the user
    statistics; the first fault refused, drops and repairs counted. Returns (kept [n], label [n], times [n],
    {statistic: log(1 + x) [n], NaN if missing}, diff [T] of the kept rows' behaviours, before [T]: those
    strictly before their exposure)."""
    def found(name, row):
        return tabular.shown(tokens[name], data[name][row])

    label = tabular.zero_one(tokens["label"], data["label"])
    kept = (label != tabular.EMPTY) & (data["times"] != tokens["times"].index.get("", -1))
    numbers = tabular.per_token(tokens["times"], lambda t: as_number(t, int))  # None: not a number
    in_range = np.array([n is not None and 0 <= n < 2**40 for n in numbers], bool)
    lengths = np.stack([data[name][1] for name in lists])  # [lists, n]
    diff_codes, diff_lengths = data["timediff_list"]
    row_of = np.repeat(np.arange(kept.size), diff_lengths)
    diffs = tabular.per_token(tokens["timediff_list"], lambda t: as_number(t.strip(), int))
    unreadable = np.array([n is None for n in diffs], bool)[diff_codes]

    def first_unreadable(row):
        return tabular.shown(tokens["timediff_list"], diff_codes[(row_of == row) & unreadable][0])

    checks = [
        (kept & (label == tabular.OTHER), lambda row: f"column 'label' should be 0 or 1, found {found('label', row)}"),
        (kept & np.equal(numbers, None)[data["times"]],
         lambda row: f"column 'times' should be a number, found {found('times', row)}"),
        (kept & ~in_range[data["times"]],
         lambda row: f"column 'times' should be unix seconds, found {numbers[data['times'][row]]}"),
        (kept & (lengths != lengths[0]).any(axis=0),
         lambda row: f"the behaviour lists have different lengths {sorted(set(lengths[:, row].tolist()))}"),
        (kept & (np.bincount(row_of[unreadable], minlength=kept.size) > 0),
         lambda row: f"column 'timediff_list' should be a number, found {first_unreadable(row)}"),
    ]
    stats = {}
    for column in NUM:
        values = tabular.per_token(tokens[column], lambda t: as_number(t) if t else math.nan)
        checks.append((kept & np.equal(values, None)[data[column]],
                       lambda row, column=column: f"column '{column}' should be a number, found {found(column, row)}"))
        stats[column] = np.array([math.nan if v is None or math.isnan(v) else math.copysign(math.log1p(abs(v)), v)
                                  for v in values], np.float64)[data[column]]
    tabular.first_fault(repairs, data["line"], checks)

    times = np.array([n if ok else 0 for n, ok in zip(numbers, in_range)], np.int64)[data["times"]]
    in_kept = np.repeat(kept, diff_lengths)  # a kept row's lists are of one length: their tokens line up
    diff = np.array([0 if n is None else n for n in diffs], np.int64)[diff_codes[in_kept]]
    before = diff > 0
    removed = np.bincount(row_of[in_kept][~before], minlength=kept.size)
    missing = sum(np.isnan(stats[column]).astype(np.int64) for column in NUM)
    repairs.tally([("drop", "dropped {n} row(s) with an empty label or times", ~kept),
                   ("repair", "removed {n} behaviour(s) not strictly before their exposure", removed * kept),
                   ("repair", "filled {n} missing user statistic(s) with the training mean", missing * kept)])
    return kept, label, times, stats, diff, before


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    header = _header(path)
    repairs = Repairs(path)
    columns, lists = _columns(header, options["list_separator"])
    data, tokens = events.read_log(path, ",", columns, repairs, header=header, lines=True)
    cuts = _day_cuts(tokens["times"], data["times"])
    kept, label, times, stats, diff, before = _rows(data, tokens, repairs, lists)
    length, d = options["sequence_length"], options["embedding_dim"]
    split = preprocess.split_by_time(times[kept], cuts)
    train = split == 0
    count = np.bincount(np.repeat(np.arange(kept.sum()), data["timediff_list"][1][kept])[before],
                        minlength=int(kept.sum()))  # behaviours per kept row
    recent = np.repeat(train, count) & tabular.newest(count, length)

    def behaviours(column):  # fit_ids' (tokens, codes, fitted on) of a list column's kept behaviours
        codes, lengths = data[column]
        return [t.strip() for t in tokens[column].index], codes[np.repeat(kept, lengths)][before], recent

    def values(column):  # fit_ids' (tokens, codes, fitted on) of a column
        return list(tokens[column].index), data[column][kept], train

    features, sizes = {}, {}
    for column, (name, list_column) in ITEM.items():  # behaviours and candidates share a vocabulary
        (hist, features[f"cand_{name}"]), size, _ = tabular.fit_ids([behaviours(list_column), values(column)])
        features[f"hist_{name}"] = tabular.padded(hist, count, length)
        sizes.update({f"hist_{name}": size, f"cand_{name}": size})
    for column, name in BEHAVIOUR_ONLY.items():
        (hist,), sizes[f"hist_{name}"], _ = tabular.fit_ids([behaviours(column)])
        features[f"hist_{name}"] = tabular.padded(hist, count, length)
    features["hist_time"] = tabular.padded(np.repeat(times[kept], count) - diff[before], count, length)
    features["cand_time"] = times[kept]
    for group, fields in (("user", USER), ("ctx", CONTEXT)):
        for column, name in fields.items():
            (features[f"{group}_{name}"],), sizes[f"{group}_{name}"], _ = tabular.fit_ids([values(column)])
    for column in NUM:
        features[f"num_{column}"] = tabular.fill_mean(stats[column][kept], train)
    features["labels"] = label[kept].astype(np.float32)
    repairs.finish(int(kept.sum())).report()

    order = {"hist": 0, "user": 1, "cand": 2, "ctx": 3}
    keys = sorted(sizes, key=lambda key: order[key.split("_", 1)[0]])
    schema = Schema(features=[Feature(key.split("_", 1)[1], key.split("_", 1)[0], sizes[key], d) for key in keys]
                    + [Feature(column, "num") for column in NUM], sequence_length=length, time=True)
    info = {"ignored_columns": [h for h in header if h not in COLUMNS], "repairs": repairs.summary(),
            "accounting": {os.path.basename(path): repairs.accounting()}}
    tabular.write(out_dir, schema, split, features, info)


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
