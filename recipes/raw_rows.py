"""`score_raw_rows`: a real-data preset scores a user's raw rows of its data set, without refitting anything.

    model = zoo.get("rest_movielens")
    scores, lines = zoo.recipes.score_raw_rows(model, "movielens", "my_ratings/u.data",
                                               preprocessing="saved/rest_movielens")

The reader applies the preset's fitted preprocessing (its `preprocessing.json`: the vocabularies of the
training data) in scoring mode (see the reader module: MovieLens/Amazon Books make every row a sample,
Taobao every behaviour after a user's first; a sample's history is the user's earlier rows in the file;
unknown ids become the OOV id and are counted).
"""

import numpy as np

from zoo.errors import ZooError


def score_raw_rows(model, data, path, preprocessing, *, batch_size=256, cache_dir=None, with_labels=False,
                   verbose=1):
    """Scores of the samples a raw file of `data` makes, and the file line of each: (scores [N], lines [N]),
    and with `with_labels=True` their labels too (scores, lines, labels [N]) for metrics on labelled rows.

    `data` is the data set's name, or None for a preset trained on a data spec (its preprocessing carries
    the spec). `preprocessing` is the preset's folder (or its preprocessing.json, or the fitted state); the
    model's schema must be the one that preprocessing produces. `verbose=1` shows a progress bar over the
    rows (with their total), 0 nothing."""
    import keras

    from zoo import datasets
    from zoo.datasets.pipeline import make_dataset

    processed = datasets.prepare(data, path, preprocessing=preprocessing, cache_dir=cache_dir, verbose=False)
    if processed.schema.to_dict() != model.schema.with_candidates(1).to_dict():
        raise ZooError(
            f"the preprocessing's schema is not this {model.registered_name}'s: pass the preprocessing of the "
            "preset the model came from"
        )
    total = processed.num_rows("all")
    dataset, _ = make_dataset(processed, "all", batch_size=batch_size, shuffle=False)
    bar = keras.utils.Progbar(total, unit_name="row") if verbose and total else None
    scores, labels = [], []
    for features, label in dataset.as_numpy_iterator():
        scores.append(np.asarray(model.score(features)).reshape(-1))
        labels.append(label.reshape(-1))
        if bar is not None:
            bar.add(label.shape[0])
    scores = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    lines = processed.source_lines("all")
    if with_labels:
        return scores, lines, np.concatenate(labels) if labels else np.zeros(0, np.float32)
    return scores, lines
