"""MovieLens ratings under ReST's public protocol (also used by `amazon_books`).

The file is detected from the folder (or given directly): ML-100K `u.data` (tab-separated), ML-1M
`ratings.dat` (`::`-separated), ML-20M/25M `ratings.csv` (header userId,movieId,rating,timestamp).
It is read through the data-spec engine's pyarrow reader (`events.read_log` over
`spec_reading.read_chunks`: blocks of rows converted vectorised, ids numbered in first-seen order), under
zoo.datasets.reading's rules: blank lines and a truncated last row counted, a row with an empty field
dropped and counted, a malformed row or value refused in one line naming the file, line and column. This
module keeps only the protocol.

Protocol `rest` (ReST §4.1): label = rating >= 4; no negative sampling; an iterative 5-core on all
ratings (users and items with >= `core` ratings; the removed count is printed); per user, ratings in
time order split 80/10/10 (floor(0.8 n) train, up to floor(0.9 n) validation, the rest test); every
rating is a sample whose history is the user's last `sequence_length` ratings strictly earlier in time
(ties never see each other), from any split. Features: hist_item_id, hist_rating (round(2 x rating),
ids 1..10, so half stars keep their meaning), hist_time; user_user_id; cand_item_id, cand_time.
Item and user vocabularies are fitted on the training ratings (later-only items -> OOV); the fit is
kept as `preprocessing.json` beside the processed data (`prepare(...).preprocessing()`).

Scoring mode, `load(path, preprocessing=<that state, or its file>)`: the fitted vocabularies are applied
instead of fitted (a raw user or item id they do not know maps to the OOV id, counted in the info's
`unknown_ids` and the printed account), the schema is the fitted one, and every rating of the file is a
sample of the one split "all" with the same features as in training: its history is the user's earlier
ratings in this file. The filters that need the whole data set are skipped: no 5-core (a handful of one
user's ratings would not survive it) and no 80/10/10 split. Samples are in (user, time) order;
`prepare(...).source_lines("all")` gives the file line of each.
"""

import os

import numpy as np

from zoo.datasets import events, preprocess
from zoo.datasets import fitted as fitted_state
from zoo.datasets.reading import Repairs, find_file
from zoo.feature import Feature
from zoo.schema import Schema

PROTOCOLS = {"rest": "ReST: rating >= 4 positive, 5-core, per-user time-ordered 80/10/10, history <= 200"}
APPLIES_PREPROCESSING = ("rest",)  # protocols whose fit can be applied to new rows (scoring mode)
DEFAULT_PROTOCOL = "rest"
OPTIONS = {"rest": {"sequence_length": 200, "embedding_dim": 32, "core": 5}}
FORMATS = {  # file name: (delimiter, header)
    "u.data": ("\t", None),
    "ratings.dat": ("::", None),
    "ratings.csv": (",", ("userId", "movieId", "rating", "timestamp")),
}


def raw_files(path, protocol):
    return [find_file(path, tuple(FORMATS), "movielens")]


def build(files, protocol, options, out_dir, verbose, fitted=None):
    path = files[0]
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    delimiter, header = FORMATS.get(name, FORMATS["ratings.csv"])
    build_rest(path, delimiter, header, options, out_dir, dataset="movielens", fitted=fitted)


def read_ratings(path, delimiter, header, repairs, lines=False):
    """(user, item, rating, time[, line]) columns and the user and item Interners (raw token -> dense)."""
    columns = {"user": "id", "item": "id", "rating": float, "timestamp": "time"}
    data, interners = events.read_log(path, delimiter, columns, repairs, header=header, lines=lines)
    data["rating"] = data["rating"].astype(np.float32)
    data["time"] = data.pop("timestamp")
    return data, interners["user"], interners["item"]


def build_rest(path, delimiter, header, options, out_dir, dataset="movielens", fitted=None):
    """ReST's protocol on a (user, item, rating, timestamp) file; with `fitted` (a checked
    preprocessing state of the same data set and protocol), its scoring mode: see the module docstring."""
    repairs = Repairs(path)
    data, users, items = read_ratings(path, delimiter, header, repairs, lines=fitted is not None)
    if fitted is None:
        keep = preprocess.k_core(data["user"], data["item"], options["core"])
        repairs.drop("removed {n} rating(s) of users/items with fewer than %d ratings (%d-core)"
                     % (options["core"], options["core"]), int((~keep).sum()))
        data = events.select(data, keep)
    data = events.order_events(data)
    info = {"events": int(data["user"].shape[0])}
    if fitted is None:
        split = preprocess.per_user_split(data["user"])
        item_vocabulary, item_ids = events.fit_vocabulary(items, data["item"], split == 0)
        user_vocabulary, user_ids = events.fit_vocabulary(users, data["user"], split == 0)
        item_ids, user_ids = item_ids[data["item"]], user_ids[data["user"]]
        schema = _schema(options, item_vocabulary.size, user_vocabulary.size)
        splits = {"train": split == 0, "validation": split == 1, "test": split == 2}
    else:
        schema, tables = fitted_state.tables(fitted, ("item_id", "user_id"))
        item_ids, unknown_items = events.apply_vocabulary(tables["item_id"], items, data["item"])
        user_ids, unknown_users = events.apply_vocabulary(tables["user_id"], users, data["user"])
        info["unknown_ids"] = {"item_id": unknown_items, "user_id": unknown_users}
        events.note_unknown(repairs, info["unknown_ids"])
        splits = {"all": np.ones(data["user"].shape[0], dtype=bool)}
    repairs.finish(info["events"]).report()
    history = {
        "hist_item_id": item_ids,
        "hist_rating": np.clip(np.round(data["rating"] * 2), 1, 10).astype(np.int32),
        "hist_time": data["time"],
    }
    start = preprocess.block_starts(data["user"])
    end = preprocess.history_ends(data["user"], data["time"])
    samples = {}
    for name, mask in splits.items():
        samples[name] = {
            "start": start[mask],
            "end": end[mask],
            "user": data["user"][mask],
            "user_user_id": user_ids[mask],
            "cand_item_id": item_ids[mask],
            "cand_time": data["time"][mask],
            "labels": (data["rating"][mask] >= 4).astype(np.float32),
        }
        if fitted is not None:
            samples[name]["line"] = data["line"][mask]
    info.update(repairs=repairs.summary(), accounting={os.path.basename(path): repairs.accounting()})
    events.write_events(out_dir, schema, history, samples, info)
    if fitted is None:
        state = fitted_state.make_state(
            dataset, "rest", options, schema, {"item_id": item_vocabulary, "user_id": user_vocabulary}
        )
        fitted_state.save_preprocessing(state, out_dir)


def _schema(options, item_size, user_size):
    d = options["embedding_dim"]
    return Schema(
        features=(
            Feature("item_id", "hist", int(item_size), d),
            Feature("rating", "hist", 12, d),
            Feature("user_id", "user", int(user_size), d),
            Feature("item_id", "cand", int(item_size), d),
        ),
        sequence_length=options["sequence_length"],
        time=True,
    )


def load(path, **kwargs):
    """`zoo.datasets.load("movielens", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("movielens", path, **kwargs)
