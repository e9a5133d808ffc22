"""A team's own impression log, as the data-spec tests and the README's walkthrough use it: a CSV with a
header, string ids, item titles holding commas (quoted), ISO 8601 times, a 0/1 label, a price with gaps,
the item's tags (`sale|gift`, none to five, some padded with white space) and columns in no particular
order. Clicks follow each user's favourite category, so a model can learn.
"""

import csv
import datetime

import numpy as np

COLUMNS = ("clicked", "ts", "item_id", "title", "user_id", "price", "category", "device", "tags")
TAGS = ("new", "sale", "gift", "eco", "bulk")


def _tags(item, new=False):
    """The item's tags (none to five of TAGS), `|`-joined; every 11th item's padded with white space (a no-break
    space before, a space after, trimmed when read); a renamed (unseen) item's led by "fresh", a tag no earlier
    log knows."""
    tags = (["fresh"] if new else []) + [TAGS[j] for j in range(len(TAGS)) if (item >> j) & 1]
    return "|".join(f"\u00a0{tag} " for tag in tags) if item % 11 == 0 else "|".join(tags)


def write_impression_log(path, rows=600, users=30, items=80, seed=0, start="2024-03-01T08:00:00Z", days=10,
                         unseen_from=None):
    """Writes `rows` impressions to `path`; returns the path. Item ids at or above `unseen_from` (when
    given) are renamed so that no earlier log knows them."""
    rng = np.random.default_rng(seed)
    begin = datetime.datetime.fromisoformat(start.replace("Z", "+00:00"))
    favourite = rng.integers(0, 6, size=users)
    category = rng.integers(0, 6, size=items)
    seconds = np.sort(rng.integers(0, days * 86400, size=rows))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_MINIMAL)
        writer.writerow(COLUMNS)
        for i in range(rows):
            user = int(rng.integers(0, users))
            item = int(rng.integers(0, items))
            p = 0.6 if category[item] == favourite[user] else 0.12
            moment = begin + datetime.timedelta(seconds=int(seconds[i]))
            item_key = f"sku-{item:04d}" if unseen_from is None or item < unseen_from else f"new-{item:04d}"
            price = "" if i % 17 == 0 else f"{(item % 13) * 3.5 + 1:.2f}"
            writer.writerow([
                int(rng.random() < p), moment.strftime("%Y-%m-%dT%H:%M:%SZ"), item_key,
                f"Item {item}, size {item % 3}, \"deluxe\"" if item % 5 == 0 else f"Item {item}, size {item % 3}",
                f"user-{user:03d}", price, f"cat {category[item]}", ["ios", "android", "web"][i % 3],
                _tags(item, new=not (unseen_from is None or item < unseen_from)),
            ])
    return path


def impression_spec(sequence_length=10, split=None, statistics=True, feedback=True):
    """The spec `python -m zoo spec draft` gives for this log with --label clicked --time ts --user user_id
    --item item_id, written out (the drafting test checks that the draft equals it in what matters).
    `statistics=False` leaves out the running statistics (built in memory only: not by a streaming build
    or a process group), `feedback=False` the history's labels (and the user's statistics read from them, the
    user's and the user x category pair's)."""
    spec = {
        "source": {"format": "csv", "delimiter": ",", "header": True},
        "label": {"column": "clicked"},
        "time": {"column": "ts", "format": "iso8601"},
        "user": "user_id",
        "item": "item_id",
        "columns": {
            "user_id": {"role": "user"},
            "item_id": {"role": "cand"},
            "category": {"role": "cand"},
            "title": {"role": "cand"},
            "device": {"role": "ctx"},
            "price": {"role": "num", "type": "numeric", "log1p": True},
            "tags": {"role": "cand", "type": "tags", "separator": "|", "max_tags": 4},
        },
        "history": {"from": "log", "fields": ["item_id", "category"], "feedback": feedback},
        "statistics": {"keys": ["user_id", "item_id", ["user_id", "category"]] if feedback else ["item_id"]},
        "sequence_length": sequence_length,
        "split": split or {"by": "time", "fractions": [0.8, 0.1, 0.1]},
    }
    if not statistics:
        del spec["statistics"]
    return spec
