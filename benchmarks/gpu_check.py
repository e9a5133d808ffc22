"""The GPU figures of issue #19 in one prepared run (under 10 minutes on one GPU).

    python benchmarks/gpu_check.py            # on a machine with a GPU
    python benchmarks/gpu_check.py --smoke    # small sizes on the CPU: checks that the script runs, no figures

(a) LightSUAN `score_all` served from its exported SavedModel in a TensorFlow-only process (no zoo
    imported): one request = one user's history of L behaviours and m1 = 512 candidates, scored in
    ceil(m1 / m2) parallel passes with the history cache; L = 200 and L = 1000; p50 / p99 latency per
    request with 1 and 8 concurrent clients (closed loop, benchmarks/serving_latency.py's timing).
    Goal: p99 <= 10 ms at L = 1000. The model has the class defaults (SUAN §4.1.4 sizes: 2 UABs,
    2 heads, MLP [1024, 512, 256]; k = 8, r = 2, m2 = 32) on the simulator's schema (embedding 8 per
    field) with random weights: only time and agreement are measured.
(b) benchmarks/deres_cost.py at L = 8 (d = 128, B = 8) under JAX, TensorFlow and torch: DeRes-P's
    training step against the residual-only Transformer. Goal: <= +10%.
(c) The SavedModel's outputs on the GPU equal the CPU's within 1e-5: against the Keras model run on the
    CPU (the exporting process sees no GPU) and against the same SavedModel placed on the CPU. TF runs
    float32 matrix products in TF32 on Ampere and later GPUs by default; the check runs with TF32 off
    (exact float32) and prints the difference TF32 makes as well.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from serving_latency import latencies, percentiles  # noqa: E402  (standard library only at import)


def export_worker(spec):
    """Under the TensorFlow backend with no GPU visible: export LightSUAN for every L; save the request
    and the Keras model's CPU outputs next to each SavedModel."""
    import keras
    import numpy as np
    import tensorflow as tf

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.datasets import BehaviourSimulator

    for length in spec["lengths"]:
        simulator = BehaviourSimulator(sequence_length=length, timeline_length=length + 40, num_users=20,
                                       num_items=2000, num_categories=100)
        one, _ = simulator.sample(1, seed=1)
        many, _ = simulator.sample(spec["m1"], seed=2)
        request = {k: v for k, v in one.items() if not k.startswith("cand_")}
        for key in ("cand_item_id", "cand_category"):
            request[key] = many[key].reshape(1, spec["m1"])
        request["cand_time"] = np.repeat(one["cand_time"], spec["m1"], axis=1)
        keras.utils.set_random_seed(0)
        model = zoo.get("lightsuan", schema=simulator.schema, **spec["model"])
        folder = Path(spec["dir"]) / f"L{length}"
        zoo.export(model, folder / "1", signature="parallel_candidates")
        np.savez(folder / "request.npz", **request)
        np.save(folder / "keras_cpu.npy", model.score_candidates(request))
    return {"devices": [d.device_type for d in tf.config.list_physical_devices()]}


def serve_worker(spec):
    """TensorFlow only: latency of score_all per L and concurrency; GPU vs CPU agreement."""
    import numpy as np
    import tensorflow as tf

    gpu = bool(tf.config.list_physical_devices("GPU"))
    results = {"gpu": gpu, "device": tf.config.list_physical_devices("GPU" if gpu else "CPU")[0].name, "lengths": {}}
    for length in spec["lengths"]:
        folder = Path(spec["dir"]) / f"L{length}"
        saved = np.load(folder / "request.npz")
        request = {k: tf.constant(saved[k]) for k in saved.files}
        keras_cpu = np.load(folder / "keras_cpu.npy")
        score_all = tf.saved_model.load(str(folder / "1")).signatures["score_all"]

        def call():
            return score_all(**request)["pctr"].numpy()

        row = {}
        tf.config.experimental.enable_tensor_float_32_execution(False)
        served = call()
        with tf.device("/CPU:0"):
            served_cpu = score_all(**request)["pctr"].numpy()
        row["max_diff_vs_keras_cpu"] = float(np.max(np.abs(served - keras_cpu)))
        row["max_diff_vs_savedmodel_cpu"] = float(np.max(np.abs(served - served_cpu)))
        tf.config.experimental.enable_tensor_float_32_execution(True)  # TF's default: what a server runs
        row["max_diff_tf32_vs_keras_cpu"] = float(np.max(np.abs(call() - keras_cpu)))
        for _ in range(spec["warmup"]):
            call()
        for concurrency in spec["concurrency"]:
            row[str(concurrency)] = percentiles(*latencies(call, spec["requests"], concurrency))
        results["lengths"][str(length)] = row
    assert "zoo" not in sys.modules, "the serving side must not import the zoo"
    return results


