"""The papers' preprocessing steps, shared by the readers.

Vocabularies, hash buckets and numeric buckets are fitted on the training split only; ids follow the
contract (0 = padding, 1..n = fitted values, n + 1 = out-of-vocabulary). A fitted one is plain data:
`get_state()` gives a JSON-serialisable dict and `from_state(state)` rebuilds it (the pieces of
`zoo.datasets.fitted`'s preprocessing.json). Time splits, k-core filtering and history indexing work on
NumPy arrays of already-parsed events.
"""

import math
import zlib

import numpy as np

from zoo.errors import ZooError


class Vocabulary:
    """Token -> id, fitted on training tokens: ids 1..n by descending count, n + 1 = OOV.

    Args:
        min_count: tokens seen fewer times in training map to the OOV id.
        max_size: when more than this many tokens are kept, the field is hashed into `max_size`
            buckets instead (`hashed` is then the HashedIds; DeRes' "hashed to at most 100k values").
    """

    def __init__(self, min_count=1, max_size=None):
        self.min_count = min_count
        self.max_size = max_size
        self.counts = {}
        self.index = None
        self.hashed = None

    def fit(self, token):
        self.counts[token] = self.counts.get(token, 0) + 1

    def fit_many(self, tokens):
        counts = self.counts
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1

    def fit_counts(self, tokens, counts):
        """Adds `counts[i]` training occurrences of `tokens[i]` (counted elsewhere, e.g. vectorised)."""
        for token, count in zip(tokens, counts):
            if count:
                self.counts[token] = self.counts.get(token, 0) + int(count)

    def finalize(self):
        kept = [t for t, c in self.counts.items() if c >= self.min_count]
        if self.max_size is not None and len(kept) > self.max_size:
            self.hashed = HashedIds(self.max_size)
            self.index, self.counts = {}, {}
            return self
        kept.sort(key=lambda t: (-self.counts[t], t))
        self.index = {t: i + 1 for i, t in enumerate(kept)}
        self.counts = {}
        return self

    @property
    def size(self):
        """vocabulary_size of the contract: padding + fitted tokens + OOV."""
        return self.hashed.size if self.hashed else len(self.index) + 2

    @property
    def oov(self):
        return self.hashed.oov if self.hashed else len(self.index) + 1

    def lookup(self, token):
        if self.hashed is not None:
            return self.hashed.lookup(token)
        return self.index.get(token, len(self.index) + 1)

    @classmethod
    def from_tokens(cls, tokens):
        """A fitted Vocabulary whose token `tokens[i]` has id i + 1."""
        vocabulary = cls()
        vocabulary.index = {token: i + 1 for i, token in enumerate(tokens)}
        if len(vocabulary.index) != len(tokens):
            raise ZooError("a vocabulary lists the same token twice")
        return vocabulary

    def get_state(self):
        """{"kind": "vocabulary", "tokens": [token of id 1, id 2, ...]}, or the HashedIds' state."""
        if self.index is None:
            raise ZooError("the vocabulary is not fitted yet (call finalize first)")
        if self.hashed is not None:
            return self.hashed.get_state()
        return {"kind": "vocabulary", "tokens": sorted(self.index, key=self.index.get)}


class HashedIds:
    """Token -> 1 + crc32(token) mod `buckets` (a stable hash; DeRes hashes high-cardinality fields)."""

    def __init__(self, buckets):
        self.buckets = buckets

    @property
    def size(self):
        return self.buckets + 2

    @property
    def oov(self):
        return self.buckets + 1

    def lookup(self, token):
        return 1 + zlib.crc32(token.encode("latin-1")) % self.buckets

    def get_state(self):
        return {"kind": "hashed", "buckets": self.buckets}


