"""Presets of `dcnv2`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>`.
"""

PRESETS = {
    "dcnv2": {
        "description": "DCN-V2, embedding 8, 2 cross layers, parallel, MLP (64, 32), trained on 40,000 simulated rows"
        " with BatchNorm/Dice momentum 0.99 (the class default is now 0.9)",
        "path": "dcnv2",
    },
}
