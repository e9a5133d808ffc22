"""Where a torch training step of the zoo's DIN (or DeepFM) goes: kernels vs Keras' and Python's own cost,
eager vs torch.compile, and the zoo's embedding lookup vs the Keras Embedding layer's, in one run
(KERAS_BACKEND=torch is set here).

    python benchmarks/torch_step_cost.py                 # issue #19's DIN: batch 1024, L = 50, embedding 32
    python benchmarks/torch_step_cost.py --model deepfm --no-compile
    python benchmarks/torch_step_cost.py --steps 20 --batch-size 256

One batch of the ML-100K shape (from the behaviour simulator: L = 50, embedding 32 per field), DIN with
attention (32, 16) and MLP (64, 32) with BatchNorm + Dice (DeepFM: its class defaults), Adam, Keras' own
train step (`model.train_on_batch`, what `fit` calls per batch under torch). Printed per variant:
- ms/step: the median wall time of a training step after warm-up;
- kernels ms: the share of a profiled step that torch's profiler records inside aten operators (the work
  itself: the matrix products, gathers, elementwise ops, forward and backward, and their own dispatch in
  C++), applied to the unprofiled step time (the profiler's own cost per operator lands in both parts);
- outside kernels: the rest of the step, i.e. Keras' layer calls, variable and optimizer bookkeeping and
  the Python interpreter, as ms and as a share of the step;
- ops/step: how many aten operators a step launches (each pays torch's eager dispatch).
Variants:
- eager: Keras' default on torch (jit_compile="auto"), the zoo as it is;
- eager, Embedding layer: the same model with FeatureEmbedding's lookups through each table's
  keras.layers.Embedding (F.embedding, backward `embedding_dense_backward`) instead of the zoo's
  `index_select` with int64 ids (backward `index_add_`);
- torch.compile (jit_compile=True; its compile time is the first step; inductor's kernels are not aten
  operators, so only its step time and the aten operators left outside its graphs are shown).
The ratio lines say how the variants' step times compare.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["KERAS_BACKEND"] = "torch"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from step_timing import train_step_seconds  # noqa: E402  (benchmarks/, the script's folder)


def one_batch(batch_size, length):
    """A training batch in the input contract, from the simulator (the ML-100K shape of issue #19)."""
    from zoo.datasets import BehaviourSimulator

    import torch

    simulator = BehaviourSimulator(sequence_length=length, timeline_length=length + 30, embedding_dim=32)
    features, labels = simulator.sample(batch_size, seed=1)
    # torch tensors, as Keras' torch data loader hands fit's steps (dynamo does not trace NumPy inputs)
    return simulator.schema, {k: torch.as_tensor(v) for k, v in features.items()}, torch.as_tensor(labels)


SIZES = {"din": {"attention_units": (32, 16), "mlp_units": (64, 32)}, "deepfm": {}}


def build(name, schema, jit_compile):
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

    keras.utils.set_random_seed(0)
    model = zoo.get(name, schema=schema, **SIZES[name])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", jit_compile=jit_compile)
    return model


def measure(model, features, labels, steps):
    """(first step s, median step s, share of a profiled step inside aten operators, aten ops per step)."""
    from torch.profiler import ProfilerActivity, profile

    first, times = train_step_seconds(model, features, labels, steps, warmup=3)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for _ in range(steps):
            model.train_on_batch(features, labels)
        profiled = (time.perf_counter() - started) / steps
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    kernel_share = sum(e.self_cpu_time_total for e in events) / 1e6 / steps / profiled
    ops = sum(e.count for e in events)
    return first, statistics.median(times), kernel_share, ops / steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant (and as many profiled)")
    parser.add_argument("--model", choices=sorted(SIZES), default="din")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (its first step takes minutes)")
    args = parser.parse_args(argv)
    import torch

    from zoo.layers.feature_embedding import FeatureEmbedding
    from zoo.recipes import host_allocator

    host_allocator.tune()  # as zoo.recipes.fit does
    schema, features, labels = one_batch(args.batch_size, args.length)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model}, batch {args.batch_size}, "
          f"L = {args.length}, embedding 32")
    print(f"{'variant':<24}{'ms/step':>9}{'kernels ms':>12}{'outside ms':>12}{'outside %':>11}{'ops/step':>10}"
          f"{'first step s':>14}")
    rows = {}
    variants = [("eager", "auto"), ("eager, Embedding layer", "auto")] + [("torch.compile", True)] * (not args.no_compile)
    zoo_lookup = FeatureEmbedding._lookup
    for name, jit in variants:
        layer_lookup = name == "eager, Embedding layer"
        FeatureEmbedding._lookup = (lambda self, f, ids: self._table(f)(ids)) if layer_lookup else zoo_lookup
        first, step, kernel_share, ops = measure(build(args.model, schema, jit), features, labels, args.steps)
        rows[name] = step
        if jit is True:  # inductor's generated kernels are not aten operators: no split to show
            print(f"{name:<24}{step * 1e3:>9.1f}{'-':>12}{'-':>12}{'-':>11}{ops:>10.0f}{first:>14.1f}", flush=True)
            continue
        kernels = step * kernel_share
        print(f"{name:<24}{step * 1e3:>9.1f}{kernels * 1e3:>12.1f}{(step - kernels) * 1e3:>12.1f}"
              f"{100 * (1 - kernel_share):>10.0f}%{ops:>10.0f}{first:>14.1f}", flush=True)
    FeatureEmbedding._lookup = zoo_lookup
    print(f"Embedding layer's lookup / the zoo's, step time: {rows['eager, Embedding layer'] / rows['eager']:.2f}x")
    if "torch.compile" in rows:
        print(f"torch.compile / eager step time: {rows['torch.compile'] / rows['eager']:.2f}x")


if __name__ == "__main__":
    main()
