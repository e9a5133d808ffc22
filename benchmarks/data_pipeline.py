"""Examples/s of each data pipeline (after caching) vs the training consumption rate of its model.

    python benchmarks/data_pipeline.py [--data ../shared/data] [--batch-size 256] [--batches 40]

For each data set: (1) the processed cache is built (not timed), (2) the tf.data pipeline of the
training split is iterated for --batches batches (examples/s), (3) the matching model (DeRes-P for
Criteo/Avazu, ReST for MovieLens, SUAN for Taobao/Eleme; DIN when the model does not accept the schema)
trains on the same batches with `train_on_batch` (examples/s, after one warm-up step). The ratio
pipeline / model says how much headroom the input side has (goal: >= 5x). Amazon Books shares the
MovieLens pipeline and is not repeated.
"""

import argparse
import os
import shutil
import tempfile
import time

import keras
import numpy as np

import zoo
from zoo.datasets import eleme, load


def cases(data, scratch):
    simulator = zoo.datasets.BehaviourSimulator(num_users=300, num_items=400, sequence_length=50, timeline_length=60)
    eleme_folder = os.path.join(scratch, "eleme")
    os.makedirs(eleme_folder, exist_ok=True)
    eleme.write_simulated(os.path.join(eleme_folder, "eleme.csv"), simulator, 5000, seed=0)
    return [
        ("criteo/deres", "criteo", f"{data}/deepctr/criteo_sample.txt", {}, "deres_p"),
        ("avazu/deres", "avazu", f"{data}/avazu-head1k/avazu_sample.txt", {}, "deres_p"),
        ("movielens/rest (ML-100K)", "movielens", f"{data}/movielens-100k", {"sequence_length": 50}, "rest"),
        ("taobao/suan", "taobao", f"{data}/taobao-userbehavior", {"sequence_length": 50}, "suan"),
        ("taobao/ads", "taobao", f"{data}/fuxictr-tiny-taobaoad", {"sequence_length": 50}, "suan"),
        ("eleme/suan (simulated rows)", "eleme", eleme_folder, {"sequence_length": 50}, "suan"),
    ]


def pipeline_rate(dataset, batches):
    iterator = iter(dataset)
    next(iterator)  # start-up (generator, prefetch) not timed
    start, seen = time.perf_counter(), 0
    for _ in range(batches):
        features, labels = next(iterator)
        seen += int(labels.shape[0])
    return seen / (time.perf_counter() - start)


def model_rate(name, schema, dataset, steps):
    try:
        model = zoo.get(name, schema=schema)
    except zoo.ZooError as error:
        print(f"    {name} does not take this schema ({error}); using din")
        name, model = "din", zoo.get("din", schema=schema)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    batches = [
        ({k: np.asarray(v) for k, v in features.items()}, np.asarray(labels))
        for features, labels in dataset.take(steps + 1)
    ]
    model.train_on_batch(*batches[0])
    start, seen = time.perf_counter(), 0
    for features, labels in batches[1:]:
        model.train_on_batch(features, labels)
        seen += labels.shape[0]
    return name, seen / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="zoo-bench-")
    cache = os.path.join(scratch, "cache")
    print(f"backend {keras.backend.backend()}, batch {args.batch_size}")
    print(f"{'pipeline':30s} {'pipeline ex/s':>14s} {'model':>10s} {'train ex/s':>11s} {'ratio':>7s}")
    try:
        run(args, scratch, cache)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # processed data of licensed data sets: not kept


def run(args, scratch, cache):
    for label, name, path, options, model_name in cases(args.data, scratch):
        if not os.path.exists(path):
            print(f"{label:30s} (no data at {path})")
            continue
        processed = zoo.datasets.prepare(name, path, cache_dir=cache, verbose=False, **options)
        batch = min(args.batch_size, processed.num_rows("train"))  # fixed-size batches (no retracing)
        dataset, schema = load(name, path, cache_dir=cache, batch_size=batch, repeat=True, drop_remainder=True,
                               verbose=False, **options)
        rate = pipeline_rate(dataset, args.batches)
        used, train = model_rate(model_name, schema, dataset, args.steps)
        print(f"{label:30s} {rate:14,.0f} {used:>10s} {train:11,.0f} {rate / train:6.1f}x")


if __name__ == "__main__":
    main()
