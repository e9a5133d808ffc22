"""Presets of `tokenmixer_large`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "tokenmixer_large": {
        "description": "TokenMixer-Large, L 2, D 32, H 4, MLP (64, 32), trained on 40,000 simulated rows",
        "path": "tokenmixer_large",
    },
}
