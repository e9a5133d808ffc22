"""The time between the end of training and `zoo.recipes.fit` returning, over sequential one-epoch runs,
with the zoo's pipelines as they are (tf.data's autotuning thread off, datasets/pipeline.py) and with
tf.data's default (the thread on), in one process per variant.

    python benchmarks/fit_end_gap.py                          # TensorFlow, 20 runs per variant
    KERAS_BACKEND=torch python benchmarks/fit_end_gap.py --runs 20 --model din

Each run: a fresh DIN (or DeepFM) at backend_parity's sizes, one epoch of ML-100K (ReST protocol, L = 50,
batch 1024, validation after the epoch) through zoo.recipes.fit. Timed: `end s`, from Keras'
on_train_end (after the last step and the validation pass) until fit returns, and `val end s`, from the
last validation batch to on_epoch_end (the validation iterator's end). Issue #40's goal: no gap above 1 s
in 20 runs. Printed per variant: every run's gaps, their maximum and how many exceed 1 s.

The stall is a race (the autotuning thread is not always woken when its iterator ends), rare per fit.
`--deletions N` (default 50) also runs the mechanism alone, more often: a pipeline shaped like the zoo's
(a generator of row indices, a parallel NumPy gather, prefetch) iterated for 3 s, then deleted, N times per
variant; printed: the longest deletion and how many took over 0.5 s.
"""

import argparse
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "movielens-100k"
SIZES = {"din": {"attention_units": (32, 16), "mlp_units": (64, 32)}, "deepfm": {"mlp_units": (64, 32)}}


def worker(args):
    import json

    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.datasets import pipeline
    fit_module = importlib.import_module("zoo.recipes.fit")  # (zoo.recipes.fit is also the function's name)

    if args.variant == "tf-default":  # the thread back on: the helper leaves datasets as they are
        pipeline.without_autotune_thread = fit_module.without_autotune_thread = lambda dataset: dataset
    options = dict(sequence_length=50, verbose=False)
    train, schema = zoo.datasets.load("movielens", str(args.data), split="train", batch_size=1024, **options)
    val, _ = zoo.datasets.load("movielens", str(args.data), split="validation", batch_size=4096, **options)

    class Marks(keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            self.last_val_batch = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_end = time.perf_counter()

        def on_train_end(self, logs=None):
            self.train_end = time.perf_counter()

    for run in range(args.runs):
        keras.utils.set_random_seed(run)
        model = zoo.get(args.model, schema=schema, **SIZES[args.model])
        marks = Marks()
        zoo.recipes.fit(model, train, val, recipe="suan", epochs=1, batch_size=1024, callbacks=[marks], verbose=0)
        returned = time.perf_counter()
        print(json.dumps({"run": run, "end_s": returned - marks.train_end,
                          "val_end_s": marks.epoch_end - marks.last_val_batch}), flush=True)


BARE = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
variant, deletions = sys.argv[1], int(sys.argv[2])
data = np.random.default_rng(0).random((200_000, 16), dtype=np.float32)

def pipeline():
    def indices():
        start = 0
        while True:
            yield np.arange(start, start + 256) % len(data)
            start += 256
    dataset = tf.data.Dataset.from_generator(indices, output_signature=tf.TensorSpec([None], tf.int64))
    dataset = dataset.map(lambda i: tf.numpy_function(lambda i: data[i], [i], tf.float32),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)
    if variant == "zoo":
        from zoo.datasets.pipeline import without_autotune_thread
        dataset = without_autotune_thread(dataset)
    return dataset

times = []
for _ in range(deletions):
    iterator = iter(pipeline())
    started = time.perf_counter()
    while time.perf_counter() - started < 3:
        next(iterator)
        time.sleep(0.002)
    started = time.perf_counter()
    del iterator
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def bare(deletions):
    import json

    print(f"\na zoo-shaped tf.data pipeline iterated 3 s, then deleted, {deletions} times per variant")
    for variant in ("zoo", "tf-default"):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", BARE, variant, str(deletions)], env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(f"{variant}: failed:\n{done.stderr[-3000:]}")
        times = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{variant:<11} longest deletion {max(times):.3f} s; {sum(t > 0.5 for t in times)} of {len(times)} "
              "over 0.5 s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--model", default="din", choices=sorted(SIZES))
    parser.add_argument("--data", default=str(DATA), help="the ML-100K folder (u.data)")
    parser.add_argument("--deletions", type=int, default=50, help="bare pipeline deletions per variant (0: none)")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        return worker(args)
    import json

    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    print(f"{args.runs} sequential one-epoch fits of {args.model} on ML-100K, backend {backend}")
    for variant in ("zoo", "tf-default") if args.runs else ():
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, __file__, "--variant", variant, "--runs", str(args.runs),
                               "--model", args.model, "--data", args.data], env=env, capture_output=True, text=True)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not rows:
            raise SystemExit(f"{variant}: the worker failed:\n{done.stderr[-3000:]}")
        gaps = [max(r["end_s"], r["val_end_s"]) for r in rows]
        print(f"{variant:<11} end s:     " + " ".join(f"{r['end_s']:.2f}" for r in rows))
        print(f"{'':<11} val end s: " + " ".join(f"{r['val_end_s']:.2f}" for r in rows))
        print(f"{'':<11} max gap {max(gaps):.2f} s; {sum(g > 1 for g in gaps)} of {len(rows)} runs above 1 s",
              flush=True)
    if args.deletions:
        bare(args.deletions)


if __name__ == "__main__":
    main()
