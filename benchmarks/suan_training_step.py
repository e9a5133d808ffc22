"""Training step time of SUAN's full self-attention vs LightSUAN's sparse attention (§3.3.1), for the
attention layer alone and for the whole model, at L = 50 and L = 1000.

    KERAS_BACKEND=jax python benchmarks/suan_training_step.py              # L = 50, 1000; k = 8; r = 2, 8
    python benchmarks/suan_training_step.py --backends tensorflow jax torch    # one process per backend
    python benchmarks/suan_training_step.py --lengths 50 1000 --batch 64 8 --single-thread --steps 3
    python benchmarks/suan_training_step.py --lengths 200 --dilations 4 --parts model

For each L the rows are measured in one process, one after the other on the same batch: the layer
(`SuanSelfAttention`, d = 24, h = 2, one candidate, a loss on the mean of both outputs) with full
attention and sparse attention per r, then SUAN vs LightSUAN (l = 2, h = 2, the same sizes). A step
is `train_on_batch` (Adam) on one fixed batch: every row is compiled and warmed up (three steps),
then `--steps` rounds time one step of each row in turn, so that the rows share the machine's load
alike; the median per row. "x full" is the full-attention step time over the row's: above 1, the row is faster.

FLOPs: "pairs" counts the query-key pairs a layer's history attention computes (each costs one
d-wide dot product in Q K^T and one in P V, plus the eq 4 bias and the softmax, so the attention's
work is proportional to it), "allowed" the pairs the pattern allows (the least any formulation must
compute), per row of the batch; "MFLOP" is the 4 d multiply-adds-as-FLOPs of the two products per
computed pair, per row. A sparse layer picks its formulation when it is built (`formulation`):
"banded" computes only the window band and the dilated residue classes, "masked" the dense causal
product under the sparse mask; the layer rows also time both, forced, side by side.
"""

import argparse
import os
import subprocess
import sys
import time

import keras
import numpy as np
from keras import ops

from step_timing import train_step_seconds  # benchmarks/, the script's folder
from zoo.datasets import BehaviourSimulator
from zoo.layers.suan_self_attention import SuanSelfAttention, attention_pairs
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN

WIDTH, HEADS = 24, 2


def timed_rows(rows, features, labels, steps, loss):
    """Milliseconds per step of each (name, model, ...) row: compiled and warmed up first, then `steps`
    rounds of one step of every row in turn (so the rows share the machine's load); the median."""
    times = {}
    for name, model, *_ in rows:
        model.compile(optimizer="adam", loss=loss)
        train_step_seconds(model, features, labels, steps=0, warmup=2)
        times[name] = []
    for _ in range(steps):
        for name, model, *_ in rows:
            started = time.perf_counter()
            model.train_on_batch(features, labels)
            times[name].append(time.perf_counter() - started)
    return {name: 1000 * float(np.median(t)) for name, t in times.items()}


def layer_model(length, batch, window=None, dilation=1, formulation=None):
    """SuanSelfAttention in a functional model whose output [B] is the mean of its two outputs."""
    layer = SuanSelfAttention(HEADS, length, window_size=window, dilation=dilation)
    if formulation is not None:
        layer.formulation = formulation
    shapes = {"history": ((length, WIDTH), "float32"), "candidates": ((1, WIDTH), "float32"),
              "history_valid": ((length,), "bool"), "history_visible": ((1, length), "bool"),
              "history_times": ((length,), "int32"), "candidate_times": ((1,), "int32")}
    inputs = {name: keras.Input(shape=shape, batch_size=batch, dtype=dtype, name=name)
              for name, (shape, dtype) in shapes.items()}
    out_h, out_c = layer(*inputs.values())
    return keras.Model(inputs, ops.mean(out_h, axis=(1, 2)) + ops.mean(out_c, axis=(1, 2)))


