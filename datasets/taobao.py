"""Taobao, two raw formats (SUAN §4.1 uses Taobao behaviour logs).

Protocol `suan`: Tianchi UserBehavior.csv (user_id,item_id,category_id,behavior_type,timestamp; no
header; behavior_type one of pv, fav, cart, buy), read through the data-spec engine's pyarrow reader
(`events.read_log` over `spec_reading.read_chunks`: blocks of rows converted vectorised, ids numbered in
first-seen order; a row with an empty field dropped and counted, a truncated last row dropped and
counted, a malformed row or value refused in one line naming the file and line). Target-aware samples:
for every behaviour of a user that has at least one earlier behaviour, the history is the user's last
`sequence_length` behaviours strictly earlier in time (hist_item_id, hist_category, hist_behavior,
hist_time) and the candidate is that behaviour's item.
- Label: 1 for the user's real next behaviour (any type: a click, favourite, cart or purchase of the
  item is the engagement SUAN predicts); the log holds only positives, so each positive gets
  `negatives` sampled items, label 0: drawn uniformly from the training item vocabulary (excluding the
  positive's item), with the positive's history and time, and their category from the training log.
- sample_rate (in the info, `load(..., with_info=True)`) = negatives / (training items - 1): the
  fraction of the (user, time, non-clicked item) population kept. SUAN's rectified_pctr
  p / (p + (1 - p) / sample_rate) undoes it.
- Events outside `date_range` (inclusive dates in Beijing time, UTC+8; the official data covers
  2017-11-25..2017-12-03 with a few outliers) are dropped and counted; None keeps all.
- Split by time, in whole days (UTC+8): about 80/10/10 of the behaviours, the last day always test.
  Item and category vocabularies are fitted on training behaviours; ctx_hour is the hour (UTC+8) + 1.
  The fit (item, category and user vocabularies, sample_rate) is kept as `preprocessing.json` beside the
  processed data (`prepare(...).preprocessing()`).
- Scoring mode, `load(path, preprocessing=<that state, or its file>)`: the fitted vocabularies are
  applied instead of fitted (unknown raw ids -> the OOV id, counted in the info's `unknown_ids` and the
  printed account); the schema and sample_rate are the fitted ones. Every behaviour of the file with an
  earlier behaviour of its user in the file is a sample of the one split "all" (label 1, its own item as
  the candidate, the same history and context features as in training); nothing is sampled, no split is
  made and the date range is not applied (the rows to score may come from any day). As in training, a
  user's first behaviour makes no sample (counted). Samples are in (user, time) order;
  `prepare(...).source_lines("all")` gives the file line of each.

Protocol `ads`: the Ali_Display_Ad_Click rows joined with the ad and user tables, as FuxiCTR ships
them: a folder of train/valid/test CSVs with header clk,time_stamp,userid,adgroup_id,pid,cate_id,
campaign_id,customer,brand,price,cms_segid,...,new_user_class_level,click_sequence, where
click_sequence is a '^'-separated list of earlier clicked ad groups, oldest first (the data set's
own history, built before each row's time). Features: the profile (user_), the ad (cand_item_id =
adgroup_id, cand_category, campaign_id, customer, brand), ctx_pid, ctx_hour, num_price = log(1 + price)
(missing -> the training mean, counted) and hist_item_id (last `sequence_length` clicks; no times, so
time=False). An empty categorical is its own value. The splits are the files'. The files are read by
`events.read_log` too (one token space over the three), each distinct value parsed once
(zoo.datasets.tabular); a row with an empty clk or time_stamp is dropped and counted.
"""

import datetime
import math
import os

import numpy as np

from zoo.datasets import events, preprocess, tabular
from zoo.datasets import fitted as fitted_state
from zoo.datasets.reading import Repairs, as_number, find_file, first_line
from zoo.errors import ZooError
from zoo.feature import Feature
from zoo.schema import Schema

PROTOCOLS = {
    "suan": "UserBehavior: target-aware samples, next behaviour = 1, sampled negatives = 0 (sample_rate), day split",
    "ads": "display ads joined rows (FuxiCTR train/valid/test) with the ^-separated click_sequence as history",
}
APPLIES_PREPROCESSING = ("suan",)  # protocols whose fit can be applied to new rows (scoring mode)
DEFAULT_PROTOCOL = "suan"
OPTIONS = {
    "suan": {
        "sequence_length": 100, "embedding_dim": 8, "negatives": 1, "seed": 0,
        "date_range": ("2017-11-25", "2017-12-03"),
    },
    "ads": {"sequence_length": 50, "embedding_dim": 8},
}
BEHAVIORS = {"pv": 1, "fav": 2, "cart": 3, "buy": 4}
BEIJING = 8 * 3600
ADS_HEADER = (
    "clk", "time_stamp", "userid", "adgroup_id", "pid", "cate_id", "campaign_id", "customer", "brand", "price",
    "cms_segid", "cms_group_id", "final_gender_code", "age_level", "pvalue_level", "shopping_level",
    "occupation", "new_user_class_level", "click_sequence",
)
ADS_SPLITS = {
    0: ("train.csv", "train_sample.csv"), 1: ("valid.csv", "valid_sample.csv"), 2: ("test.csv", "test_sample.csv"),
}


