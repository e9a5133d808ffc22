"""Training step time of SUAN (full attention) vs LightSUAN (sparse attention) at L = 200 and 1000.

    KERAS_BACKEND=torch python benchmarks/suan_training_step.py --lengths 200 1000 --batch 32
"""

import argparse
import time

import keras

from zoo.datasets import BehaviourSimulator
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN


def step_time(model, features, labels, steps):
    model.compile(optimizer="adam", loss="binary_crossentropy")
    model.train_on_batch(features, labels)  # warm-up: traces/compiles the step
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(features, labels)
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    common = {"num_layers": 2, "num_heads": 2, "mlp_units": (256, 128)}
    print(f"backend {keras.backend.backend()}, batch {args.batch}, d = 24, l = 2, h = 2")
    for length in args.lengths:
        keras.utils.set_random_seed(0)
        simulator = BehaviourSimulator(num_users=50, num_items=500, num_categories=20, sequence_length=length,
                                       timeline_length=length + 20)
        features, labels = simulator.sample(args.batch, seed=1)
        full = step_time(SUAN(simulator.schema, **common), features, labels, args.steps)
        print(f"L = {length}: SUAN full attention {full * 1000:8.1f} ms/step")
        for r in (2, 4):
            sparse = step_time(LightSUAN(simulator.schema, window_size=8, dilation=r, **common), features, labels, args.steps)
            print(f"L = {length}: LightSUAN k = 8, r = {r}   {sparse * 1000:8.1f} ms/step   {full / sparse:5.2f}x faster")


if __name__ == "__main__":
    main()
