"""Every registered model at its shipped preset's size: parameters, FLOPs per sample and training
samples per second, in one run, so a user can pick by cost.

    python benchmarks/model_cost.py                    # every model, L = 200, batch 256 (JAX)
    python benchmarks/model_cost.py --models din rest suan --length 100

Each model is built with its default preset's hyperparameters (saved/<model>/config.json) on the
behaviour simulator's schema with histories of L behaviours (embedding 8, one candidate). FLOPs are
XLA's own count (`cost_analysis()` of the jitted inference forward pass at the benchmark batch,
divided by the batch): matrix products and elementwise work as XLA compiles them. Training
samples/s: `train_on_batch` (Adam, binary cross-entropy) on one fixed batch, the median of `--steps`
steps after two warm-up steps (compilation excluded; its time is printed separately). The
"vs din" column is the ratio to DIN's samples/s measured in the same run.

How close to the machine: the run first measures this machine's float32 matrix-product rate (a jitted
1024 x 1024 x 1024 product, the best of 20, XLA under JAX), then prints each model's achieved training
GFLOP/s, taken as 3 x the forward FLOPs per sample x samples/s (a backward pass costs about twice the
forward one), and that as a fraction of the matmul rate ("of peak"). Embedding gathers, softmaxes and
Python dispatch do few FLOPs, so small models sit far below the rate: the column shows where time goes
into anything but arithmetic.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # FLOPs come from XLA's cost analysis

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import zoo  # noqa: E402
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
from step_timing import train_step_seconds  # noqa: E402  (benchmarks/, the script's folder)
from zoo.datasets import BehaviourSimulator  # noqa: E402


def preset_hyperparameters(name):
    """The default preset's hyperparameters (its config without the schema)."""
    config = zoo.get(name, weights=None).get_config()
    return {k: v for k, v in config.items() if k not in ("schema", "name", "trainable", "dtype")}


def xla_flops(model, features):
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def forward(trainable, non_trainable, features):
        return model.stateless_call(trainable, non_trainable, features, training=False)[0]

    analysis = jax.jit(forward).lower(trainable, non_trainable, features).compile().cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0]
    return float(analysis.get("flops", float("nan")))


def matmul_rate(size=1024, repeats=20):
    """This machine's float32 matrix-product rate (FLOP/s) under XLA: the best of `repeats` products."""
    import time

    a = jax.numpy.ones((size, size), "float32")
    product = jax.jit(lambda x, y: x @ y)
    product(a, a).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product(a, a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def measure(name, simulator, batch_size, steps):
    keras.utils.set_random_seed(0)
    model = zoo.get(name, schema=simulator.schema, **preset_hyperparameters(name))
    features, labels = simulator.sample(batch_size, seed=1)
    flops = xla_flops(model, features) / batch_size
    model.compile(optimizer="adam", loss="binary_crossentropy")
    compile_seconds, times = train_step_seconds(model, features, labels, steps, warmup=1)
    return {"parameters": model.count_params(), "flops": flops, "samples_per_second": batch_size / np.median(times),
            "compile_seconds": compile_seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="registered models (default: all)")
    parser.add_argument("--length", type=int, default=200, help="history length L (default 200)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    names = args.models or zoo.registry.names()
    if "din" not in names:
        names = ["din"] + list(names)
    simulator = BehaviourSimulator(sequence_length=args.length, timeline_length=args.length + 50, num_users=200)
    print(f"backend {keras.backend.backend()}, L = {args.length}, batch {args.batch_size}, "
          f"{os.cpu_count()} CPU cores; sizes of each model's default preset")
    peak = matmul_rate()
    print(f"float32 matmul rate here (1024^3, XLA): {peak / 1e9:.1f} GFLOP/s")
    print(f"{'model':<18}{'parameters':>12}{'MFLOPs/sample':>15}{'samples/s':>11}{'compile s':>11}{'vs din':>8}"
          f"{'train GFLOP/s':>15}{'of peak':>9}")
    rows = {name: measure(name, simulator, args.batch_size, args.steps) for name in names}
    base = rows["din"]["samples_per_second"]
    for name, row in rows.items():
        achieved = 3 * row["flops"] * row["samples_per_second"]
        print(f"{name:<18}{row['parameters']:>12,}{row['flops'] / 1e6:>15.2f}{row['samples_per_second']:>11.0f}"
              f"{row['compile_seconds']:>11.1f}{row['samples_per_second'] / base:>8.2f}{achieved / 1e9:>15.2f}"
              f"{achieved / peak:>9.1%}")


if __name__ == "__main__":
    main()
