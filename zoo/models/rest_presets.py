"""Presets of `rest`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "rest": {
        "description": "ReST, d 16, 2 encoder + 1 decoder layers, trained with both auxiliary losses on 20,000 simulated rows",
        "path": "rest",
    },
}