def layer_batch(length, batch, seed=1):
    rng = np.random.RandomState(seed)
    valid = np.ones((batch, length), bool)
    valid[: batch // 2, : length // 5] = False  # half the rows left-padded
    times = np.sort(rng.randint(0, 10**7, (batch, length)), axis=1).astype("int32")
    features = {"history": rng.normal(size=(batch, length, WIDTH)).astype("float32"),
                "candidates": rng.normal(size=(batch, 1, WIDTH)).astype("float32"),
                "history_valid": valid, "history_visible": valid[:, None, :], "history_times": times,
                "candidate_times": times[:, -1:] + 60}
    return features, rng.normal(size=(batch,)).astype("float32")


def report(rows, ms):
    full = ms[rows[0][0]]
    for name, _, *cost in rows:
        pairs = "".join(f"{p:>10,}" for p in cost) + (f"{4 * WIDTH * cost[0] / 1e6:>8.1f}" if cost else "")
        print(f"  {name:<34}{ms[name]:>10.1f}{full / ms[name]:>8.2f}{pairs}", flush=True)


def measure_layer(length, window, dilations, batch, steps):
    features, labels = layer_batch(length, batch)
    rows = [("full attention", layer_model(length, batch), attention_pairs(length, None, 1, "masked"),
             attention_pairs(length, None, 1, "allowed"))]
    for r in dilations:
        allowed = attention_pairs(length, window, r, "allowed")
        chosen = SuanSelfAttention(HEADS, length, window_size=window, dilation=r).formulation
        for formulation in ("banded", "masked"):
            mark = " (built)" if formulation == chosen else ""
            model = layer_model(length, batch, window, r, formulation)
            rows.append((f"sparse k={window} r={r} {formulation}{mark}", model,
                         attention_pairs(length, window, r, formulation), allowed))
    report(rows, timed_rows(rows, features, labels, steps, "mse"))


def measure_model(length, window, dilations, batch, steps):
    keras.utils.set_random_seed(0)
    simulator = BehaviourSimulator(num_users=50, num_items=500, num_categories=20, sequence_length=length,
                                   timeline_length=length + 20)
    features, labels = simulator.sample(batch, seed=1)
    common = {"num_layers": 2, "num_heads": HEADS, "mlp_units": (256, 128)}
    rows = [("SUAN (full attention)", SUAN(simulator.schema, **common))]
    for r in dilations:
        model = LightSUAN(simulator.schema, window_size=window, dilation=r, **common)
        formulation = model.get_layer("encoder").blocks[0].attention.formulation
        rows.append((f"LightSUAN k={window} r={r} ({formulation})", model))
    report(rows, timed_rows(rows, features, labels, steps, "binary_crossentropy"))


def single_thread():
    """One intra-op thread for the backend (before its first operation)."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    else:
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", help="run this script once per backend, each in its own process")
    parser.add_argument("--lengths", type=int, nargs="+", default=[50, 1000])
    parser.add_argument("--window", type=int, default=8, help="k (default 8, the paper's setting)")
    parser.add_argument("--dilations", type=int, nargs="+", default=[2, 8], help="r values (default 2 8)")
    parser.add_argument("--parts", nargs="+", choices=("layer", "model"), default=["layer", "model"])
    parser.add_argument("--batch", type=int, nargs="+", default=[8], help="batch size, one for all L or one per L")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--single-thread", action="store_true",
                        help="one intra-op thread (steadier timings on a machine shared with other jobs)")
    args = parser.parse_args()
    if args.backends:
        rest = [a for a in sys.argv[1:] if a not in args.backends and a != "--backends"]
        for backend in args.backends:
            subprocess.run([sys.executable, __file__] + rest, env={**os.environ, "KERAS_BACKEND": backend}, check=True)
        return
    if args.single_thread:
        single_thread()
    print(f"backend {keras.backend.backend()}, d = {WIDTH}, h = {HEADS}, {os.cpu_count()} CPU cores"
          f"{', one thread' if args.single_thread else ''}; median of {args.steps} steps")
    print(f"  {'':<34}{'ms/step':>10}{'x full':>8}{'pairs':>10}{'allowed':>10}{'MFLOP':>8}")
    batches = args.batch * len(args.lengths) if len(args.batch) == 1 else args.batch
    if len(batches) != len(args.lengths):
        parser.error(f"--batch takes one size or one per length ({len(args.lengths)}), got {len(args.batch)}")
    for length, batch in zip(args.lengths, batches):
        print(f"L = {length}, batch {batch}")
        if "layer" in args.parts:
            measure_layer(length, args.window, args.dilations, batch, args.steps)
        if "model" in args.parts:
            measure_model(length, args.window, args.dilations, batch, args.steps)


if __name__ == "__main__":
    main()
