"""Examples/s of each data pipeline (after caching) vs the training consumption rate of its model.

    python benchmarks/data_pipeline.py [--data ../shared/data] [--batch-size 256] [--batches 40]
    python benchmarks/data_pipeline.py --criteo-rows 1000000 4000000   # ingest: the engine vs bare parsers
    python benchmarks/data_pipeline.py --events-rows 4000000            # ingest of an event log with histories
    python benchmarks/data_pipeline.py --feeding 300000                 # recipes.fit vs from memory (fm, dcnv2)

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
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
from zoo.datasets import eleme, load
from zoo.datasets.pipeline import make_dataset


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


# Criteo-format generator: DLRM's published Kaggle Criteo table sizes (the cardinalities a full file reaches).
CRITEO_CARDINALITY = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
                      5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)


def write_criteo(path, rows, seed=0):
    """A tab-separated Criteo train.txt of `rows` rows: ~26% positives, 13 counts (~21% empty), 26 hashed
    categories whose cardinality grows with the file toward DLRM's table sizes (Zipf-like draws)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            label = (rng.random(n) < 0.26).astype(int)
            counts = np.floor(rng.lognormal(1.5, 1.6, size=(n, 13))).astype(np.int64)
            empty = rng.random((n, 13)) < 0.21
            columns = [label.astype(str)]
            columns += [np.where(empty[:, j], "", counts[:, j].astype(str)) for j in range(13)]
            for cardinality in CRITEO_CARDINALITY:
                seen = min(cardinality, max(10, int(cardinality * min(1.0, (start + n) / 45_840_617)) + 1))
                ids = np.minimum(rng.zipf(1.2, n) - 1, seen - 1) * 2654435761 % (2**32)
                columns.append(np.char.mod("%08x", ids))
            f.write("\n".join("\t".join(row) for row in zip(*columns)) + "\n")


def write_events(path, rows, seed=0):
    """A Taobao UserBehavior-like event log with a header (ts, behavior, item, user, category): ~rows/100
    users, Zipf items, 9 days of unix times in no order."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("ts,behavior,item,user,category\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            item = np.minimum(rng.zipf(1.3, n), 4_000_000)
            columns = [(1_511_539_200 + rng.integers(0, 9 * 86400, n)).astype(str),
                       rng.choice(np.array(["pv", "cart", "fav", "buy"]), n, p=[0.89, 0.055, 0.03, 0.025]),
                       item.astype(str), rng.integers(0, max(1, rows // 100), n).astype(str),
                       (item * 7919 % 9000).astype(str)]
            f.write("\n".join(",".join(row) for row in zip(*columns)) + "\n")


EVENTS_SPEC = {
    "label": {"events": True, "negatives": 1, "seed": 0},
    "time": {"column": "ts", "format": "unix_s"},
    "user": "user", "item": "item",
    "columns": {"user": {"role": "user", "hash_buckets": 1 << 20}, "item": {"role": "cand", "min_count": 2},
                "category": {"role": "cand"}, "behavior": {"role": "hist"}},
    "history": {"from": "log", "fields": ["item", "category", "behavior"], "min_length": 1},
    "sequence_length": 50, "split": {"by": "time", "fractions": [0.8, 0.1, 0.1]},
}


def criteo_ingest(rows, scratch, kind="criteo"):
    """Builds the Criteo deres cache (kind "events": an event log with histories from the log and sampled
    negatives, EVENTS_SPEC) of a generated file in a fresh process (CPU-s, wall, peak RSS), in memory and
    streaming, and times pyarrow's (and polars', when installed) bare parse of the same file."""
    import json
    import subprocess
    import sys

    path = os.path.join(scratch, f"{kind}-{rows}", "train.txt" if kind == "criteo" else "events.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    (write_criteo if kind == "criteo" else write_events)(path, rows)
    code = """
import json, os, resource, sys, time
variant, path, cache, kind = sys.argv[1:]
if variant.startswith("zoo"):
    import zoo.datasets  # imported before the clock starts: the build is timed, not TensorFlow's start-up
start, cpu = time.perf_counter(), time.process_time()
if variant.startswith("zoo"):
    if kind == "criteo":
        zoo.datasets.prepare("criteo", path, protocol="deres", cache_dir=cache, verbose=False)
    else:
        zoo.datasets.prepare(json.loads(kind), path, cache_dir=cache, verbose=False)
elif variant == "pyarrow":
    import pyarrow as pa, pyarrow.csv as pcsv
    names = ["c%d" % i for i in range(40 if kind == "criteo" else 5)]
    reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(column_names=names),
                           parse_options=pcsv.ParseOptions(delimiter="\\t" if kind == "criteo" else ",",
                                                           quote_char=False),
                           convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in names}))
    for batch in reader:
        pass
else:
    import polars as pl
    pl.read_csv(path, separator="\\t" if kind == "criteo" else ",", has_header=False, infer_schema_length=0, quote_char=None)
