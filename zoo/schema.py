"""The input contract: one feature Schema for every model and data set (DESIGN.md, "The input contract").

A batch is `(features, labels)`; `features` is a flat dict whose keys are `<group>_<name>`:

| group | key           | shape    | dtype   | notes                                          |
|-------|---------------|----------|---------|------------------------------------------------|
| hist  | hist_<name>   | [B, L]   | int32   | chronological, newest last, 0 = padding (left) |
|       | hist_time     | [B, L]   | int64   | unix seconds, 0 on padding                     |
| user  | user_<name>   | [B]      | int32   | the profile ([B, S] for a tags feature)        |
| cand  | cand_<name>   | [B, M]   | int32   | M = 1 in training, m2 in parallel mode         |
|       | cand_<tags>   | [B, M, S]| int32   | a tags feature: up to S ids, 0 = empty slot    |
|       | cand_time     | [B, M]   | int64   | exposure time                                  |
| ctx   | ctx_<name>    | [B]      | int32   | context ([B, S] for a tags feature)            |
| num   | num_<name>    | [B]      | float32 | after the data set's transform                 |
| label | -             | [B, M]   | float32 |                                                |

Index 0 is padding in every ID vocabulary and the last index is out-of-vocabulary. A history field and a
candidate field with the same name (hist_item_id, cand_item_id) share one embedding table. A tags feature
(`Feature.tags` = S: a film's genres) holds up to S ids of its row and is embedded as their mean
(zoo.layers.FeatureEmbedding), so models read it as any one-valued field.
"""

import dataclasses
import difflib
import json
import re

import numpy as np

import zoo.budget as budget
from zoo.errors import ZooError
from zoo.feature import Feature

