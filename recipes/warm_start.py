"""Training from a preset: tomorrow's model starts from today's.

    python -m zoo fit din --from runs/monday/preset --data logs/tuesday.csv --history-from logs/monday.csv \
        --out runs/tuesday
    zoo.recipes.train("din", zoo.recipes.DataSource("logs/tuesday.csv"), "runs/tuesday", warm_start="runs/monday/preset")

The new log is read under the preset's own data spec, and its fit continues the preset's
(zoo.datasets.spec_engine.build, `grow_from`): every vocabulary keeps its ids and appends the values the
new training rows hold at least min_count times (a column's max_size caps the table: a full table takes
no new value); numeric fills, scales and bucket edges and the running statistics' prior and edges stay the
preset's, so an id means what it meant; the counts per key of the running statistics (an item's earlier
rows and clicks) add the new rows to the preset's. The model is the preset's model with its
hyperparameters on the grown schema, and starts from its weights (`carry_weights`): a table that grew
keeps each trained row where it was (padding and ids 1..n), moves the trained out-of-vocabulary row to the
new last id, and gives the appended ids the model's own initialiser; every other weight is copied. This is
TensorFlow Estimator's warm start with vocabulary remapping (`tf.estimator.VocabInfo`), and how
collisionless tables grow in Monolith and TF Recommenders-Addons: ids that arrive get rows, trained rows stay.

Histories and the user's running statistics come from the new log's own rows unless `--history-from`
(DataSource's `history_from`) names the earlier logs, the preset's own typically: their rows are then read
for the new rows' histories and statistics only (not trained on, not split, not counted again in the
statistics' tables, which the preset's fit counted already).

What it does not carry (a fresh start there, stated here): the optimizer's state (its moments start at zero:
the first steps move the weights as a new run's do); and no id is evicted: a table grows until its
column's max_size.

The new preset records its lineage in metadata.json: the parent preset (path and weights' sha256), the
rows of the new log, and each vocabulary's size before and after.
"""

import os
import re

import numpy as np

from zoo.errors import ZooError


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


def grown_sizes(parent_state, state):
    """{(rows before, rows after)} of every vocabulary that grew (a table of n tokens has n + 2 rows)."""
    sizes = set()
    for name, table in state["fitted"].items():
        before = parent_state["fitted"].get(name)
        if isinstance(table, dict) and table.get("kind") == "vocabulary" and isinstance(before, dict):
            if len(table["tokens"]) > len(before["tokens"]):
                sizes.add((len(before["tokens"]) + 2, len(table["tokens"]) + 2))
    return sizes


def carry_weights(parent, model, parent_state, state):
    """Sets `model`'s weights (the preset's model on the grown schema, freshly built) from `parent`'s: equal
    shapes are copied; a table grown from n to N rows (a vocabulary that grew, `grown_sizes`) keeps rows
    0..n-2 (padding and the trained ids), takes the trained OOV row n-1 as its row N-1, and keeps its own
    initial rows for the appended ids. Returns the number of weights carried. Any other difference (another
    architecture, hyperparameters that change a shape) is one line naming the first weight that differs."""
    grown = grown_sizes(parent_state, state)
    old, new = parent.weights, model.weights
    if len(old) != len(new):
        raise ZooError(f"--from: the preset's {parent.registered_name} has {len(old)} weights and this one {len(new)}: "
                       "train it with the preset's hyperparameters")
    for before, after in zip(old, new):
        if _same_place(before.path) != _same_place(after.path):
            raise ZooError(f"--from: the preset's weight {before.path} has no counterpart here ({after.path})")
        source, shape = np.asarray(before.numpy()), tuple(after.shape)
        if source.shape == shape:
            after.assign(source)
            continue
        if source.shape[1:] != shape[1:] or (source.shape[0], shape[0]) not in grown:
            raise ZooError(f"--from: the preset's weight {before.path} has shape {list(source.shape)}, this model's "
                           f"{list(shape)}: only a grown vocabulary's table may change size")
        rows = np.array(after.numpy())
        rows[: source.shape[0] - 1] = source[:-1]
        rows[-1] = source[-1]
        after.assign(rows)
    return len(new)


def lineage(preset, parent_state, state, rows):
    """What metadata.json records of a preset trained from another: the parent (its folder and weights'
    sha256), the new log's rows per split, and each vocabulary's size before and after."""
    from zoo import presets

    metadata = presets.read_metadata(preset)
    vocabularies = {}
    for name, table in state["fitted"].items():
        before = parent_state["fitted"].get(name)
        if isinstance(table, dict) and table.get("kind") == "vocabulary" and isinstance(before, dict):
            vocabularies[name] = {"before": len(before["tokens"]), "after": len(table["tokens"])}
    return {"parent": os.path.abspath(preset), "parent_weights_sha256": metadata.get("weights_sha256"),
            "rows": dict(rows), "vocabularies": vocabularies}
