"""Amazon Books ratings (McAuley's raw ratings CSV: user,item,rating,timestamp, no header; a header
line user,item,rating,timestamp is also accepted) under ReST's protocol, exactly as `movielens`
(rating >= 4 positive, 5-core, per-user time-ordered 80/10/10, history <= 200), including its fitted
preprocessing and scoring mode; the file is read as `movielens` reads its files, through the data-spec
engine's pyarrow reader (`events.read_log`).

Already-preprocessed files are refused with a ZooError rather than guessed at: torch-rechub's
amazon_books_sample.csv (header user_id,item_id,time,label; re-indexed ids, a day index for time and
a label of 1/2 whose meaning is not documented) cannot be turned back into ratings and timestamps.
"""

from zoo.datasets import movielens
from zoo.datasets.reading import find_file, first_line
from zoo.errors import ZooError

PROTOCOLS = {"rest": "ReST: rating >= 4 positive, 5-core, per-user time-ordered 80/10/10, history <= 200"}
APPLIES_PREPROCESSING = ("rest",)  # scoring mode with a fitted preprocessing, as movielens
DEFAULT_PROTOCOL = "rest"
OPTIONS = {"rest": dict(movielens.OPTIONS["rest"])}
FILES = ("ratings_Books.csv", "Books.csv", "ratings.csv")
HEADER = ("user", "item", "rating", "timestamp")


def raw_files(path, protocol):
    path = find_file(path, FILES, "amazon_books")
    head = [f.strip().lower() for f in first_line(path).split(",")]
    if head == ["user_id", "item_id", "time", "label"]:
        raise ZooError(
            f"{path} is an already-preprocessed file (user_id,item_id,time,label), not the raw "
            "ratings CSV (user,item,rating,timestamp) the ReST protocol starts from"
        )
    return [path]


def build(files, protocol, options, out_dir, verbose, fitted=None):
    movielens.build_rest(files[0], ",", HEADER, options, out_dir, dataset="amazon_books", fitted=fitted)


def load(path, **kwargs):
    """`zoo.datasets.load("amazon_books", path, **kwargs)`: (tf.data.Dataset, Schema)."""
    from zoo.datasets import registry

    return registry.load("amazon_books", path, **kwargs)