peak = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")][0]
print(json.dumps({"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "rss_mib": peak / 1024}))
"""
    results = {}
    # zoo: the in-memory build (one read, every row's columns held); zoo-stream: the streaming build (batches
    # of rows, memory bounded by the distinct values; the deres split by row order reads three times)
    for variant, threshold in (("zoo", 2**62), ("zoo-stream", 0), ("pyarrow", 0), ("polars", 0)):
        done = subprocess.run([sys.executable, "-c", code, variant, path, os.path.join(scratch, "cache", variant),
                               "criteo" if kind == "criteo" else json.dumps(EVENTS_SPEC)],
                              capture_output=True, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", ZOO_STREAM_BYTES=str(threshold)))
        if done.returncode != 0:
            if variant != "polars":
                raise SystemExit(f"{variant}: {done.stderr.strip().splitlines()[-1]}")
            results[variant] = None  # polars not installed
            continue
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    size = os.path.getsize(path)
    os.remove(path)
    return results, size


def criteo_main(args, kind="criteo"):
    scratch = tempfile.mkdtemp(prefix="zoo-criteo-")
    try:
        print("Criteo deres cache build of a generated train.txt" if kind == "criteo" else
              "Cache build of a generated event log (histories from the log, 1 sampled negative, time split)",
              "(CPU-s of the build, after imports; peak RSS of the whole process)")
        print(f"{'rows':>10s} {'MB':>7s} {'variant':>10s} {'CPU-s':>8s} {'wall s':>8s} {'rows/CPU-s':>11s} {'peak MiB':>9s}")
        for rows in args.criteo_rows if kind == "criteo" else args.events_rows:
            results, size = criteo_ingest(rows, scratch, kind)
            for variant, r in results.items():
                if r is None:
                    print(f"{rows:>10,d} {size / 1e6:7.0f} {variant:>10s}  (not installed)")
                    continue
                print(f"{rows:>10,d} {size / 1e6:7.0f} {variant:>10s} {r['cpu']:8.1f} {r['wall']:8.1f} "
                      f"{rows / r['cpu']:11,.0f} {r['rss_mib']:9.0f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def feeding(args):
    """`--feeding ROWS`: samples/s of fm and dcnv2 trained by zoo.recipes.fit from the Criteo pipeline
    (batch 4096), and of din from a generated event log of ROWS / 4 events (EVENTS_SPEC, L = 20, batch
    1024: histories gathered at batch time), against the same model fed the same batches from memory
    (NumPy arrays, model.fit), and the loader alone; second epoch of each timed (the first compiles)."""
    from zoo.recipes import fit, get_recipe

    scratch = tempfile.mkdtemp(prefix="zoo-feeding-")
    try:
        path = os.path.join(scratch, "train.txt")
        write_criteo(path, args.feeding)
        cache = os.path.join(scratch, "cache")
        train, schema = load("criteo", path, split="train", batch_size=4096, cache_dir=cache, verbose=False)
        batches = list(train.as_numpy_iterator())
        rows = sum(labels.shape[0] for _, labels in batches)
        processed = zoo.datasets.prepare("criteo", path, cache_dir=cache, verbose=False)
        loader = {}
        for calls in (1, None):  # one batch gathered at a time, against the pipeline's parallel map (AUTOTUNE)
            dataset, _ = make_dataset(processed, "train", batch_size=4096, num_parallel_calls=calls)
            for _ in dataset:  # the first pass warms the memory map and tf.data's autotuner
                pass
            start = time.perf_counter()
            for _ in range(3):
                for _ in dataset:
                    pass
            loader[calls] = 3 * rows / (time.perf_counter() - start)
        print(f"backend {keras.backend.backend()}, Criteo deres train split of {rows:,} rows, batch 4096; "
              f"loader alone: {loader[None]:,.0f} samples/s (parallel gathers), {loader[1]:,.0f} (one at a time), "
              f"{loader[None] / loader[1]:.2f}x; goal 1,000,000")
        print(f"{'model':8s} {'recipes.fit':>12s} {'from memory':>12s} {'ratio':>6s}")
        events = os.path.join(scratch, "events.csv")
        write_events(events, args.feeding // 4)
        spec = dict(EVENTS_SPEC, sequence_length=20)
        din_train, din_schema = load(spec, events, split="train", batch_size=1024, cache_dir=cache, verbose=False)
        cases = [("fm", {}, train, schema, 4096), ("dcnv2", {"num_cross_layers": 2, "mlp_units": (64, 32)}, train,
                                                   schema, 4096), ("din", {}, din_train, din_schema, 1024)]
        for name, options, train, schema, batch_size in cases:
            batches = list(train.as_numpy_iterator())
            rows = sum(labels.shape[0] for _, labels in batches)
            features = {k: np.concatenate([f[k] for f, _ in batches]) for k in batches[0][0]}
            labels = np.concatenate([y for _, y in batches])
            rates = []
            for feed in ("pipeline", "memory"):
                keras.utils.set_random_seed(0)
                model = zoo.get(name, schema=schema, **options)
                recipe = get_recipe("deres", epochs=2, early_stopping_patience=0, model_overrides={}, warmup_fraction=0,
                                    cosine=False)
                timer = EpochTimer()
                if feed == "pipeline":
                    fit(model, train, None, recipe=recipe, callbacks=[timer], verbose=0)
                else:
                    model.compile(optimizer="adam", loss="binary_crossentropy")
                    model.fit(features, labels, batch_size=batch_size, epochs=2, callbacks=[timer], verbose=0,
                              shuffle=True)
                rates.append(rows / timer.seconds[-1])
            print(f"{name:8s} {rates[0]:12,.0f} {rates[1]:12,.0f} {rates[0] / rates[1]:6.2f}")
        print("goal: recipes.fit within 10% of the same model fed from memory (ratio >= 0.9)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeding", type=int, metavar="ROWS",
                        help="instead: fm and dcnv2 through zoo.recipes.fit vs from memory on a generated Criteo file")
    parser.add_argument("--criteo-rows", type=int, nargs="+",
                        help="instead: build the Criteo deres cache of generated files of these sizes (e.g. 1000000 "
                             "4000000) against pyarrow's and polars' bare parse")
    parser.add_argument("--events-rows", type=int, nargs="+",
                        help="instead: build a generated event log's cache (histories from the log) of these sizes")
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if args.criteo_rows or args.events_rows:
        criteo_main(args, "criteo" if args.criteo_rows else "events")
        return
    if args.feeding:
        feeding(args)
        return
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
