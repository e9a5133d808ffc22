"""Export to TF Serving: SavedModels with explicit signatures, built under the TensorFlow backend.

    export.py               zoo.export(): checks, the backend hop, writing <base>/<version>/
    __main__.py             the TensorFlow subprocess of that hop (JSON in, one-line errors out)
    plain.py                `serving_default` for every registered model (its contract inputs -> pctr)
    parallel_candidates.py  LightSUAN as SUAN was deployed: m2 candidates per pass, `score_all` for m1
    encode_decode.py        ReST: `encode` (history -> memory) and `decode` (memory + N candidates)
    guard.py                the request guard every signature runs first: out-of-range ids -> OOV, NaN/inf
                            numerics -> 0, +-1e9 clip, counted in `repaired_ids` / `repaired_numerics`

A model declares the signatures it serves when it registers (`zoo.register(..., signatures=...)`).
"""

from zoo.serving.export import export