def detect_protocol(path):
    file = path
    try:
        file = find_file(path, ADS_SPLITS[0] + ("UserBehavior.csv",), "taobao")
    except ZooError:
        return DEFAULT_PROTOCOL
    return "ads" if first_line(file).lower().startswith("clk,") else "suan"


def raw_files(path, protocol):
    if protocol == "suan":
        return [find_file(path, ("UserBehavior.csv",), "taobao")]
    return [find_file(path, ADS_SPLITS[code], "taobao ads") for code in range(3)]


def build(files, protocol, options, out_dir, verbose, fitted=None):
    if protocol == "suan":
        _build_suan(files[0], options, out_dir, fitted)
    else:
        _build_ads(files, options, out_dir, verbose)


# ---------------------------------------------------------------------------------------- suan
def _day_seconds(text, end=False):
    day = datetime.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc)
    return int(day.timestamp()) - BEIJING + (86400 if end else 0)


def _read_behaviors(path, repairs, lines=False):
    columns = {"user": "id", "item": "id", "category": "id", "behavior_type": BEHAVIORS, "timestamp": "time"}
    data, interners = events.read_log(path, ",", columns, repairs, lines=lines)
    data["behavior"], data["time"] = data.pop("behavior_type"), data.pop("timestamp")
    return data, interners["user"], interners["item"], interners["category"]


