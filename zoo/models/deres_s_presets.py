"""Presets of `deres_s`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "deres_s": {
        "description": "DeRes-S, L 2, d 16, B 2 (softmax block weights), trained on 40,000 simulated rows",
        "path": "deres_s",
    },
}
