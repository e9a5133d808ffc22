"""Presets of `mhc`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "mhc": {
        "description": "mHC, L 2, d 16, n 4 streams, trained on 40,000 simulated rows",
        "path": "mhc",
    },
}
