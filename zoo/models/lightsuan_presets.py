"""Presets of `lightsuan`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>` (simulator) or `python scripts/build_real_presets.py <name>`
(real data).
"""

PRESETS = {
    "lightsuan": {
        "description": "LightSUAN, 1 UAB, k 8, r 2, m2 16, trained on 40,000 simulated rows",
        "path": "lightsuan",
    },
    "distilsuan": {
        "description": "LightSUAN (as the lightsuan preset) distilled online from a 2-UAB SUAN (t = λ = 2, SUAN eq 17), 40,000 simulated rows",
        "path": "distilsuan",
    },
    "distilsuan_userbehavior": {
        "description": "LightSUAN k 8, r 2 (2 UABs) distilled online from the suan_userbehavior-sized SUAN (t = 2), one "
        "pass over the Taobao UserBehavior sample (history 50); carries its fitted vocabularies (preprocessing.json)",
        "path": "distilsuan_userbehavior",
    },
}