class QuantileBuckets:
    """Equal-frequency buckets of a numeric field, fitted on a seeded reservoir of training values.

    Missing values (NaN) are kept in the reservoir and replaced by the training mean at `finalize`
    (DeRes: "missing numerics -> field mean"), so the mean takes its share of the buckets. Ids are
    1..num_buckets; vocabulary_size is num_buckets + 2 (padding, OOV unused but reserved).
    """

    def __init__(self, num_buckets=10, reservoir=100_000, seed=0):
        self.num_buckets = num_buckets
        self.reservoir = np.empty(reservoir, dtype=np.float64)
        self.seen = 0
        self.total = 0.0
        self.present = 0
        self.rng = np.random.default_rng(seed)
        self.mean = 0.0
        self.edges = None

    def fit(self, value):
        if not math.isnan(value):
            self.total += value
            self.present += 1
        capacity = self.reservoir.size
        if self.seen < capacity:
            self.reservoir[self.seen] = value
        else:
            slot = self.rng.integers(0, self.seen + 1)
            if slot < capacity:
                self.reservoir[slot] = value
        self.seen += 1

    def finalize(self):
        self.mean = self.total / self.present if self.present else 0.0
        values = self.reservoir[: min(self.seen, self.reservoir.size)]
        values = np.where(np.isnan(values), self.mean, values)
        if values.size:
            quantiles = np.quantile(values, np.arange(1, self.num_buckets) / self.num_buckets)
            self.edges = np.unique(quantiles)
        else:
            self.edges = np.zeros(0)
        self.reservoir = None
        return self

    @property
    def size(self):
        return self.num_buckets + 2

    def lookup(self, value):
        if math.isnan(value):
            value = self.mean
        return 1 + int(np.searchsorted(self.edges, value, side="right"))

    def get_state(self):
        if self.edges is None:
            raise ZooError("the buckets are not fitted yet (call finalize first)")
        return {"kind": "quantile_buckets", "num_buckets": self.num_buckets, "mean": self.mean,
                "edges": [float(e) for e in self.edges]}


def from_state(state):
    """The fitted Vocabulary, HashedIds or QuantileBuckets that `get_state()` described."""
    kind = state.get("kind") if isinstance(state, dict) else None
    try:
        if kind == "vocabulary":
            tokens = state["tokens"]
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise ValueError("tokens must be a list of strings")
            return Vocabulary.from_tokens(tokens)
        if kind == "hashed":
            return HashedIds(_positive(state["buckets"]))
        if kind == "quantile_buckets":
            buckets = QuantileBuckets(_positive(state["num_buckets"]), reservoir=0)
            buckets.reservoir = None
            buckets.mean = float(state["mean"])
            buckets.edges = np.asarray(state["edges"], dtype=np.float64)
            if buckets.edges.ndim != 1 or np.any(np.diff(buckets.edges) <= 0):
                raise ValueError("edges must be increasing numbers")
            return buckets
    except KeyError as error:
        raise ZooError(f"a fitted {kind} lacks {error}") from None
    except (TypeError, ValueError) as error:
        raise ZooError(f"a fitted {kind} is malformed: {error}") from None
    raise ZooError(f"unknown fitted table kind {kind!r} (kinds: vocabulary, hashed, quantile_buckets)")


def _positive(value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"expected a positive integer, found {value!r}")
    return value


def log_count(value):
    """DeRes' log transform of a count: sign-preserving log(1 + |x|) (Criteo's I2 can be -1..-3)."""
    return math.copysign(math.log1p(abs(value)), value)


def bars_numeric(value):
    """BARS' Criteo numeric transform: x > 2 -> floor(ln(x)^2), else int(x), as a category token."""
    if value > 2:
        return str(int(math.floor(math.log(value) ** 2)))
    return str(int(value))


def k_core(users, items, k):
    """Mask of the interactions left by an iterative k-core (users and items with >= k interactions)."""
    keep = np.ones(users.shape[0], dtype=bool)
    while True:
        _, user_inverse, user_counts = np.unique(users[keep], return_inverse=True, return_counts=True)
        _, item_inverse, item_counts = np.unique(items[keep], return_inverse=True, return_counts=True)
        ok = (user_counts[user_inverse] >= k) & (item_counts[item_inverse] >= k)
        if ok.all():
            return keep
        keep[np.flatnonzero(keep)[~ok]] = False


def sort_events(users, times):
    """The stable order of events by (user, time); ties keep file order."""
    return np.lexsort((np.arange(users.shape[0]), times, users))


def block_starts(users_sorted):
    """For events sorted by user: the index of the first event of each event's user."""
    n = users_sorted.shape[0]
    start = np.zeros(n, dtype=np.int64)
    if n:
        new = np.concatenate([[True], users_sorted[1:] != users_sorted[:-1]])
        start = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    return start


