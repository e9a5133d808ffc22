"""A training step on the idle machine and beside busy processes, per backend, with the zoo's thread
settings (zoo/threads.py) and with the libraries' defaults (ZOO_THREADS=default), in one run.

    python benchmarks/busy_machine.py                     # every backend, 3 busy processes
    python benchmarks/busy_machine.py --backends torch --busy 3 --steps 30

Each (backend, variant) runs in a fresh process: DeepFM (its class defaults) on one simulated batch of
1024 rows, Adam, Keras' own train step (`train_on_batch`, what fit runs per batch); the median step after
warm-up is timed first on the idle machine, then while `--busy` processes spin on a core each (pure
Python loops, started and stopped by this script). Printed: both medians and busy / idle per row; the
issue's goal (#39) is busy / idle <= 3 for every backend with the zoo's settings.

Variant `fit`: the same model trained through `zoo.recipes.fit` (the zoo's settings, and under torch its
ThreadTuner choosing the thread count from the measured steps, recipes/thread_tuner.py) on a simulated
tf.data pipeline of batch 1024, `--fit-steps` steps idle, then as many beside the busy processes; a step
is the time from one training step's end to the next's (the batch's loading included), the median of the
second half of each phase (after the tuner's first probe). The threads column then shows the counts the
tuner kept (idle -> busy). `--model dcnv2` trains DCN-v2 instead (matrix products: more threads pay).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, os, statistics, sys, time
sys.path.insert(0, os.environ["BENCH_DIR"])
import zoo
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
import keras
from zoo.datasets import BehaviourSimulator
from step_timing import train_step_seconds

simulator = BehaviourSimulator(sequence_length=50, timeline_length=80, embedding_dim=16)
keras.utils.set_random_seed(0)
model = zoo.get(os.environ["BENCH_MODEL"], schema=simulator.schema)
steps = int(os.environ["BENCH_STEPS"])
if os.environ["BENCH_FIT"] == "1":  # through zoo.recipes.fit: a step from one step's end to the next's
    class Ends(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.ends = []
        def on_train_batch_end(self, batch, logs=None):
            self.ends.append(time.perf_counter())

    data = simulator.dataset(1024 * 64, batch_size=1024, seed=1)
    def phase():
        ends = Ends()
        history = zoo.recipes.fit(model, data, recipe="suan", epochs=1, steps_per_epoch=steps, verbose=0,
                                  callbacks=[ends])
        gaps = [b - a for a, b in zip(ends.ends, ends.ends[1:])][steps // 2:]
        tuner = history.thread_tuner
        return gaps, (tuner.probes[-1]["threads"] if tuner and tuner.probes else None)
    idle, idle_threads = phase()
    print("READY", flush=True)
    sys.stdin.readline()  # the busy processes are running now
    busy, busy_threads = phase()
    threads = f"{idle_threads}->{busy_threads}" if idle_threads else "-"
else:
    features, labels = simulator.sample(1024, seed=1)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy")
    _, idle = train_step_seconds(model, features, labels, steps, warmup=3)
    print("READY", flush=True)
    sys.stdin.readline()  # the busy processes are running now
    _, busy = train_step_seconds(model, features, labels, steps, warmup=1)
    threads = None
print(json.dumps({"idle_ms": 1e3 * statistics.median(idle), "busy_ms": 1e3 * statistics.median(busy),
                  "threads": zoo.threads.applied, "tuned": threads}), flush=True)
"""

SPIN = "while True: pass"


def run(backend, variant, busy, steps, model="deepfm"):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT),
               BENCH_DIR=str(ROOT / "benchmarks"), BENCH_STEPS=str(steps), BENCH_MODEL=model,
               BENCH_FIT="1" if variant == "fit" else "0")
    for name in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        env.pop(name, None)  # this script's own process imported nothing that set them; a shell might have
    if variant == "defaults":
        env["ZOO_THREADS"] = "default"
    if variant.startswith("threads="):  # a fixed thread count for every pool (the user's own setting)
        env.update({name: variant.split("=")[1] for name in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")})
    worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    spinners = []
    try:
        for line in worker.stdout:
            if line.startswith("READY"):
                spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
                time.sleep(1.0)  # the spinners are up
                worker.stdin.write("\n")
                worker.stdin.flush()
            elif line.startswith("{"):
                return json.loads(line)
        raise SystemExit(f"{backend} {variant}: the worker ended without a result (exit {worker.wait()})")
    finally:
        for spinner in spinners:
            spinner.kill()
        worker.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--busy", type=int, default=3, help="busy processes beside the step (default 3)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per phase (default 20)")
    parser.add_argument("--variants", nargs="+", default=["zoo", "defaults", "fit"],
                        help="zoo (zoo/threads.py), defaults (ZOO_THREADS=default), threads=N (a fixed count), "
                        "fit (zoo.recipes.fit with the zoo's settings and torch's ThreadTuner)")
    parser.add_argument("--fit-steps", type=int, default=120, help="steps per phase of the fit variant (default 120)")
    parser.add_argument("--model", default="deepfm", choices=("deepfm", "dcnv2"))
    args = parser.parse_args()
    print(f"{args.model}, batch 1024, {os.cpu_count()} CPUs; {args.busy} busy processes; median of {args.steps} "
          f"train_on_batch steps (fit: of the last {args.fit_steps - args.fit_steps // 2 - 1} of {args.fit_steps})")
    print(f"{'backend':<11} {'variant':<9} {'idle ms':>8} {'busy ms':>8} {'busy/idle':>9}  threads kept (fit, torch)")
    for backend in args.backends:
        for variant in args.variants:
            steps = args.fit_steps if variant == "fit" else args.steps
            result = run(backend, variant, args.busy, steps, args.model)
            ratio = result["busy_ms"] / result["idle_ms"]
            flag = "" if ratio <= 3 or variant == "defaults" else "  (goal <= 3 not met)"
            print(f"{backend:<11} {variant:<9} {result['idle_ms']:>8.1f} {result['busy_ms']:>8.1f} {ratio:>8.2f}x"
                  f"  {result['tuned'] or ''}{flag}", flush=True)


if __name__ == "__main__":
    main()
