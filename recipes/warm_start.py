"""Training from a preset: tomorrow's model starts from today's.

    python -m zoo fit din --from runs/monday/preset --data logs/tuesday.csv --history-from logs/monday.csv \
        --out runs/tuesday
    zoo.recipes.train("din", zoo.recipes.DataSource("logs/tuesday.csv"), "runs/tuesday", warm_start="runs/monday/preset")

The new log is read under the preset's own data spec, and its fit continues the preset's
(zoo.datasets.spec_engine.build, `grow_from`): every vocabulary keeps its ids and appends the values the
new training rows hold at least min_count times; a column's max_size caps the table, and a full table of
a spec with a time evicts its least recently seen tokens for the new values (their ids reused:
zoo.datasets.transforms.vocabulary.vocabulary_state); numeric fills, scales and bucket edges and the running statistics' prior and edges stay the
preset's, so an id means what it meant; the counts per key of the running statistics (an item's earlier
rows and clicks) add the new rows to the preset's. The model is the preset's model with its
hyperparameters on the grown schema, and starts from its weights (`carry_weights`): a table whose
vocabulary changed is remapped token by token (each token's trained row at its id, padding and the
out-of-vocabulary row carried, the model's own initialiser for the ids of tokens new to the table); every
other weight is copied. This is
TensorFlow Estimator's warm start with vocabulary remapping (`tf.estimator.VocabInfo`), and how
collisionless tables grow in Monolith and TF Recommenders-Addons: ids that arrive get rows, trained rows stay.

Histories and the user's running statistics come from the new log's own rows unless `--history-from`
(DataSource's `history_from`) names the earlier logs, the preset's own typically: their rows are then read
for the new rows' histories and statistics only (not trained on, not split, not counted again in the
statistics' tables, which the preset's fit counted already).

What it does not carry (a fresh start there, stated here): the optimizer's state (its moments start at zero:
the first steps move the weights as a new run's do; a preset keeps weights, not the optimizer).

The new preset records its lineage in metadata.json: the parent preset (path and weights' sha256), the
rows of the new log, each vocabulary's size before and after and its tokens evicted, and the drift of each
numeric column whose fit was kept (the population stability index of its new values over the preset's
buckets, or its mean's shift in the preset's deviations); a drift past PSI 0.25 or half a deviation is
printed.
"""

import os
import re

import numpy as np

from zoo.errors import ZooError
from zoo.feature import table_name


def parent_preset(preset, model_name):
    """(the preset's model, its fitted state): a preset fitted on a data spec, of `model_name`."""
    import zoo
    from zoo.datasets.fitted import read_preprocessing

    if not os.path.isdir(os.fspath(preset)):
        raise ZooError(f"--from {preset}: no such preset folder")
    if not os.path.isfile(os.path.join(preset, "preprocessing.json")):
        raise ZooError(f"--from {preset}: the preset carries no fitted data spec (preprocessing.json): only a model "
                       "trained on a team's log (fit --data LOG --spec SPEC) can be continued")
    state = read_preprocessing(preset)
    if "spec" not in state:
        raise ZooError(f"--from {preset}: its preprocessing was fitted by the {state['dataset']} reader, not from a "
                       "data spec; only a spec's fit can be continued")
    parent = zoo.load(preset)
    if parent.registered_name != model_name:
        raise ZooError(f"--from {preset}: the preset is a {parent.registered_name} model, not {model_name}: "
                       f"fit {parent.registered_name} --from {preset}")
    return parent, state


def hyperparameters(parent):
    """The preset's hyperparameters (the model's constructor arguments but its schema)."""
    return {name: getattr(parent, name) for name in type(parent).hyperparameter_names()
            if name != "schema" and hasattr(parent, name)}


def _same_place(path):
    """A weight's path without Keras' per-process layer numbers (feature_embedding_7 -> feature_embedding)."""
    return re.sub(r"_\d+(?=/|$)", "", path)


# a table indexed by a vocabulary: zoo.layers.FeatureEmbedding's tables (and FM's first-order ones), CAN's
TABLE = re.compile(r"(?:^|/)(?:embedding|induction|feed)_(\w+)/embeddings$")


