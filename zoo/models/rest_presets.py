"""Presets of `rest`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>` (simulator) or `python scripts/build_real_presets.py <name>`
(real data).
"""

PRESETS = {
    "rest": {
        "description": "ReST, d 16, 2 encoder + 1 decoder layers, trained with both auxiliary losses on 20,000 simulated rows",
        "path": "rest",
    },
    "rest_movielens": {
        "description": "ReST as in rest-table2 (d 32, 2 + 2 layers, both auxiliary losses), trained on MovieLens-100K "
        "under ReST's public protocol (history 50); carries its fitted vocabularies (preprocessing.json)",
        "path": "rest_movielens",
    },
}
