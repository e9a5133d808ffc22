"""MovieLens ratings under ReST's public protocol (also used by `amazon_books`).

The file is detected from the folder (or given directly): ML-100K `u.data` (tab-separated), ML-1M
`ratings.dat` (`::`-separated), ML-20M/25M `ratings.csv` (header userId,movieId,rating,timestamp).

Protocol `rest` (ReST §4.1): label = rating >= 4; no negative sampling; an iterative 5-core on all
ratings (users and items with >= `core` ratings; the removed count is printed); per user, ratings in
time order split 80/10/10 (floor(0.8 n) train, up to floor(0.9 n) validation, the rest test); every
rating is a sample whose history is the user's last `sequence_length` ratings strictly earlier in time
(ties never see each other), from any split. Features: hist_item_id, hist_rating (round(2 x rating),
ids 1..10, so half stars keep their meaning), hist_time; user_user_id; cand_item_id, cand_time.
Item and user vocabularies are fitted on the training ratings (later-only items -> OOV).
"""

import numpy as np

from zoo.datasets import events, preprocess
from zoo.datasets.reading import Repairs, find_file, read_rows
from zoo.feature import Feature
from zoo.schema import Schema

PROTOCOLS = {"rest": "ReST: rating >= 4 positive, 5-core, per-user time-ordered 80/10/10, history <= 200"}
DEFAULT_PROTOCOL = "rest"
OPTIONS = {"rest": {"sequence_length": 200, "embedding_dim": 32, "core": 5}}
FORMATS = {  # file name: (delimiter, header)
    "u.data": ("\t", None),
    "ratings.dat": ("::", None),
    "ratings.csv": (",", ("userId", "movieId", "rating", "timestamp")),
}
MAX_TIME = 2**40  # unix seconds far beyond any real rating; a larger value is a malformed time


def raw_files(path, protocol):
    return [find_file(path, tuple(FORMATS), "movielens")]


def build(files, protocol, options, out_dir, verbose):
    path = files[0]
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    delimiter, header = FORMATS.get(name, FORMATS["ratings.csv"])
    build_rest(path, delimiter, header, options, out_dir, verbose)


def read_ratings(path, delimiter, header, repairs, verbose):
    """(user, item, rating, time) columns; users and items interned."""
    users, items = events.Interner(), events.Interner()
    columns = events.EventColumns({"user": np.int64, "item": np.int64, "rating": np.float32, "time": np.int64})
    for line, fields in read_rows(path, delimiter, 4, repairs, header=header, verbose=verbose):
        user, item, rating, time = (f.strip() for f in fields)
        if not (user and item and rating and time):
            repairs.add("dropped {n} row(s) with an empty field")
            continue
        rating = repairs.number(rating, line, "rating")
        time = repairs.number(time, line, "timestamp", int)
        if not 0 <= time < MAX_TIME:
            repairs.error(line, f"column 'timestamp' should be unix seconds, found {time}")
        columns.append(user=users(user), item=items(item), rating=rating, time=time)
    return columns.arrays(), len(users), len(items)


def build_rest(path, delimiter, header, options, out_dir, verbose):
    """ReST's protocol on a (user, item, rating, timestamp) file."""
    repairs = Repairs(path)
    data, num_users, num_items = read_ratings(path, delimiter, header, repairs, verbose)
    keep = preprocess.k_core(data["user"], data["item"], options["core"])
    repairs.add("removed {n} rating(s) of users/items with fewer than %d ratings (%d-core)"
                % (options["core"], options["core"]), int((~keep).sum()))
    repairs.report()
    data = events.order_events(events.select(data, keep))
    split = preprocess.per_user_split(data["user"])
    train = split == 0
    item_ids, item_size = events.fit_ids(data["item"], train, num_items)
    user_ids, user_size = events.fit_ids(data["user"], train, num_users)
    d = options["embedding_dim"]
    schema = Schema(
        features=(
            Feature("item_id", "hist", int(item_size), d),
            Feature("rating", "hist", 12, d),
            Feature("user_id", "user", int(user_size), d),
            Feature("item_id", "cand", int(item_size), d),
        ),
        sequence_length=options["sequence_length"],
        time=True,
    )
    history = {
        "hist_item_id": item_ids[data["item"]],
        "hist_rating": np.clip(np.round(data["rating"] * 2), 1, 10).astype(np.int32),
        "hist_time": data["time"],
    }
    start = preprocess.block_starts(data["user"])
    end = preprocess.history_ends(data["user"], data["time"])
    samples = {}
    for code, name in enumerate(("train", "validation", "test")):
        mask = split == code
        samples[name] = {
            "start": start[mask],
            "end": end[mask],
            "user": data["user"][mask],
            "user_user_id": user_ids[data["user"][mask]],
            "cand_item_id": history["hist_item_id"][mask],
            "cand_time": data["time"][mask],
            "labels": (data["rating"][mask] >= 4).astype(np.float32),
        }
    info = {"repairs": repairs.summary(), "events": int(data["user"].shape[0])}
    events.write_events(out_dir, schema, history, samples, info)


def load(path, **kwargs):
    """`zoo.datasets.load("movielens", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("movielens", path, **kwargs)
