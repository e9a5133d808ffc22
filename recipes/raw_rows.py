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


def score_raw_rows(model, data, path, preprocessing, *, batch_size=256, cache_dir=None):
    """Scores of the samples a raw file of `data` makes, and the file line of each: (scores [N], lines [N]).

    `preprocessing` is the preset's folder (or its preprocessing.json, or the fitted state); the model's
    schema must be the one that preprocessing produces."""
    from zoo import datasets
    from zoo.datasets.pipeline import make_dataset

    processed = datasets.prepare(data, path, preprocessing=preprocessing, cache_dir=cache_dir, verbose=False)
    if processed.schema.to_dict() != model.schema.with_candidates(1).to_dict():
        raise ZooError(
            f"the preprocessing's schema is not this {model.registered_name}'s: pass the preprocessing of the "
            "preset the model came from"
        )
    dataset, _ = make_dataset(processed, "all", batch_size=batch_size, shuffle=False)
    scores = [np.asarray(model.score(features)).reshape(-1) for features, _ in dataset.as_numpy_iterator()]
    return np.concatenate(scores), processed.source_lines("all")
