"""Presets of `deres_p`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "deres_p": {
        "description": "DeRes-P, L 2, d 16, B 2 (SiLU block weights), trained on 40,000 simulated rows",
        "path": "deres_p",
    },
}