def _build_suan(path, options, out_dir, fitted=None):
    repairs = Repairs(path)
    data, users, items, categories = _read_behaviors(path, repairs, lines=fitted is not None)
    if options["date_range"] is not None and fitted is None:
        first, last = options["date_range"]
        inside = (data["time"] >= _day_seconds(first)) & (data["time"] < _day_seconds(last, end=True))
        repairs.drop("dropped {n} behaviour(s) outside the date range %s..%s" % (first, last), int((~inside).sum()))
        data = events.select(data, inside)
    data = events.order_events(data)
    repairs.finish(data["user"].shape[0])
    start = preprocess.block_starts(data["user"])
    end = preprocess.history_ends(data["user"], data["time"])
    info = {}
    if fitted is None:
        split = preprocess.split_by_time(data["time"], preprocess.day_cuts(data["time"], utc_offset=BEIJING))
        train = split == 0
        item_vocabulary, item_ids = events.fit_vocabulary(items, data["item"], train)
        category_vocabulary, category_ids = events.fit_vocabulary(categories, data["category"], train)
        user_vocabulary, user_ids = events.fit_vocabulary(users, data["user"], train)
        item_ids, category_ids = item_ids[data["item"]], category_ids[data["category"]]
        user_ids = user_ids[data["user"]]
        item_size, category_size = item_vocabulary.size, category_vocabulary.size
    else:
        schema, tables = fitted_state.tables(fitted, ("item_id", "category", "user_id"))
        split = np.zeros(data["user"].shape[0], dtype=np.int8)
        item_ids, unknown_items = events.apply_vocabulary(tables["item_id"], items, data["item"])
        category_ids, unknown_categories = events.apply_vocabulary(tables["category"], categories, data["category"])
        user_ids, unknown_users = events.apply_vocabulary(tables["user_id"], users, data["user"])
        info["unknown_ids"] = {"item_id": unknown_items, "category": unknown_categories, "user_id": unknown_users}
        events.note_unknown(repairs, info["unknown_ids"])
    history = {
        "hist_item_id": item_ids,
        "hist_category": category_ids,
        "hist_behavior": data["behavior"].astype(np.int32),
        "hist_time": data["time"],
    }
    has_history = end > start
    repairs.note("made no sample for {n} first behaviour(s) of a user (no earlier history)", int((~has_history).sum()))
    repairs.report()
    if fitted is None:
        # Category of each training item id (for the sampled negatives): the last one seen in training.
        item_category = np.zeros(item_size, dtype=np.int32)
        item_category[item_ids[train]] = category_ids[train]
        known = item_size - 2  # ids 1..known were fitted
        if known < 2 and options["negatives"]:
            raise ZooError(f"{path}: fewer than 2 items in the training days; cannot sample negatives")
        k = options["negatives"]
        splits = ("train", "validation", "test")
    else:
        item_category, known, k, splits = None, None, 0, ("all",)
    rng = np.random.default_rng(options["seed"])
    samples = {}
    for code, name in enumerate(splits):
        rows = np.flatnonzero((split == code) & has_history)
        positive = item_ids[rows]
        # [n, 1 + k]: the positive, then k sampled items != positive (uniform over the other ids).
        drawn = rng.integers(1, max(known or 0, 2), size=(rows.size, k))  # 1..known-1
        drawn = np.where(drawn >= positive[:, None], drawn + 1, drawn) if k else drawn
        cand = np.concatenate([positive[:, None], drawn], axis=1).astype(np.int32)
        width = cand.shape[1]
        drawn_category = item_category[drawn] if k else drawn
        cand_category = np.concatenate([category_ids[rows][:, None], drawn_category], axis=1).astype(np.int32)
        repeat = lambda a: np.repeat(a, width)  # noqa: E731
        time = repeat(data["time"][rows])
        samples[name] = {
            "start": repeat(start[rows]),
            "end": repeat(end[rows]),
            "user": repeat(data["user"][rows]),
            "user_user_id": repeat(user_ids[rows]),
            "cand_item_id": cand.reshape(-1),
            "cand_category": cand_category.reshape(-1),
            "cand_time": time,
            "ctx_hour": (((time + BEIJING) // 3600) % 24 + 1).astype(np.int32),
            "labels": np.tile(np.eye(1, width, dtype=np.float32)[0], rows.size),
        }
        if fitted is not None:
            samples[name]["line"] = data["line"][rows]
    if fitted is None:
        schema = _suan_schema(options, item_size, category_size, user_vocabulary.size)
        info.update(sample_rate=k / (known - 1) if known > 1 else 1.0, negatives=k)
    else:
        info.update(sample_rate=fitted["info"].get("sample_rate"), negatives=0)
    info.update(
        repairs=repairs.summary(),
        accounting={os.path.basename(path): repairs.accounting()},
        label="1 = the user's real next behaviour (pv/fav/cart/buy); 0 = a uniformly sampled item",
    )
    events.write_events(out_dir, schema, history, samples, info)
    if fitted is None:
        state = fitted_state.make_state(
            "taobao", "suan", options, schema,
            {"item_id": item_vocabulary, "category": category_vocabulary, "user_id": user_vocabulary},
            info={"sample_rate": info["sample_rate"]},
        )
        fitted_state.save_preprocessing(state, out_dir)


def _suan_schema(options, item_size, category_size, user_size):
    d = options["embedding_dim"]
    return Schema(
        features=(
            Feature("item_id", "hist", int(item_size), d),
            Feature("category", "hist", int(category_size), d),
            Feature("behavior", "hist", 6, d),
            Feature("user_id", "user", int(user_size), d),
            Feature("item_id", "cand", int(item_size), d),
            Feature("category", "cand", int(category_size), d),
            Feature("hour", "ctx", 26, d),
        ),
        sequence_length=options["sequence_length"],
        time=True,
    )


# ---------------------------------------------------------------------------------------- ads
USER_FIELDS = {
    "userid": "user_id", "cms_segid": "cms_segid", "cms_group_id": "cms_group_id", "final_gender_code": "gender",
    "age_level": "age_level", "pvalue_level": "pvalue_level", "shopping_level": "shopping_level",
    "occupation": "occupation", "new_user_class_level": "new_user_class_level",
}
CAND_FIELDS = {
    "adgroup_id": "item_id", "cate_id": "category", "campaign_id": "campaign_id", "customer": "customer",
    "brand": "brand",
}
ADS_COLUMNS = dict.fromkeys(ADS_HEADER[:-1], "text") | {"click_sequence": events.TokenList("^")}


def _timestamp(text):
    """Unix seconds of a unix time or of YYYY-MM-DD HH:MM:SS in Beijing time; None if it is neither."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    return int(moment.timestamp()) - BEIJING


def _ads_rows(data, tokens, repairs):
    """The kept rows of one file that `read_log` read: {column: [n] dense ints, "label", "log_price"
    (NaN if missing), "clicked" [T] the click_sequence's non-empty tokens, "clicks" [n] their number};
    the file's first fault refused, its drops and repairs counted."""
    clk = tabular.zero_one(tokens["clk"], data["clk"])
    has_clk = clk != tabular.EMPTY
    kept = has_clk & (data["time_stamp"] != tokens["time_stamp"].index.get("", -1))
    timed = tabular.per_token(tokens["time_stamp"], lambda t: _timestamp(t) is not None, bool)[data["time_stamp"]]
    prices = tabular.per_token(tokens["price"], lambda t: as_number(t) if t else math.nan)  # None: not a number
    price = np.array([math.inf if p is None else p for p in prices], np.float64)[data["price"]]

    def found(name, row):
        return tabular.shown(tokens[name], data[name][row])

    tabular.first_fault(repairs, data["line"], [
        (has_clk & (clk == tabular.OTHER), lambda row: f"column 'clk' should be 0 or 1, found {found('clk', row)}"),
        (kept & ~timed, lambda row: "column 'time_stamp' should be a unix time or YYYY-MM-DD HH:MM:SS, found "
                                    f"{found('time_stamp', row)}"),
        (kept & np.isinf(price), lambda row: f"column 'price' should be a number, found {found('price', row)}"),
        (kept & (price < 0), lambda row: f"column 'price' should be >= 0, found {float(price[row])}"),
    ])
    repairs.tally([("drop", "dropped {n} row(s) with an empty clk", ~has_clk),
                   ("drop", "dropped {n} row(s) with an empty time_stamp", has_clk & ~kept),
                   ("repair", "filled {n} missing price(s) with the training mean", kept & np.isnan(price))])
    log_price = np.array([math.log1p(p) if p is not None and p >= 0 else math.nan for p in prices], np.float64)
    codes, lengths = data["click_sequence"]
    row_of = np.repeat(np.arange(kept.size), lengths)
    clicked = np.array([t != "" for t in tokens["click_sequence"].index], bool)[codes] & kept[row_of]
    rows = {name: data[name][kept] for name in ADS_HEADER[:-1]}
    rows.update(label=clk[kept].astype(np.float32), log_price=log_price[data["price"][kept]], clicked=codes[clicked],
                clicks=np.bincount(row_of[clicked], minlength=kept.size)[kept])
    return rows


def _build_ads(files, options, out_dir, verbose):
    length, d = options["sequence_length"], options["embedding_dim"]
    tokens, parts, accounts = None, [], []
    for code, path in enumerate(files):  # one token space; a file's faults are refused before the next is read
        repairs = Repairs(path)
        data, tokens = events.read_log(path, ",", ADS_COLUMNS, repairs, header=ADS_HEADER, lines=True,
                                       interners=tokens)
        part = _ads_rows(data, tokens, repairs)
        parts.append(dict(part, split=np.full(part["label"].size, code, np.int8)))
        accounts.append(repairs)
    rows = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    train = rows["split"] == 0
    clicks = rows["clicks"]

    def values(column):  # fit_ids' (tokens, codes, fitted on) of a column
        return list(tokens[column].index), rows[column], train

    features, sizes = {}, {}
    for column, name in USER_FIELDS.items():
        (features[f"user_{name}"],), sizes[f"user_{name}"], _ = tabular.fit_ids([values(column)])
    # Ad groups and clicked ad groups share one vocabulary (a history is fitted on its newest L clicks).
    recent = np.repeat(train, clicks) & tabular.newest(clicks, length)
    history = list(tokens["click_sequence"].index), rows["clicked"], recent
    (features["cand_item_id"], clicked), size, _ = tabular.fit_ids([values("adgroup_id"), history])
    features["hist_item_id"] = tabular.padded(clicked, clicks, length)
    sizes.update(hist_item_id=size, cand_item_id=size)
    for column, name in CAND_FIELDS.items():
        if name != "item_id":
            (features[f"cand_{name}"],), sizes[f"cand_{name}"], _ = tabular.fit_ids([values(column)])
    (features["ctx_pid"],), sizes["ctx_pid"], _ = tabular.fit_ids([values("pid")])
    hours = [str(((t or 0) + BEIJING) // 3600 % 24) for t in tabular.per_token(tokens["time_stamp"], _timestamp)]
    (features["ctx_hour"],), sizes["ctx_hour"], _ = tabular.fit_ids([(hours, rows["time_stamp"], train)])
    features["num_price"] = tabular.fill_mean(rows["log_price"], train)
    features["labels"] = rows["label"]
    for repairs, part in zip(accounts, parts):
        repairs.finish(part["label"].size).report()
    order = {"hist": 0, "user": 1, "cand": 2, "ctx": 3}
    keys = sorted(sizes, key=lambda key: order[key.split("_", 1)[0]])
    schema = Schema(features=[Feature(key.split("_", 1)[1], key.split("_", 1)[0], sizes[key], d) for key in keys]
                    + [Feature("price", "num")], sequence_length=length)
    info = {"repairs": " | ".join(r.summary() for r in accounts),
            "accounting": {os.path.basename(r.path): r.accounting() for r in accounts}}
    tabular.write(out_dir, schema, rows["split"], features, info)


def load(path, **kwargs):
    """`zoo.datasets.load("taobao", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("taobao", path, **kwargs)
