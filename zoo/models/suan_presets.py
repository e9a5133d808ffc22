"""Presets of `suan`: name -> description and folder under saved/ (the first is the default).

Parameters, training data and metrics are in each folder's metadata.json (`zoo.list_presets()`).
Rebuilt by `python scripts/build_presets.py <name>` (simulator) or `python scripts/build_real_presets.py <name>`
(real data).
"""

PRESETS = {
    "suan": {
        "description": "SUAN, 2 UABs, 2 heads, MLP (64, 32), trained on 40,000 simulated rows",
        "path": "suan",
    },
    "suan_userbehavior": {
        "description": "SUAN as in suan-table2 (2 UABs, 2 heads, MLP (1024, 512, 256)), one pass over the Taobao "
        "UserBehavior sample under SUAN's protocol (history 50); carries its fitted vocabularies (preprocessing.json)",
        "path": "suan_userbehavior",
    },
}
