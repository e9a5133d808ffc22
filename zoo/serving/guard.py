"""The request guard every exported signature runs before the model: a server scores what
`Schema.validate` would have refused the same way on CPU and GPU, and says how much it repaired.

Outside the graph `Schema.validate` refuses bad values with a one-line ZooError. A SavedModel cannot
answer that way, and the TF kernels differ by device: an id >= vocabulary_size makes `gather` raise
InvalidArgumentError on a CPU server but return zeros on a GPU, a negative id is wrapped Python-style
(-1 reads the OOV row, -2 a real item's), and NaN or inf numerics reach the scores. So each signature
first repairs, per value, in keras.ops (TF ops once traced for the export):

    id  outside [0, vocabulary_size) (hist_*, user_*, cand_*, ctx_*)  ->  vocabulary_size - 1, the OOV id
    numeric NaN or +-inf (num_*, and decode's `memory`)                ->  0 (the transformed feature's
                                                                          "no information" value)
    numeric beyond +-NUMERIC_LIMIT (1e9, Schema.validate's bound)      ->  clipped to +-1e9

and adds two outputs, int32 [B]: `repaired_ids` and `repaired_numerics`, the number of values
repaired in each request row (0 for a request `Schema.validate` accepts, whose scores the guard never
changes). Times (hist_time, cand_time) index no table and pass unchanged: negative, unsorted or
huge times give finite scores but are not repaired (a server that needs them checked runs
`Schema.validate` before the request).
"""

from keras import ops

from zoo.schema import ID_GROUPS, NUMERIC_LIMIT


def _per_row(bad):
    """Count of True values per row of a [B, ...] bool tensor, int32 [B]."""
    bad = ops.cast(bad, "int32")
    return ops.sum(ops.reshape(bad, (ops.shape(bad)[0], -1)), axis=1)


def repair_numbers(value):
    """(value with NaN/inf -> 0 and clipped to +-NUMERIC_LIMIT, int32 [B] count of repaired entries)."""
    value = ops.convert_to_tensor(value)
    finite = ops.isfinite(value)
    zeroed = ops.where(finite, value, ops.zeros_like(value))
    outside = ops.greater(ops.abs(zeroed), NUMERIC_LIMIT)
    repaired = ops.clip(zeroed, -NUMERIC_LIMIT, NUMERIC_LIMIT)
    return repaired, _per_row(ops.logical_or(ops.logical_not(finite), outside))


def repair(schema, features, numeric_keys=()):
    """(features with every id and numeric of `schema` repaired, {"repaired_ids": int32 [B],
    "repaired_numerics": int32 [B]}).

    `features` may hold any subset of the schema's keys, and other entries, passed unchanged unless
    `numeric_keys` names them (decode's `memory`): those are repaired as numerics too."""
    repaired, ids, numerics = dict(features), [], []
    for feature in schema.features:
        key = feature.key
        if key not in features:
            continue
        value = ops.convert_to_tensor(features[key])
        if feature.group in ID_GROUPS:
            outside = ops.logical_or(ops.less(value, 0), ops.greater_equal(value, feature.vocabulary_size))
            repaired[key] = ops.where(outside, ops.full_like(value, feature.vocabulary_size - 1), value)
            ids.append(_per_row(outside))
        else:
            repaired[key], count = repair_numbers(value)
            numerics.append(count)
    for key in numeric_keys:
        repaired[key], count = repair_numbers(features[key])
        numerics.append(count)
    first = ops.convert_to_tensor(next(iter(features.values())))
    zeros = ops.zeros((ops.shape(first)[0],), "int32")
    return repaired, {"repaired_ids": sum(ids, zeros), "repaired_numerics": sum(numerics, zeros)}
