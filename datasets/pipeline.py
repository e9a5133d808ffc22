"""tf.data pipelines over a processed data set, in the input contract.

Batches are assembled in NumPy from the memory-mapped cache (one vectorised gather per batch) inside
tf.data: a generator yields each batch's row indices (the epoch's seeded shuffle), and a parallel
`map` (`num_parallel_calls`, default AUTOTUNE: several batches gathered at once on several threads,
NumPy releasing the GIL in its copies; `deterministic`, so the order is the generator's) turns them
into arrays, prefetched; the same pipeline feeds Keras under the TensorFlow, JAX and torch backends.

Modes:
- `None` (default): M = 1; yields (features, labels [B, 1]).
- `"parallel"` (SUAN's parallel candidates): each row holds m2 consecutive samples of one user as
  candidates [B, m2], with the history of the earliest of them (so every candidate may see all of it);
  a user's last row, when short, repeats its own samples in the empty slots (so plain
  `loss="binary_crossentropy"` trains on real samples only, a few counted twice); `with_weights=True`
  adds weights [B, m2]: 1 on real slots, 0 on the repeats (for masked losses and metrics).
- `"prefix"` (ReST's user-level shared-prefix training, ULT): the same grouping, but the history is the
  latest candidate's, so each candidate j must be masked to hist_time < cand_time[:, j] by the model.
"""

import numpy as np

from zoo.errors import ZooError

MODES = (None, "parallel", "prefix")


def map_graph_only(dataset, function):
    """`dataset.map(function)` for a function of graph ops only, without AutoGraph's conversion (which writes
    temporary source files: on a full disk it warned in 4 lines), keeping the dataset's options."""
    import tensorflow as tf

    return dataset.map(tf.autograph.experimental.do_not_convert(function)).with_options(dataset.options())


def without_autotune_thread(dataset):
    """`dataset` with tf.data's autotuning model thread off (`Options.autotune.enabled = False`).

    When an iterator is destroyed (the end of every `fit` and validation pass under every backend), TF
    2.21 cancels that thread, which sleeps between optimisations for a period that doubles up to 60 s,
    and joins it. Now and then the cancellation does not wake it and the join waits out the period:
    measured (`benchmarks/fit_end_gap.py`, and a bare tf.data pipeline like the zoo's, deleted after 3 s
    of iteration: 2 of 50 deletions took 2.1 s with the thread, 0 of 50 above 2 ms without), the
    7.6-9.7 s between the last step and `fit` returning of issue #40. Without the thread, AUTOTUNE map
    parallelism is the CPU count and prefetch keeps its own buffer tuning: the same batches per second
    on this machine (5.5-5.8M samples/s either way in that measurement). Non-tf.data inputs pass through."""
    if not hasattr(dataset, "with_options"):
        return dataset
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def tensor_specs(schema, num_candidates=None, any_candidates=False):
    """One tf.TensorSpec per Schema key, for tf.data and for serving signatures alike: named after the
    key, batch dimension dynamic, ids int32, times int64, numerics float32. M = `num_candidates`
    (default: the schema's); `any_candidates=True` leaves M dynamic too (cand_* [None, None])."""
    import tensorflow as tf

    specs = {}
    for key, (shape, dtype) in schema.input_spec(num_candidates).items():
        if any_candidates and key.startswith("cand_"):
            shape = (None,) + tuple(shape[1:])  # (a tags feature keeps its S)
        specs[key] = tf.TensorSpec((None,) + tuple(shape), dtype, name=key)
    return specs


def _signature(schema, num_candidates, weighted):
    import tensorflow as tf

    spec = tensor_specs(schema, num_candidates)
    labels = tf.TensorSpec(shape=(None, num_candidates), dtype="float32")
    if weighted:
        return spec, labels, tf.TensorSpec(shape=(None, num_candidates), dtype="float32")
    return spec, labels


def _cast(schema, features, num_candidates):
    spec = schema.input_spec(num_candidates)
    return {key: np.asarray(features[key], dtype=dtype) for key, (_, dtype) in spec.items()}


