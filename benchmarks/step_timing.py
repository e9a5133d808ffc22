"""Training-step timing shared by the benchmark scripts (standard library only at import)."""

import time


def train_step_seconds(model, features, labels, steps, warmup=1):
    """(seconds of the first `train_on_batch`: tracing/compilation included, [seconds of each of `steps`
    steps after `warmup` more untimed ones]) on one fixed batch."""
    started = time.perf_counter()
    model.train_on_batch(features, labels)
    first = time.perf_counter() - started
    for _ in range(warmup):
        model.train_on_batch(features, labels)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        model.train_on_batch(features, labels)
        times.append(time.perf_counter() - started)
    return first, times
