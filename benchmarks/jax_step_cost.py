"""Why a JAX training step of the zoo's small models is slower than TensorFlow's, both through XLA: the same
step timed under each backend, and JAX's step split by XLA:CPU operation kind from its profiler trace.

    python benchmarks/jax_step_cost.py                          # din and deres_p, batch 1024, L = 50
    python benchmarks/jax_step_cost.py --models deres_p --steps 20

Each variant runs in its own process (the backend is fixed at import), on one fixed batch of the ML-100K
shape from the behaviour simulator (L = 50, embedding 32 per field), at backend_parity.py's model sizes,
Adam, `jit_compile=True` (what Keras' "auto" picks for these models on TensorFlow and JAX):
- tensorflow: Keras' TensorFlow train step (tf.function + XLA, TensorFlow's own XLA build);
- jax: Keras' JAX train step (jax.jit; jaxlib's XLA:CPU, its thunk runtime and YNNPACK fusions);
- jax -ynn: the same with XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-dot,-eltwise,-reduce (XLA's
  own loops for the fusions YNNPACK would take).
Printed: the median step (ms) and its ratio to TensorFlow's; then, from a jax.profiler trace of 5 steps,
the kernel time per step by XLA operation kind (fusion names without their numbers; summed over the
threads that run them, so it may exceed the wall time) and the host's copy of the batch to the device
(`device_put`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_YNN = "--xla_cpu_experimental_ynn_fusion_type=-dot,-eltwise,-reduce"


def worker(backend, model_name, batch_size, length, steps, profile):
    """Runs in the variant's process: prints one JSON line."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from backend_parity import hyperparameters
    from step_timing import train_step_seconds
    from zoo.datasets import BehaviourSimulator

    simulator = BehaviourSimulator(sequence_length=length, timeline_length=length + 30, embedding_dim=32)
    features, labels = simulator.sample(batch_size, seed=1)
    keras.utils.set_random_seed(0)
    model = zoo.get(model_name, schema=simulator.schema, **hyperparameters(model_name, smoke=False))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", jit_compile=True)
    first, times = train_step_seconds(model, features, labels, steps, warmup=2)
    out = {"first_s": first, "step_ms": 1e3 * statistics.median(times)}
    if profile:
        out["kinds"] = _profile(model, features, labels)
    print(json.dumps(out))


def _profile(model, features, labels, steps=5):
    """{operation kind: [ms per step, calls per step]} of a jax.profiler trace of `steps` steps."""
    import collections
    import glob
    import gzip
    import re
    import tempfile

    import jax

    directory = tempfile.mkdtemp(prefix="zoo-jax-trace-")
    jax.profiler.start_trace(directory)
    for _ in range(steps):
        model.train_on_batch(features, labels)
    jax.profiler.stop_trace()
    trace = sorted(glob.glob(os.path.join(directory, "**", "*.trace.json.gz"), recursive=True))[-1]
    with gzip.open(trace) as f:
        events = json.load(f)["traceEvents"]
    time, calls = collections.Counter(), collections.Counter()
    for event in events:
        name = event.get("name", "")
        if event.get("ph") != "X" or name.startswith("$") or name.startswith("ThunkExecutor"):
            continue  # Python frames and the executor's own spans (they enclose the kernels)
        kind = "device_put (the batch to the device)" if name in ("DevicePutWithSharding", "shard_args") \
            else re.sub(r"\.\d+$", "", name)
        time[kind] += event.get("dur", 0) / 1e3 / steps
        calls[kind] += 1 / steps
    return {kind: [ms, calls[kind]] for kind, ms in time.items()}


def run_variant(backend, model, args, flags="", profile=False):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", XLA_FLAGS=flags)
    command = [sys.executable, __file__, "--worker", backend, model, "--batch-size", str(args.batch_size),
               "--length", str(args.length), "--steps", str(args.steps)] + (["--profile"] if profile else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{backend} {model} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["din", "deres_p"])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=10, help="operation kinds listed per model")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(*args.worker, args.batch_size, args.length, args.steps, args.profile)
    print(f"batch {args.batch_size}, L = {args.length}, median of {args.steps} steps; each variant in its own process")
    print(f"{'model':<9} {'variant':<11} {'step ms':>9} {'vs tf':>7} {'first s':>8}")
    for model in args.models:
        tf = run_variant("tensorflow", model, args)
        jax_run = run_variant("jax", model, args, profile=True)
        no_ynn = run_variant("jax", model, args, flags=NO_YNN)
        for name, result in (("tensorflow", tf), ("jax", jax_run), ("jax -ynn", no_ynn)):
            print(f"{model:<9} {name:<11} {result['step_ms']:>9.1f} {result['step_ms'] / tf['step_ms']:>6.2f}x "
                  f"{result['first_s']:>8.1f}")
        kinds = sorted(jax_run["kinds"].items(), key=lambda item: -item[1][0])
        total = sum(ms for ms, _ in jax_run["kinds"].values())
        print(f"  jax kernels by kind, ms per step (all threads: {total:.0f} ms against a {jax_run['step_ms']:.0f} ms step)")
        for kind, (ms, calls) in kinds[: args.top]:
            print(f"    {ms:8.1f} ms {ms / total:6.1%}  {calls:6.0f} calls  {kind}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