def make_dataset(processed, split, *, batch_size=256, shuffle=None, seed=0, mode=None, num_candidates=None,
                 with_weights=False, drop_remainder=False, repeat=False, num_parallel_calls=None, rows_of=None,
                 order=None):
    """A batched, shuffled (train by default), prefetched tf.data.Dataset of one split.

    `rows_of` (rank, size): only every size-th row (or group) of the split, from the rank-th: one
    process's share in a multi-process run.
    `num_parallel_calls`: batches gathered at once (default tf.data.AUTOTUNE; 1 gathers one at a time).
    `order` (mode None, no shuffle): the split's row indices in the order the batches give them (a
    scoring-mode read in file order: argsort of its source lines).
    Returns (dataset, schema); in group modes the schema has num_candidates = m2.
    """
    import tensorflow as tf

    if mode not in MODES:
        raise ZooError(f"unknown batching mode {mode!r} (modes: None, 'parallel', 'prefix')")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ZooError(f"batch_size is {batch_size!r}; it must be a positive integer")
    shuffle = split == "train" if shuffle is None else shuffle
    schema = processed.schema
    if mode is None:
        if num_candidates not in (None, 1) or with_weights:
            raise ZooError("num_candidates and with_weights need mode='parallel' or mode='prefix'")
        total = processed.num_rows(split)
        m = 1
    else:
        m = num_candidates
        if not isinstance(m, int) or m < 1:
            raise ZooError(f"mode {mode!r} needs num_candidates (m2) >= 1, got {m!r}")
        groups = processed.groups(split, m)
        total = groups.shape[0]
        schema = schema.with_candidates(m)
    rng = np.random.default_rng(seed)
    if order is not None and (mode is not None or shuffle or rows_of is not None or len(order) != total):
        raise ZooError("make_dataset's order is a permutation of the split's rows, without shuffle, mode or rows_of")
    mine = np.arange(total) if rows_of is None else np.arange(total)[rows_of[0] :: rows_of[1]]
    mine = mine if order is None else np.asarray(order, np.int64)
    total = mine.size

    def batch_indices():
        order = mine[rng.permutation(total)] if shuffle else mine
        stop = total - total % batch_size if drop_remainder else total
        for begin in range(0, stop, batch_size):
            yield order[begin : begin + batch_size]

    signature = _signature(schema, m, with_weights)
    flat_signature = tf.nest.flatten(signature)

    def gather(index):  # NumPy, on a tf.data thread: the batch of these rows, flattened as the signature
        if mode is None:
            features, labels = processed.take(split, index)  # (rows in index order sorted)
            if order is not None:
                at = np.searchsorted(np.sort(index), index)
                features, labels = {key: value[at] for key, value in features.items()}, labels[at]
            batch = (_cast(schema, features, 1), labels.astype("float32"))
        else:
            features, labels, weights = processed.take_groups(split, groups[index], mode)
            batch = (_cast(schema, features, m), labels, weights) if with_weights else (_cast(schema, features, m), labels)
        # the signature's dtypes, as from_generator converted them (numpy_function would refuse another)
        return [np.asarray(value, spec.dtype.as_numpy_dtype) for value, spec in zip(tf.nest.flatten(batch), flat_signature)]

    if total:
        # Opens every array a batch reads, here rather than in tf.data's threads: np.load parses a .npy
        # header with ast.literal_eval, and CPython 3.11 (3.11.7 here) races on its AST constructor's
        # recursion count between threads ("SystemError: AST constructor recursion depth mismatch"; see
        # cpython gh-106905).
        gather(mine[:1])

    def to_batch(index):
        flat = tf.numpy_function(gather, [index], [spec.dtype for spec in flat_signature], stateful=False)
        for tensor, spec in zip(flat, flat_signature):
            tensor.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(signature, flat)

    indices = tf.data.Dataset.from_generator(batch_indices, output_signature=tf.TensorSpec([None], tf.int64))
    calls = tf.data.AUTOTUNE if num_parallel_calls is None else num_parallel_calls
    dataset = indices.map(to_batch, num_parallel_calls=calls, deterministic=True)
    if repeat:
        dataset = dataset.repeat()
    else:  # the number of batches is known: no one has to count them by a pass over the data
        batches = total // batch_size if drop_remainder else -(-total // batch_size)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    dataset = without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))
    dataset.zoo_rows_per_batch = batch_size  # what zoo.recipes.fit reads to skip re-batching
    return dataset, schema
