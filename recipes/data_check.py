"""Does a model fit a data set? One line that says what differs, before training or scoring starts.

A preset is built for the schema it was trained on (`zoo.get("lightsuan")` is the simulator's); a
data set has its own (`zoo.datasets.load(...)` returns it). Feeding one to the other otherwise fails
deep inside Keras ("Missing data for input 'num_price'") or, worse, runs on ids the model never saw.
"""

from zoo.errors import ZooError

_SHOWN = 6  # names listed per difference; the rest are counted


def _names(keys):
    keys = sorted(keys)
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(keys[:_SHOWN]) + more


def _model_schema(model):
    """The zoo model a training wrapper (OnlineDistillation, ReSTTrainer) trains, and its schema."""
    model = getattr(model, "student", None) or getattr(model, "model", None) or model
    name = getattr(model, "registered_name", None) or getattr(model, "name", "the model")
    return name, getattr(model, "schema", None)


def _report(name, differences, extra, hint):
    """Raises on `differences`; features only the data has (`extra`) are named then, never refused
    alone (a model may read a subset of a data set's features on purpose)."""
    if differences:
        if extra:
            differences = differences + [f"the model does not read {_names(extra)}"]
        how = hint or f"zoo.get('{name}', schema=schema) with the data set's schema (zoo.datasets.load returns it)"
        raise ZooError(f"{name} was built for another schema than this data: {'; '.join(differences)}. "
                       f"Build a model for this data: {how}")


def schema_differences(model_schema, data_schema):
    """What keeps a model built for `model_schema` from reading data in `data_schema`, as phrases:
    features the model needs and the data lacks, another history length, ids the model's tables
    cannot hold. Features only the data has are not a difference (see check_schema). The number of
    candidates per row is not compared (training twins and parallel scoring change it)."""
    model_keys, data_keys = set(model_schema.keys()), set(data_schema.keys())
    differences = []
    if model_keys - data_keys:
        differences.append(f"the data lacks {_names(model_keys - data_keys)}")
    if model_schema.group("hist") and model_schema.sequence_length != data_schema.sequence_length:
        differences.append(f"the history has length {data_schema.sequence_length} in the data but "
                           f"{model_schema.sequence_length} in the model")
    small = [
        f"{f.key} ({f.vocabulary_size:,} ids in the data, {model_schema.feature(f.key).vocabulary_size:,} in the model)"
        for f in data_schema.features
        if f.key in model_keys and f.vocabulary_size is not None
        and f.vocabulary_size > model_schema.feature(f.key).vocabulary_size
    ]
    tags = [f"{f.key} holds {f.tags or 1} value(s) a row in the data but {model_schema.feature(f.key).tags or 1} in "
            "the model" for f in data_schema.features
            if f.key in model_keys and f.group != "num" and f.tags != model_schema.feature(f.key).tags]
    differences.extend(tags[:_SHOWN])
    if small:
        differences.append("vocabularies too small: " + ", ".join(small[:_SHOWN]) + (
            f" and {len(small) - _SHOWN} more" if len(small) > _SHOWN else ""))
    return differences


def check_schema(model, data_schema, hint=None):
    """Raises a one-line ZooError when `model` cannot read data in `data_schema` (schema_differences),
    naming also the features only the data has, and ending with how to get a matching model (`hint`,
    or zoo.get(<model>, schema=schema))."""
    name, schema = _model_schema(model)
    if schema is not None:
        _report(name, schema_differences(schema, data_schema), set(data_schema.keys()) - set(schema.keys()), hint)


def check_dataset(model, *datasets, hint=None):
    """The same check against tf.data datasets of (features, labels[, weights]) batches, from what
    their element_spec shows: the feature keys and the history length (not the vocabularies)."""
    name, schema = _model_schema(model)
    if schema is None:
        return
    for dataset in datasets:
        spec = getattr(dataset, "element_spec", None)
        if not isinstance(spec, tuple) or not isinstance(spec[0], dict):
            continue
        features = spec[0]
        model_keys, data_keys = set(schema.keys()), set(features)
        differences = []
        if model_keys - data_keys:
            differences.append(f"the data lacks {_names(model_keys - data_keys)}")
        lengths = {int(features[k].shape[1]) for k in data_keys & model_keys
                   if k.startswith("hist_") and len(features[k].shape) > 1 and features[k].shape[1] is not None}
        if lengths and lengths != {schema.sequence_length}:
            differences.append(f"the history has length {_names(map(str, lengths))} in the data but "
                               f"{schema.sequence_length} in the model")
        for key in sorted(data_keys & model_keys - {"hist_time", "cand_time"}):  # a tags feature's S, or none
            f, shape = schema.feature(key), features[key].shape
            rank = 1 + (key.startswith(("hist_", "cand_"))) + (f.tags > 0)
            if (f.tags or len(shape) == rank + 1) and (len(shape) != rank or f.tags and shape[-1] not in (None, f.tags)):
                differences.append(f"{key} has shape {list(shape)} in the data but the model reads "
                                   f"{'[B, M' if key.startswith('cand_') else '[B'}{', S=' + str(f.tags) if f.tags else ''}"
                                   f"{', L' if key.startswith('hist_') else ''}]")
        _report(name, differences, data_keys - model_keys, hint)
