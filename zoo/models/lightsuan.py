import keras

from zoo.errors import ZooError
from zoo.models.suan import SuanFamily
from zoo.registry import register


@register(
    "lightsuan",
    description="LightSUAN: SUAN with sparse (local window + dilated) self-attention and parallel candidate scoring",
    paper="Exploring Scaling Laws of CTR Model for Online Performance Improvement (Meituan, 2025)",
)
@keras.saving.register_keras_serializable(package="zoo")
class LightSUAN(SuanFamily):
    """LightSUAN (SUAN §3.3.1): SUAN whose self-attention is sparse (a local window of k keys plus
    every r-th earlier key, only those pairs computed) and which scores m2 candidates per pass.

    Parallel inference: the m2 candidates follow the history at one shared position; each sees the
    (sparse) history and itself, never another candidate or a placeholder, so its score equals its
    score alone. `score_candidates(features)` scores m1 candidates in ceil(m1 / m2) passes and, by
    default, encodes the history once per request and reuses it in every pass (the history cache).

    Training: the paper pads each 1-candidate training row with m2 - 1 placeholders so that training
    sees the parallel attention pattern. Here a candidate's attention pattern does not depend on its
    slot or on the other slots (tested), so training on the ordinary M = 1 rows computes exactly what
    the padded rows would (minus the placeholders' own losses); rows with M candidates also work.

    Args: those of SUAN, plus
        window_size: k, the local window (keys i - k < j <= i).
        dilation: r, the dilation (keys j <= i with (i - j) mod r == 0; r = 1 is full attention).
        parallel_candidates: m2, candidates per pass in `score_candidates`.
    """

    def __init__(self, schema, num_layers=2, num_heads=2, mlp_units=(1024, 512, 256), dice_momentum=0.999,
                 alignment_pool="causal", sample_rate=1.0, window_size=8, dilation=2, parallel_candidates=32,
                 **kwargs):
        if not 0.0 < float(sample_rate) <= 1.0:
            raise ZooError(f"sample_rate is {sample_rate!r}; it must lie in (0, 1]")
        if not isinstance(parallel_candidates, int) or parallel_candidates < 1:
            raise ZooError(f"parallel_candidates (m2) is {parallel_candidates!r}; it must be an integer >= 1")
        self._build_graph(
            schema, num_layers, num_heads, mlp_units, dice_momentum, alignment_pool, window_size, dilation, **kwargs
        )
        self.sample_rate = float(sample_rate)
        self.window_size = int(window_size)
        self.dilation = int(dilation)
        self.parallel_candidates = parallel_candidates
