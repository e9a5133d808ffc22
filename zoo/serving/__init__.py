"""Export to TF Serving: SavedModels with explicit signatures, built under the TensorFlow backend.

    export.py               zoo.export(): checks, the backend hop, writing <base>/<version>/
    plain.py                `serving_default` for every registered model (its contract inputs -> pctr)
    parallel_candidates.py  LightSUAN as SUAN was deployed: m2 candidates per pass, `score_all` for m1
    encode_decode.py        ReST: `encode` (history -> memory) and `decode` (memory + N candidates)
    requests.py             TF Serving's request formats (PredictRequest protos, REST JSON) -> tensors
"""

from zoo.serving.export import export
