"""Export to TF Serving: SavedModels with explicit signatures, built under the TensorFlow backend.

    export.py               zoo.export(): checks, the backend hop, writing <base>/<version>/
    __main__.py             the TensorFlow subprocess of that hop (JSON in, one-line errors out)
    plain.py                `serving_default` for every registered model (its contract inputs -> pctr)
    parallel_candidates.py  LightSUAN as SUAN was deployed: any M candidates in passes of m2 (`serving_default`,
                            `score_all`)
    encode_decode.py        ReST: `encode` (history -> memory) and `decode` (memory + N candidates)
    guard.py                the request guard every signature runs first: out-of-range ids -> OOV, NaN/inf
                            numerics -> 0, +-1e9 clip, counted in `repaired_ids` / `repaired_numerics`
    shapes.py               the shape check the id signatures run before it: a request of other shapes than
                            declared (history length, rank, batch sizes) is refused in one line naming the key

A model declares the signatures it serves when it registers (`zoo.register(..., signatures=...)`).
"""

from zoo.serving.export import export