def vocabularies(parent_state, state):
    """{embedding table: (column, tokens before, tokens after)} of every table a fitted vocabulary indexes
    (zoo.feature.table_name: FeatureEmbedding's table names; a column's role is its feature's group)."""
    out = {}
    for name, options in state["spec"]["columns"].items():
        table, before = state["fitted"].get(name), parent_state["fitted"].get(name)
        if all(isinstance(t, dict) and t.get("kind") == "vocabulary" for t in (table, before)):
            out[table_name(options["role"], options["feature"])] = (name, before["tokens"], table["tokens"])
    return out


def remapped(source, initial, before, after):
    """A table's rows under the vocabulary `after` from its trained rows under `before`: padding (row 0) and
    the OOV row (the last) carried, each token's trained row at the token's id now, the `initial` rows for
    the ids of tokens new to the table (appended, or given an evicted token's id)."""
    rows = np.array(initial)
    rows[0], rows[-1] = source[0], source[-1]
    index = {token: i + 1 for i, token in enumerate(before)}
    pairs = np.asarray([(j + 1, index[token]) for j, token in enumerate(after) if token in index], np.int64)
    if pairs.size:
        rows[pairs[:, 0]] = source[pairs[:, 1]]
    return rows


def carry_weights(parent, model, parent_state, state):
    """Sets `model`'s weights (the preset's model on the grown schema, freshly built) from `parent`'s: a table
    a vocabulary indexes whose tokens changed (grown, or an evicted token's id given to a new value) is
    `remapped` token by token; every other weight of equal shape is copied. Returns the number of weights
    carried. Any other difference (another architecture, hyperparameters that change a shape) is one line
    naming the first weight that differs."""
    tables = vocabularies(parent_state, state)
    old, new = parent.weights, model.weights
    if len(old) != len(new):
        raise ZooError(f"--from: the preset's {parent.registered_name} has {len(old)} weights and this one {len(new)}: "
                       "train it with the preset's hyperparameters")
    for before, after in zip(old, new):
        if _same_place(before.path) != _same_place(after.path):
            raise ZooError(f"--from: the preset's weight {before.path} has no counterpart here ({after.path})")
        source, shape = np.asarray(before.numpy()), tuple(after.shape)
        match = TABLE.search(after.path)  # (FeatureEmbedding's table layers are named, never numbered)
        _, tokens_before, tokens_after = tables.get(match.group(1) if match else None, (None, None, None))
        changed = tokens_before is not None and tokens_before != tokens_after
        if changed and (source.shape[0], shape[0]) == (len(tokens_before) + 2, len(tokens_after) + 2):
            after.assign(remapped(source, after.numpy(), tokens_before, tokens_after))
            continue
        if source.shape == shape:
            after.assign(source)
            continue
        raise ZooError(f"--from: the preset's weight {before.path} has shape {list(source.shape)}, this model's "
                       f"{list(shape)}: only a grown vocabulary's table may change size")
    return len(new)


def lineage(preset, parent_state, state, rows, drift=None):
    """What metadata.json records of a preset trained from another: the parent (its folder and weights'
    sha256), the new log's rows per split, each vocabulary's size before and after and its tokens evicted,
    and how far each kept numeric fit's new values moved (`drift`: zoo.datasets.transforms.numeric.drift)."""
    from zoo import presets

    metadata = presets.read_metadata(preset)
    grown = {column: {"before": len(before), "after": len(after), "evicted": len(set(before) - set(after))}
             for column, before, after in vocabularies(parent_state, state).values()}
    return {"parent": os.path.abspath(preset), "parent_weights_sha256": metadata.get("weights_sha256"),
            "rows": dict(rows), "vocabularies": grown, "drift": dict(drift or {})}


def drift_note(drift):
    """One line naming the numeric columns whose new values moved from the preset's kept fit, or None."""
    def shown(name, moved):
        if "psi" in moved:
            return f"{name} (PSI {moved['psi']:.2f} over the preset's buckets)"
        return f"{name} (mean {moved['mean_shift']:.2f} deviations away, deviation x{moved['sd_ratio']:.2f})"

    moved = [shown(name, value) for name, value in drift.items() if value["moved"]]
    if not moved:
        return None
    return (f"drift: the new log's {', '.join(moved)} moved from the preset's fit; their bucket edges and scales "
            "stay the preset's (an id means what it meant): a full retrain refits them")