def run_json(args, spec, env, timeout):
    command = [sys.executable, __file__] + args + [json.dumps(spec)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{args[0]} failed:\n{done.stderr[-3000:]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes on the CPU (seconds, not figures)")
    parser.add_argument("--lengths", type=int, nargs="+", help="history lengths L (default 200 1000)")
    parser.add_argument("--m1", type=int, help="candidates per request (default 512)")
    parser.add_argument("--requests", type=int, help="timed requests per L and concurrency (default 300)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--deres-backends", nargs="*",
                        help="backends of (b) (default: jax tensorflow torch; smoke: jax)")
    parser.add_argument("--budget", type=int, default=570, help="seconds for the whole run; (b) gets what is left")
    parser.add_argument("--export-worker", help=argparse.SUPPRESS)
    parser.add_argument("--serve-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.export_worker or args.serve_worker:
        spec = json.loads(args.export_worker or args.serve_worker)
        print("RESULT " + json.dumps(export_worker(spec) if args.export_worker else serve_worker(spec)), flush=True)
        return
    started = time.perf_counter()
    lengths = args.lengths or ([16, 64] if args.smoke else [200, 1000])
    m1 = args.m1 or (64 if args.smoke else 512)
    model = ({"num_layers": 1, "num_heads": 2, "mlp_units": [16], "window_size": 4, "dilation": 2,
              "parallel_candidates": 16} if args.smoke else {})  # {}: LightSUAN's class defaults
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    print(f"gpu_check{' --smoke (CPU, small sizes: not the figures)' if args.smoke else ''}: L = {lengths}, "
          f"m1 = {m1}, LightSUAN {model or 'class defaults (2 UABs, 2 heads, MLP [1024, 512, 256], k 8, r 2, m2 32)'}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="zoo-gpu-check-") as scratch:
        spec = {"lengths": lengths, "m1": m1, "model": model, "dir": scratch, "warmup": 3 if args.smoke else 20,
                "requests": args.requests or (40 if args.smoke else 300), "concurrency": args.concurrency}
        run_json(["--export-worker"], spec, dict(env, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES=""), 900)
        print(f"(exported in {time.perf_counter() - started:.0f} s)", flush=True)
        served = run_json(["--serve-worker"], spec, dict(env, KERAS_BACKEND="tensorflow"), 900)
    print(f"\n(a) LightSUAN score_all, SavedModel in a TF-only process on {served['device']}; "
          f"m1 = {m1}, one user per request")
    print(f"{'L':>6}{'clients':>9}{'p50 ms':>9}{'p99 ms':>9}{'requests/s':>12}")
    for length, row in served["lengths"].items():
        for c in args.concurrency:
            m = row[str(c)]
            print(f"{length:>6}{c:>9}{m['p50_ms']:>9.2f}{m['p99_ms']:>9.2f}{m['requests_per_second']:>12.1f}")
    longest = served["lengths"][str(max(lengths))]
    worst = max(longest[str(c)]["p99_ms"] for c in args.concurrency)
    print(f"goal p99 <= 10 ms at L = {max(lengths)}: {worst:.2f} ms ({'met' if worst <= 10 else 'missed'})")
    print("\n(c) agreement, max |SavedModel on the serving device - reference| over the m1 scores")
    for length, row in served["lengths"].items():
        ok = max(row["max_diff_vs_keras_cpu"], row["max_diff_vs_savedmodel_cpu"]) <= 1e-5
        print(f"  L = {length}: vs Keras on CPU {row['max_diff_vs_keras_cpu']:.1e}, vs SavedModel on CPU "
              f"{row['max_diff_vs_savedmodel_cpu']:.1e} ({'within' if ok else 'OVER'} 1e-5, TF32 off); "
              f"with TF32 (TF's GPU default) vs Keras on CPU {row['max_diff_tf32_vs_keras_cpu']:.1e}", flush=True)
    print("\n(b) benchmarks/deres_cost.py at L = 8: DeRes-P / residual-only step time (goal <= 1.10)", flush=True)
    deres = ["--layers"] + (["--width", "32", "--tokens", "8", "--batch", "16", "--rounds", "2", "--steps", "1"]
                            if args.smoke else [])
    backends = args.deres_backends or (["jax"] if args.smoke else ["jax", "tensorflow", "torch"])
    for i, backend in enumerate(backends):
        left = args.budget - (time.perf_counter() - started)
        if left < 30:
            print(f"--- {backend}: skipped, the --budget of {args.budget} s is spent", flush=True)
            continue
        try:
            done = subprocess.run([sys.executable, str(HERE / "deres_cost.py")] + deres, capture_output=True, text=True,
                                  env=dict(env, KERAS_BACKEND=backend), timeout=left / (len(backends) - i), cwd=ROOT)
        except subprocess.TimeoutExpired:
            share = left / (len(backends) - i)
            print(f"--- {backend}: stopped after {share:.0f} s (its share of the budget)", flush=True)
            continue
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        print(f"--- {backend}" + ("" if done.returncode == 0 else f" failed: {done.stderr.strip()[-500:]}"))
        print("\n".join(lines), flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
