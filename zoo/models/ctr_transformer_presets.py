"""Presets of `ctr_transformer`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "ctr_transformer": {
        "description": "CTR Transformer (residual only), L 2, d 16, trained on 40,000 simulated rows",
        "path": "ctr_transformer",
    },
}
