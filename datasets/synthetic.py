"""The embedded default data source: a seeded behaviour simulator that yields the input contract."""

import dataclasses

import numpy as np

from zoo.feature import Feature
from zoo.schema import Schema

_START = 1_700_000_000  # 2023-11-14, unix seconds


@dataclasses.dataclass
class BehaviourSimulator:
    """Users with profiles and drifting interests, items with categories, timestamped behaviours.

    Each user has a timeline of `timeline_length` behaviours. At every step the user holds
    `num_interests` interest categories; with probability `drift` one of them is replaced by a random
    category. A behaviour picks one of the current interests (or, with probability 0.1, any category)
    and an item of that category; gaps between behaviours are exponential (mean `mean_gap` seconds).

    A row is (user, step s): the history is the user's last L behaviours before s (left-padded), the
    candidate is shown at the time of step s, from a current interest with probability 1/2 and
    otherwise a random category. The ground-truth click probability is

        logit = -2.5 + 8 * affinity + 0.5 * profile_match + 0.3 * price
        affinity = sum_j 0.8^(s-1-j) [cat_j = cat_cand] / sum_j 0.8^(s-1-j)   over the visible history

    so the recent history carries most of the signal and the profile only a little: a sequence model
    beats a profile-only one (tested). Nothing after step s reaches the row's features.
    """

    num_users: int = 500
    num_items: int = 500
    num_categories: int = 40
    num_interests: int = 3
    sequence_length: int = 30
    timeline_length: int = 80
    drift: float = 0.05
    mean_gap: float = 3600.0
    embedding_dim: int = 8
    seed: int = 0

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        # Items: ids 1..num_items; the vocabulary adds 0 (padding) and num_items + 1 (OOV).
        self.item_category = np.concatenate([[0], rng.integers(1, self.num_categories + 1, self.num_items)])
        self.item_price = np.concatenate([[0.0], rng.normal(0.0, 1.0, self.num_items)]).astype("float32")
        self.items_by_category = [
            np.flatnonzero(self.item_category == c) for c in range(self.num_categories + 1)
        ]
        for c in range(1, self.num_categories + 1):
            if self.items_by_category[c].size == 0:  # every category needs an item
                item = rng.integers(1, self.num_items + 1)
                self.item_category[item] = c
                self.items_by_category = [
                    np.flatnonzero(self.item_category == k) for k in range(self.num_categories + 1)
                ]
        users = self.num_users
        self.user_age = rng.integers(1, 7, users)
        self.user_gender = rng.integers(1, 3, users)
        self.user_city = rng.integers(1, 11, users)
        self._simulate_timelines(rng)

    @property
    def schema(self):
        """The Schema of the simulated rows (M = 1)."""
        i, c, d = self.num_items + 2, self.num_categories + 2, self.embedding_dim
        return Schema(
            features=(
                Feature("item_id", "hist", i, d),
                Feature("category", "hist", c, d),
                Feature("behavior", "hist", 6, d),
                Feature("user_id", "user", self.num_users + 2, d),
                Feature("age", "user", 8, d),
                Feature("gender", "user", 4, d),
                Feature("city", "user", 12, d),
                Feature("item_id", "cand", i, d),
                Feature("category", "cand", c, d),
                Feature("hour", "ctx", 26, d),
                Feature("price", "num"),
            ),
            sequence_length=self.sequence_length,
            num_candidates=1,
            time=True,
        )

    def _simulate_timelines(self, rng):
        users, steps = self.num_users, self.timeline_length
        interests = rng.integers(1, self.num_categories + 1, (users, self.num_interests))
        self.interest_log = np.zeros((users, steps, self.num_interests), dtype=np.int64)
        categories = np.zeros((users, steps), dtype=np.int64)
        items = np.zeros((users, steps), dtype=np.int64)
        gaps = np.maximum(1, rng.exponential(self.mean_gap, (users, steps))).astype(np.int64)
        start = _START + rng.integers(0, 30 * 86400, users)
        self.times = start[:, None] + np.cumsum(gaps, axis=1)
        for s in range(steps):
            drifting = rng.random(users) < self.drift
            slot = rng.integers(0, self.num_interests, users)
            fresh = rng.integers(1, self.num_categories + 1, users)
            interests[drifting, slot[drifting]] = fresh[drifting]
            self.interest_log[:, s] = interests
            pick = interests[np.arange(users), rng.integers(0, self.num_interests, users)]
            wander = rng.random(users) < 0.1
            categories[:, s] = np.where(wander, rng.integers(1, self.num_categories + 1, users), pick)
            items[:, s] = self._item_of(categories[:, s], rng)
        self.categories, self.items = categories, items
        self.behaviors = rng.choice([1, 2, 3, 4], size=(users, steps), p=[0.7, 0.1, 0.1, 0.1])

    def _item_of(self, categories, rng):
        return np.array([rng.choice(self.items_by_category[c]) for c in categories])

    def sample(self, num_rows, seed=None, return_probability=False):
        """`num_rows` rows as (features, labels) NumPy dicts in the contract (and the truth if asked)."""
        rng = np.random.default_rng(self.seed + 1 if seed is None else seed)
        length = self.sequence_length
        user = rng.integers(0, self.num_users, num_rows)
        step = rng.integers(1, self.timeline_length, num_rows)
        # History: the last L behaviours strictly before `step`, left-padded.
        offsets = np.arange(-length, 0)  # [L]
        index = step[:, None] + offsets[None, :]  # [N, L]
        visible = index >= 0
        safe = np.where(visible, index, 0)
        take = lambda table: np.where(visible, table[user[:, None], safe], 0)  # noqa: E731
        hist_item, hist_cat, hist_behavior, hist_time = (
            take(self.items), take(self.categories), take(self.behaviors), take(self.times)
        )
        # Candidate at step `step`, from the interests the user holds then.
        held = self.interest_log[user, step]  # [N, K]
        on_interest = rng.random(num_rows) < 0.5
        cand_cat = np.where(
            on_interest,
            held[np.arange(num_rows), rng.integers(0, self.num_interests, num_rows)],
            rng.integers(1, self.num_categories + 1, num_rows),
        )
        cand_item = self._item_of(cand_cat, rng)
        cand_time = self.times[user, step]
        decay = np.where(visible, 0.8 ** (-1 - offsets)[None, :], 0.0)  # 0.8^(s-1-j)
        affinity = (decay * (hist_cat == cand_cat[:, None])).sum(1) / decay.sum(1)
        profile_match = ((self.user_age[user] * 7 + cand_cat) % 4 == 0).astype(float)
        price = self.item_price[cand_item]
        logit = -2.5 + 8.0 * affinity + 0.5 * profile_match + 0.3 * price
        probability = 1.0 / (1.0 + np.exp(-logit))
        labels = (rng.random(num_rows) < probability).astype("float32")[:, None]
        hour = ((cand_time // 3600) % 24 + 1).astype("int32")
        features = {
            "hist_item_id": hist_item.astype("int32"),
            "hist_category": hist_cat.astype("int32"),
            "hist_behavior": hist_behavior.astype("int32"),
            "hist_time": hist_time.astype("int64"),
            "user_user_id": (user + 1).astype("int32"),
            "user_age": self.user_age[user].astype("int32"),
            "user_gender": self.user_gender[user].astype("int32"),
            "user_city": self.user_city[user].astype("int32"),
            "cand_item_id": cand_item[:, None].astype("int32"),
            "cand_category": cand_cat[:, None].astype("int32"),
            "cand_time": cand_time[:, None].astype("int64"),
            "ctx_hour": hour,
            "num_price": price.astype("float32"),
        }
        if return_probability:
            return features, labels, probability[:, None].astype("float32")
        return features, labels

    def dataset(self, num_rows, batch_size=256, seed=None, shuffle=True):
        """A batched, shuffled, prefetched tf.data.Dataset of `num_rows` rows."""
        import tensorflow as tf

        features, labels = self.sample(num_rows, seed=seed)
        ds = tf.data.Dataset.from_tensor_slices((features, labels))
        if shuffle:
            ds = ds.shuffle(min(num_rows, 10_000), seed=self.seed, reshuffle_each_iteration=True)
        return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