def history_ends(users_sorted, times_sorted):
    """For events sorted by (user, time): the end (exclusive) of each event's visible history.

    The history of event j is the user's events strictly earlier in time: [block_start, end_j), where
    end_j is the first event of the user with the same time as j. Ties in time never see each other,
    so nothing at or after a label's time reaches its features.
    """
    n = users_sorted.shape[0]
    if not n:
        return np.zeros(0, dtype=np.int64)
    new = np.concatenate(
        [[True], (users_sorted[1:] != users_sorted[:-1]) | (times_sorted[1:] != times_sorted[:-1])]
    )
    return np.maximum.accumulate(np.where(new, np.arange(n), 0)).astype(np.int64)


def per_user_split(users_sorted, fractions=(0.8, 0.1, 0.1)):
    """Split codes (0 train, 1 validation, 2 test) of events sorted by (user, time): per user, the
    first floor(0.8 n) events train, up to floor(0.9 n) validation, the rest test (ReST)."""
    n = users_sorted.shape[0]
    starts = block_starts(users_sorted)
    rank = np.arange(n) - starts
    _, inverse, counts = np.unique(users_sorted, return_inverse=True, return_counts=True)
    size = counts[inverse]
    train_end = np.floor(size * fractions[0]).astype(np.int64)
    valid_end = np.floor(size * (fractions[0] + fractions[1])).astype(np.int64)
    return np.where(rank < train_end, 0, np.where(rank < valid_end, 1, 2)).astype(np.int8)


def held_out_users_split(users, fractions=(0.8, 0.1, 0.1), seed=0):
    """Split codes (0 train, 1 validation, 2 test) of rows by their `users` (texts): every row of a user in
    one split, so no validation or test user is seen in training. A user's split is drawn from a seeded
    hash of its text (blake2b: a uniform number in [0, 1) cut at the fractions' cumulative shares), the
    same in any process, file, chunk or row order; the fractions are shares of users, not of rows."""
    import hashlib

    distinct, inverse = np.unique(np.asarray(users, dtype=str), return_inverse=True)
    draws = np.array([int.from_bytes(hashlib.blake2b(f"{seed}\0{user}".encode(), digest_size=8).digest(), "big")
                      for user in distinct.tolist()], dtype=np.float64) / 2.0 ** 64
    codes = np.searchsorted(np.cumsum(fractions)[:2], draws, side="right").astype(np.int8)
    return np.minimum(codes, 2)[inverse]


def day_cuts(times, fractions=(0.8, 0.1, 0.1), utc_offset=0):
    """Whole-day time boundaries (t_validation, t_test): the last days holding >= fractions[2] of the
    events are test, the days before them holding >= fractions[1] validation, the rest train.

    With 3 or more days each split gets at least one day; with 2 days validation is empty; with one
    day everything is train.
    """
    days = (np.asarray(times, dtype=np.int64) + utc_offset) // 86400
    unique, counts = np.unique(days, return_counts=True)
    return day_cuts_from_counts(unique, counts, fractions, utc_offset)


def day_cuts_from_counts(unique, counts, fractions=(0.8, 0.1, 0.1), utc_offset=0):
    """`day_cuts` from sorted day numbers (days since the epoch, shifted by utc_offset) and their
    event counts, for readers that count days in a streaming pass."""
    unique, counts = np.asarray(unique, dtype=np.int64), np.asarray(counts)
    if unique.size < 2:
        cut = (int(unique[0]) + 1) * 86400 - utc_offset if unique.size else 0
        return cut, cut
    tail = np.cumsum(counts[::-1])[::-1] / counts.sum()  # share of events from day i to the end
    test = max(int(np.flatnonzero(tail >= fractions[2] - 1e-12).max()), 1)
    if unique.size == 2:
        valid = test
    else:
        test = max(test, 2)
        enough = np.flatnonzero(tail[:test] - tail[test] >= fractions[1] - 1e-12)
        valid = max(int(enough.max()) if enough.size else test - 1, 1)
    return int(unique[valid]) * 86400 - utc_offset, int(unique[test]) * 86400 - utc_offset


def split_by_time(times, cuts):
    """Split codes (0 train, 1 validation, 2 test) from `day_cuts` boundaries."""
    valid_start, test_start = cuts
    return np.where(times < valid_start, 0, np.where(times < test_start, 1, 2)).astype(np.int8)
