"""Building a Criteo-sized model under JAX: the zoo's embedding initializer (zoo.layers.EmbeddingUniform,
drawn on the host with NumPy) against Keras' RandomUniform (JAX's eager random op, compiled once per
table shape), each variant in a fresh process so neither reuses the other's compilations.

    python benchmarks/jax_build.py                       # fm, deepfm and deres_p, 1% of Criteo's tables
    python benchmarks/jax_build.py --models fm --scale 0.1

The schema is Criteo's (26 categorical fields with DLRM's published Kaggle cardinalities times --scale,
13 bucketed numerics, embedding 16, all cand_ features, as the `deres` protocol builds it). Printed per
model and variant: the seconds `zoo.get` takes, the compilations JAX logs while it runs (and those of
the random op alone), and the ratio of the two variants' build times.
"""

import argparse
import json
import os
import subprocess
import sys

CARDINALITIES = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
                 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)


def build(model_name, scale, variant):
    """Runs in the child process: builds the model, returns its measurements."""
    os.environ["KERAS_BACKEND"] = "jax"
    import logging
    import time

    import jax
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    import zoo.layers.feature_embedding as feature_embedding
    from zoo.feature import Feature
    from zoo.schema import Schema

    if variant == "keras":  # the initializer the zoo used before: Keras' own RandomUniform(-0.05, 0.05)
        feature_embedding.EmbeddingUniform = keras.initializers.RandomUniform
    features = [Feature(f"c{i}", "cand", max(4, int(size * scale)) + 2, 16) for i, size in enumerate(CARDINALITIES)]
    features += [Feature(f"i{i}", "cand", 12, 16) for i in range(1, 14)]
    schema = Schema(features)
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logging.getLogger("jax").addHandler(handler)
    keras.utils.set_random_seed(0)
    with jax.log_compiles(True):
        start = time.perf_counter()
        model = zoo.get(model_name, schema=schema)
        seconds = time.perf_counter() - start
    compiles = [m for m in messages if m.startswith("Compiling")]
    return {"seconds": seconds, "compiles": len(compiles), "random_compiles": sum("_uniform" in m for m in compiles),
            "parameters": int(model.count_params())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["fm", "deepfm", "deres_p"])
    parser.add_argument("--scale", type=float, default=0.01, help="fraction of Criteo's cardinalities (default 0.01)")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(build(args.child[0], args.scale, args.child[1])))
        return
    print(f"{'model':10} {'parameters':>12} {'variant':>7} {'build s':>8} {'compiles':>9} {'random op':>9}")
    for model in args.models:
        seconds = {}
        for variant in ("keras", "zoo"):
            run = subprocess.run([sys.executable, __file__, "--scale", str(args.scale), "--child", model, variant],
                                 capture_output=True, text=True, check=True)
            result = json.loads(run.stdout.strip().splitlines()[-1])
            seconds[variant] = result["seconds"]
            print(f"{model:10} {result['parameters']:>12,} {variant:>7} {result['seconds']:>8.2f} "
                  f"{result['compiles']:>9} {result['random_compiles']:>9}")
        print(f"{model:10} keras / zoo build time: {seconds['keras'] / seconds['zoo']:.1f}x")


if __name__ == "__main__":
    main()