GROUPS = ("hist", "user", "cand", "ctx", "num")
ID_GROUPS = ("hist", "user", "cand", "ctx")
TIME_KEYS = ("hist_time", "cand_time")
NUMERIC_LIMIT = 1e9  # |num_*| above this is refused (see Schema.validate)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def time_limit():
    """(the largest time the backend holds exactly, why): int64's, or int32's under JAX without x64,
    which truncates int64 inputs to int32 (wrapping larger values) instead of refusing them."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        if not jax.config.jax_enable_x64:
            return int(np.iinfo("int32").max), "JAX without x64 truncates int64 times to int32: 2038-01-19"
    return int(np.iinfo("int64").max), "int64"


def check_range(name, value, time=False):
    """Ids and times are >= 0; times also within what the backend holds (`time_limit`): one-line ZooError
    naming `name` otherwise."""
    if value.size and value.min() < 0:
        raise ZooError(f"{name} has a negative value ({value.min()}); ids and times are >= 0")
    if time and value.size and value.max() > time_limit()[0]:
        limit, reason = time_limit()
        raise ZooError(f"{name} has {value.max()}, beyond {limit} ({reason})")


def first_unsorted(time, valid):
    """The first real behaviour (valid [B, L]) older than a real one before it in its row, as (row, the
    latest time before it, its time); None when every row is sorted oldest first (ties allowed)."""
    latest = np.maximum.accumulate(np.where(valid, time, np.iinfo("int64").min), axis=1)
    drops = valid[:, 1:] & (time[:, 1:] < latest[:, :-1])
    if not drops.any():
        return None
    row, j = np.argwhere(drops)[0]
    return row, latest[row, j], time[row, j + 1]


@dataclasses.dataclass(frozen=True)
class Schema:
    """The features of a data set and the shapes a model is built for.

    Args:
        features: the `Feature`s, in a fixed order (it fixes the token layout).
        sequence_length: L, the history length (0 when there is no hist feature).
        num_candidates: M, candidates per row (1 in ordinary training).
        time: whether the batches carry `hist_time` [B, L] and `cand_time` [B, M] (int64 seconds).
    """

    features: tuple
    sequence_length: int = 0
    num_candidates: int = 1
    time: bool = False

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(self.features))
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self):
        if not self.features:
            raise ZooError("schema has no features")
        seen = set()
        for feature in self.features:
            if not isinstance(feature, Feature):
                raise ZooError(f"schema feature {feature!r} is not a zoo.Feature")
            if feature.group not in GROUPS:
                raise ZooError(
                    f"feature '{feature.name}': unknown group '{feature.group}' "
                    f"(groups: {', '.join(GROUPS)})"
                )
            if not _NAME.match(feature.name) or feature.name == "time":
                raise ZooError(
                    f"feature '{feature.name}': a name is lower-case letters, digits and '_' "
                    "and is not 'time' (hist_time/cand_time come from Schema.time)"
                )
            if feature.key in seen:
                raise ZooError(f"feature '{feature.key}' appears twice in the schema")
            seen.add(feature.key)
            if feature.group == "num":
                if feature.vocabulary_size is not None:
                    raise ZooError(f"feature '{feature.key}' is numeric and takes no vocabulary_size")
            elif not isinstance(feature.vocabulary_size, int) or feature.vocabulary_size < 2:
                raise ZooError(
                    f"feature '{feature.key}' has vocabulary_size {feature.vocabulary_size!r}; "
                    "it needs at least 2 (id 0 is padding, the last id is out-of-vocabulary)"
                )
            if not isinstance(feature.embedding_dim, int) or feature.embedding_dim < 1:
                raise ZooError(
                    f"feature '{feature.key}' has embedding_dim {feature.embedding_dim!r}; it must be >= 1"
                )
            if not isinstance(feature.tags, int) or isinstance(feature.tags, bool) or feature.tags < 0:
                raise ZooError(f"feature '{feature.key}' has tags {feature.tags!r}; it must be an integer >= 0")
            if feature.tags and feature.group not in ("user", "cand", "ctx"):
                raise ZooError(f"feature '{feature.key}' has tags {feature.tags}: tags are features of a row "
                               "(groups user, cand, ctx), not of the history or a numeric")
            budget.check("embedding_dim", feature.embedding_dim, f"feature '{feature.key}' embedding_dim")
            budget.check("sequence_length", feature.tags, f"feature '{feature.key}' tags")
            budget.check("vocabulary_size", feature.vocabulary_size, f"feature '{feature.key}' vocabulary_size")
        has_hist = bool(self.group("hist"))
        if has_hist and (not isinstance(self.sequence_length, int) or self.sequence_length < 1):
            raise ZooError(
                f"schema has hist features but sequence_length is {self.sequence_length!r}; it must be >= 1"
            )
        if not has_hist and self.sequence_length:
            raise ZooError(
                f"schema has sequence_length {self.sequence_length} but no hist feature"
            )
        if not isinstance(self.num_candidates, int) or self.num_candidates < 1:
            raise ZooError(f"num_candidates is {self.num_candidates!r}; it must be >= 1")
        budget.check("sequence_length", self.sequence_length, "schema sequence_length")
        budget.check("num_candidates", self.num_candidates, "schema num_candidates")
        if self.time and not has_hist:
            raise ZooError("schema has time=True but no hist feature to time")
        for name in set(self.field_names("hist")) & set(self.field_names("cand")):
            hist, cand = self.feature(f"hist_{name}"), self.feature(f"cand_{name}")
            if cand.tags:
                raise ZooError(f"cand_{name} is a tags feature and hist_{name} one value a behaviour; the two would "
                               "share one embedding table: name one of them differently")
            if (hist.vocabulary_size, hist.embedding_dim) != (cand.vocabulary_size, cand.embedding_dim):
                raise ZooError(
                    f"hist_{name} and cand_{name} share one embedding table but differ in "
                    f"vocabulary_size/embedding_dim ({hist.vocabulary_size}/{hist.embedding_dim} vs "
                    f"{cand.vocabulary_size}/{cand.embedding_dim})"
                )

    def require(self, model_name, *, time=False, groups=()):
        """Raises a ZooError when `model_name` needs a part of the contract the schema lacks."""
        if time and not self.time:
            raise ZooError(f"{model_name} needs behaviour times but the schema has time=False")
        for group in groups:
            if not self.group(group):
                raise ZooError(f"{model_name} needs at least one {group}_ feature but the schema has none")

    # ------------------------------------------------------------------ queries
    def group(self, group):
        """The features of one group, in schema order."""
        return [f for f in self.features if f.group == group]

    def field_names(self, group):
        return [f.name for f in self.group(group)]

    def feature(self, key):
        for f in self.features:
            if f.key == key:
                return f
        raise ZooError(f"schema has no feature '{key}' (features: {', '.join(self.keys())})")

    def sequence_fields(self):
        """The token layout of behaviours and candidates: hist fields, then candidate-only fields.

        A behaviour token and a candidate token are both the concatenation of these fields'
        embeddings; a field the token's group lacks is zero-filled (SUAN's target-aware sequence).
        """
        names = self.field_names("hist")
        return names + [n for n in self.field_names("cand") if n not in names]

    def keys(self):
        """Every input key a batch carries, in a fixed order."""
        keys = []
        for group in GROUPS:
            keys += [f.key for f in self.group(group)]
            if self.time and group in ("hist", "cand"):
                keys.append(f"{group}_time")
        return keys

    def input_spec(self, num_candidates=None):
        """{key: (shape without batch, dtype)} for every input."""
        m = self.num_candidates if num_candidates is None else num_candidates
        tags = {f.key: (f.tags,) for f in self.features if f.tags}
        spec = {}
        for key in self.keys():
            group = key.split("_", 1)[0]
            shape = {"hist": (self.sequence_length,), "cand": (m,)}.get(group, ()) + tags.get(key, ())
            dtype = "int64" if key in TIME_KEYS else ("float32" if group == "num" else "int32")
            spec[key] = (shape, dtype)
        return spec

    def inputs(self, num_candidates=None):
        """Typed `keras.Input`s named after the schema keys."""
        import keras

        return {
            key: keras.Input(shape=shape, dtype=dtype, name=key)
            for key, (shape, dtype) in self.input_spec(num_candidates).items()
        }

    def with_candidates(self, num_candidates):
        """The same schema with M = num_candidates (parallel-candidate mode)."""
        return dataclasses.replace(self, num_candidates=num_candidates)

    # ------------------------------------------------------------------ batches
    def validate(self, features, labels=None, keys=None, empty_ok=True):
        """Checks a batch against the contract before any backend sees it; returns it as NumPy arrays of
        the contract's dtypes. Every problem is a one-line ZooError naming the feature:

        - a dict holding exactly the schema's keys, or with `keys` (the subset a serving part takes) at
          least those: other schema keys are then left out of the returned batch;
        - the same B everywhere; hist_* [B, L] with L the schema's sequence_length (left-pad shorter
          histories with 0); cand_* [B, M] with one M; with empty_ok=False (every scoring entry point)
          B >= 1 and M >= 1;
        - ids are integers in [0, vocabulary_size) (negative or too large ids are refused, never wrapped);
          times are integers >= 0 that the backend holds exactly (int64; int32, up to 2038-01-19, under
          JAX without x64, which would truncate larger ones); numerics are finite and within
          +-NUMERIC_LIMIT (they are expected after the paper's transform, and squares of larger values
          overflow float32);
        - every row's real behaviours are sorted oldest first (equal times allowed): unsorted histories
          are refused for every model, never sorted silently.
        """
        expected = self.keys() if keys is None else [k for k in self.keys() if k in set(keys)]
        self.check_keys(features, expected)
        batch, arrays = None, {}
        spec = self.input_spec(num_candidates=-1)
        for key in expected:
            shape, dtype = spec[key]
            try:
                value = np.asarray(features[key])
            except ValueError:
                value = np.asarray(features[key], dtype=object)
            if value.dtype == object:
                raise ZooError(f"{key} is ragged or holds non-numbers; the contract wants one array per feature")
            if value.ndim != 1 + len(shape):
                axes = (["L"] if key.startswith("hist") else ["M"] if key.startswith("cand") else [])
                raise ZooError(f"{key} has shape {list(value.shape)} but the contract wants "
                               f"{['B'] + axes[:len(shape)] + ['S'] * (len(shape) - len(axes[:len(shape)]))}")
            if len(shape) and shape[-1] not in (-1, None) and key not in TIME_KEYS and self.feature(key).tags \
                    and value.shape[-1] != shape[-1]:
                raise ZooError(f"{key} holds {value.shape[-1]} tags per row but the schema's feature holds "
                               f"{shape[-1]} (pad with 0)")
            if batch is None:
                batch = value.shape[0]
                if batch == 0 and not empty_ok:
                    raise ZooError("the batch is empty (B = 0); send at least one row")
            elif value.shape[0] != batch:
                raise ZooError(f"{key} has batch size {value.shape[0]} but other features have {batch}")
            if key.startswith("hist") and value.shape[1] > self.sequence_length:
                raise ZooError(f"{key} has length {value.shape[1]} but the schema allows {self.sequence_length}")
            if key.startswith("hist") and value.shape[1] < self.sequence_length:
                raise ZooError(
                    f"{key} has length {value.shape[1]} but the schema needs {self.sequence_length} "
                    "(left-pad the history with 0)"
                )
            if dtype == "float32":
                if not np.issubdtype(value.dtype, np.number):
                    raise ZooError(f"{key} must be numeric, got dtype {value.dtype}")
                if not np.all(np.isfinite(value)):
                    raise ZooError(f"{key} contains NaN or infinite values")
                if value.size and np.abs(value).max() > NUMERIC_LIMIT:
                    raise ZooError(
                        f"{key} has {np.abs(value).max():.3g}, beyond +-{NUMERIC_LIMIT:.0e}: numeric features are "
                        "expected after the paper's transform (log, standardisation or buckets)"
                    )
            else:
                if not np.issubdtype(value.dtype, np.integer):
                    kind = "times (unix seconds)" if key in TIME_KEYS else "ids"
                    raise ZooError(f"{key} must hold integer {kind}, got dtype {value.dtype}")
                check_range(key, value, time=key in TIME_KEYS)
                if key not in TIME_KEYS:
                    vocab = self.feature(key).vocabulary_size
                    if value.size and value.max() >= vocab:
                        raise ZooError(
                            f"{key} has id {value.max()} but its vocabulary_size is {vocab} "
                            f"(ids lie in [0, {vocab}); map unknown values to {vocab - 1}, the OOV id)"
                        )
            arrays[key] = value.astype(dtype, copy=False)
        cand_lengths = {arrays[k].shape[1] for k in arrays if k.startswith("cand")}
        if len(cand_lengths) > 1:
            raise ZooError(f"candidate features disagree on M: lengths {sorted(cand_lengths)}")
        if cand_lengths == {0} and not empty_ok:
            raise ZooError("the batch has no candidates to score (cand_* arrays have M = 0)")
        self._check_sorted(arrays)
        if labels is not None:
            labels = np.asarray(labels)
            if labels.shape[0] != batch or (cand_lengths and labels.shape[1:] != (cand_lengths.pop(),)):
                raise ZooError(f"labels have shape {list(labels.shape)}; the contract wants [B, M]")
        return arrays

    def batch_check(self, features):
        """`features` (a dict of TensorFlow tensors: a tf.data batch) behind graph asserts of what `validate`
        checks per value: ids in [0, vocabulary_size), numerics finite and within +-NUMERIC_LIMIT. Keras'
        fit, evaluate and predict on a tf.data.Dataset run it on each batch in the input pipeline (zoo
        models map their datasets through it), where a bad batch raises InvalidArgumentError "assertion
        failed: [a batch of the data: <the line validate would give>]" before any backend sees it."""
        import tensorflow as tf

        checks = []
        for feature in self.features:
            if feature.key not in features:
                continue
            key, value = feature.key, features[feature.key]
            empty = tf.equal(tf.size(value), 0)
            if feature.group in ID_GROUPS:
                low, high = tf.reduce_min(value), tf.reduce_max(value)
                vocab = feature.vocabulary_size
                checks.append(tf.debugging.Assert(empty | (low >= 0), [tf.strings.join([
                    f"a batch of the data: {key} has a negative value (", tf.strings.as_string(low),
                    "); ids and times are >= 0"])]))
                checks.append(tf.debugging.Assert(empty | (high < vocab), [tf.strings.join([
                    f"a batch of the data: {key} has id ", tf.strings.as_string(high), f" but its vocabulary_size is "
                    f"{vocab} (ids lie in [0, {vocab}); map unknown values to {vocab - 1}, the OOV id)"])]))
            else:
                value = tf.cast(value, tf.float32)
                checks.append(tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(value)), [
                    f"a batch of the data: {key} contains NaN or infinite values"]))
                checks.append(tf.debugging.Assert(empty | (tf.reduce_max(tf.abs(value)) <= NUMERIC_LIMIT), [
                    f"a batch of the data: {key} has values beyond +-{NUMERIC_LIMIT:.0e}: numeric features are "
                    "expected after the paper's transform (log, standardisation or buckets)"]))
        with tf.control_dependencies(checks):
            return {key: tf.identity(value) for key, value in features.items()}

    def check_keys(self, features, expected=None):
        """Refuses (one-line ZooError) a `features` that is not a dict, that holds a key outside the
        schema or lacks one of `expected` (default: every schema key)."""
        if not isinstance(features, dict):
            raise ZooError(f"features must be a dict of named arrays, got {type(features).__name__}")
        unknown = sorted(str(k) for k in set(features) - set(self.keys()))
        if unknown:
            close = difflib.get_close_matches(unknown[0], self.keys(), n=1, cutoff=0.85)  # a typo, not a new feature
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ZooError(f"unknown feature(s) {', '.join(unknown)} (schema keys: {', '.join(self.keys())}){hint}")
        missing = [k for k in (self.keys() if expected is None else expected) if k not in features]
        if missing:
            raise ZooError(f"batch is missing feature '{missing[0]}'")

    def _check_sorted(self, arrays):
        """Every row's real behaviours (a non-zero id in some hist_ field) oldest first; ties allowed."""
        if "hist_time" not in arrays:
            return
        ids = [arrays[f.key] for f in self.group("hist") if f.key in arrays]
        time = arrays["hist_time"]
        valid = np.any(np.stack([i != 0 for i in ids], axis=-1), axis=-1) if ids else time != 0
        drop = first_unsorted(time, valid)
        if drop is not None:
            row, before, after = drop
            raise ZooError(
                f"hist_time of row {row} is not sorted oldest first ({before} is followed by "
                f"{after}); every history must be chronological, newest last"
            )

    # ------------------------------------------------------------------ JSON
    def to_dict(self):
        return {
            "sequence_length": self.sequence_length,
            "num_candidates": self.num_candidates,
            "time": self.time,
            "features": [f.to_dict() for f in self.features],
        }

    @classmethod
    def from_dict(cls, config):
        if isinstance(config, Schema):
            return config
        if not isinstance(config, dict):
            raise ZooError(f"a schema is a JSON object, got {type(config).__name__}")
        allowed = {"sequence_length", "num_candidates", "time", "features"}
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ZooError(f"schema has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
        if not isinstance(config.get("features"), list):
            raise ZooError("schema needs a 'features' list")
        fields = {f.name for f in dataclasses.fields(Feature)}
        features = []
        for item in config["features"]:
            if not isinstance(item, dict) or not {"name", "group"} <= set(item) or set(item) - fields:
                raise ZooError(
                    f"schema feature {item!r} must be an object with name, group and optionally "
                    "vocabulary_size, embedding_dim, hashed"
                )
            features.append(Feature(**item))
        return cls(features=tuple(features), **{k: config[k] for k in allowed - {"features"} if k in config})

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text):
        try:
            config = json.loads(text)
        except json.JSONDecodeError as error:
            raise ZooError(f"schema is not valid JSON ({error})") from None
        return cls.from_dict(config)
