"""Latency and throughput of exported SavedModels in the TF runtime (CPU here; unchanged on a GPU).

LightSUAN's `parallel_candidates` export (`score_all`: one request, m1 candidates, ceil(m1/m2) passes
with the history cache) against SUAN's plain export called per candidate (one row per candidate, M = 1,
the whole request as one batch). Both models have random weights: only time is measured.

    KERAS_BACKEND=tensorflow python benchmarks/export_latency.py [--length 200] [--m1 512] [--m2 16 32 64]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import zoo  # noqa: E402
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
from zoo.datasets import BehaviourSimulator  # noqa: E402


def timed(function, inputs, repeats):
    function(**inputs)  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        function(**inputs)
    return (time.perf_counter() - start) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=200, help="history length L")
    parser.add_argument("--m1", type=int, default=512, help="candidates per request")
    parser.add_argument("--m2", type=int, nargs="+", default=[16, 32, 64], help="candidates per parallel pass")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    simulator = BehaviourSimulator(sequence_length=args.length, timeline_length=args.length + 40, num_users=50)
    features, _ = simulator.sample(1, seed=1)
    many, _ = simulator.sample(args.m1, seed=2)
    request = {k: tf.constant(v) for k, v in features.items() if not k.startswith("cand_")}
    for key in ("cand_item_id", "cand_category"):
        request[key] = tf.constant(many[key].reshape(1, args.m1))
    request["cand_time"] = tf.constant(np.repeat(features["cand_time"], args.m1, axis=1))
    per_candidate = {k: tf.repeat(v, args.m1, axis=0) for k, v in request.items() if not k.startswith("cand_")}
    for key in ("cand_item_id", "cand_category", "cand_time"):
        per_candidate[key] = tf.reshape(request[key], [args.m1, 1])
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(f"TF runtime on {device}; L={args.length}, m1={args.m1}, {args.layers} layers, {args.repeats} repeats")
    with tempfile.TemporaryDirectory() as scratch:
        suan = zoo.get("suan", schema=simulator.schema, num_layers=args.layers, mlp_units=(256, 128))
        zoo.export(suan, f"{scratch}/suan/1")
        served = tf.saved_model.load(f"{scratch}/suan/1").signatures["serving_default"]
        base = timed(served, per_candidate, args.repeats)
        print(f"SUAN per candidate ({args.m1} rows x M=1): {base * 1e3:8.1f} ms/request, {args.m1 / base:8.0f} candidates/s")
        for m2 in args.m2:
            light = zoo.get(
                "lightsuan", schema=simulator.schema, num_layers=args.layers, mlp_units=(256, 128),
                window_size=8, dilation=2, parallel_candidates=m2,
            )
            zoo.export(light, f"{scratch}/light_{m2}/1", signature="parallel_candidates")
            score_all = tf.saved_model.load(f"{scratch}/light_{m2}/1").signatures["score_all"]
            seconds = timed(score_all, request, args.repeats)
            print(
                f"LightSUAN score_all m2={m2:3d} (k=8, r=2): {seconds * 1e3:8.1f} ms/request, "
                f"{args.m1 / seconds:8.0f} candidates/s, {base / seconds:6.1f}x faster than SUAN per candidate"
            )


if __name__ == "__main__":
    main()
