"""Scoring m1 candidates for one user: per-candidate SUAN passes vs LightSUAN parallel passes.

    KERAS_BACKEND=jax python benchmarks/suan_scoring.py --lengths 200 1000 --candidates 512

Variants (all through `score_candidates`, one compiled scorer each, timed after a warm-up call):
per-candidate SUAN (m2 = 1, no cache; the baseline: one target-aware sequence per candidate, at
the best of 32, 128 or 512 sequences per call),
parallel passes with m2 = 32 and 64 with full attention (SUAN) and sparse attention (LightSUAN,
k = 8, r = 2 and 4), each with and without the history cache. Every variant stacks its passes along
the batch axis (as a server would), so the ratios measure computation, not per-call overhead.
Prints seconds and the speed-up over the baseline. Goals at L = 200: >= 20x without the cache,
>= 100x with it.
"""

import argparse
import time

import keras
import numpy as np

from zoo.datasets import BehaviourSimulator
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN


def request(simulator, m1, seed=0):
    """One user's row with a full history and m1 candidates."""
    features, _ = simulator.sample(64, seed=seed)
    row = int(np.argmax((features["hist_item_id"] > 0).sum(1)))
    one = {k: v[row : row + 1] for k, v in features.items()}
    rng = np.random.default_rng(seed)
    one["cand_item_id"] = rng.integers(1, simulator.num_items + 1, (1, m1)).astype("int32")
    one["cand_category"] = simulator.item_category[one["cand_item_id"]].astype("int32")
    one["cand_time"] = np.repeat(one["cand_time"], m1, axis=1)
    return one


def timed(fn, repeats):
    fn()  # warm-up: traces/compiles the scorer
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 1000], help="L, behaviours per history")
    parser.add_argument("--candidates", type=int, default=512, help="m1")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for length in args.lengths:
        compare(length, args.candidates, args.repeats)


def compare(length, m1, repeats):
    keras.utils.set_random_seed(0)
    simulator = BehaviourSimulator(num_users=50, num_items=500, num_categories=20, sequence_length=length,
                                   timeline_length=length + 20)
    features = request(simulator, m1)
    common = {"num_layers": 2, "num_heads": 2, "mlp_units": (1024, 512, 256)}
    suan = SUAN(simulator.schema, **common)
    light = {r: LightSUAN(simulator.schema, window_size=8, dilation=r, **common) for r in (2, 4)}

    print(f"backend {keras.backend.backend()}, L = {length}, m1 = {m1}, d = 24, l = 2, h = 2", flush=True)
    # The baseline at its best: the per-candidate sequences split into calls of several sizes.
    bases = {}
    for rows in (32, 128, 512):
        bases[rows] = timed(lambda: suan.score_candidates(features, 1, use_cache=False, rows_per_call=rows), repeats)
        print(f"{f'per-candidate SUAN, {rows} sequences per call':48s} {bases[rows]:8.3f} s", flush=True)
    base = min(bases.values())
    print(f"{'per-candidate SUAN (m2 = 1, no cache): best':48s} {base:8.3f} s   1.0x", flush=True)
    reference = suan.score_candidates(features, parallel_candidates=1, use_cache=False)
    for name, model in [("SUAN full attention", suan)] + [(f"LightSUAN k = 8, r = {r}", m) for r, m in light.items()]:
        for m2 in (32, 64):
            for cache in (False, True):
                seconds = timed(lambda: model.score_candidates(features, parallel_candidates=m2, use_cache=cache), repeats)
                label = f"{name}, m2 = {m2}, cache {'on' if cache else 'off'}"
                print(f"{label:48s} {seconds:8.3f} s {base / seconds:6.1f}x", flush=True)
    parallel = suan.score_candidates(features, parallel_candidates=64, use_cache=True)
    print(f"max |parallel + cache - per-candidate| for SUAN: {np.abs(parallel - reference).max():.2e}\n", flush=True)

if __name__ == "__main__":
    main()
