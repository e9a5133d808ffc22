"""ReST user-level shared-prefix training, ULT (§2.4): training samples per second with S samples per user
sharing one encoder pass vs one encoder pass per sample.

    KERAS_BACKEND=jax python benchmarks/rest_ult.py --length 200 --users 16 --samples 8

Shared: a batch of U rows, one per user, holding the union of the user's behaviours (L) and its S
samples as M = S candidates, each with its own time (the prefix-valid mask keeps each sample to the
behaviours before it). Per sample: U·S rows with M = 1, each with the sample's own history. Both
train the same model (same weights, same loss) with `train_on_batch`; median step time after warm-up.
The goal of the issue: at least 4x the samples per second.
"""

import argparse
import time

import keras
import numpy as np

import zoo
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
from zoo.datasets import BehaviourSimulator


def batches(simulator, users, samples, length, seed=0):
    """The same U·S samples laid out both ways: (shared rows, labels [U, S]), (per-sample rows, [U·S, 1])."""
    rng = np.random.default_rng(seed)
    who = rng.choice(simulator.num_users, users, replace=False)
    # the user's first L behaviours; sample s sits at step L - S + 1 + s and sees the behaviours before it
    steps = np.arange(length - samples + 1, length + 1)
    shared, single = [], []
    pad = lambda x, n: np.concatenate([np.zeros(length - n, x.dtype), x[:n]])  # noqa: E731  left padding
    for u in who:
        items, cats = simulator.items[u], simulator.categories[u]
        behaviors, times = simulator.behaviors[u], simulator.times[u]
        base = {
            "user_user_id": [u + 1], "user_age": [simulator.user_age[u]], "user_gender": [simulator.user_gender[u]],
            "user_city": [simulator.user_city[u]], "ctx_hour": [1], "num_price": [0.0],
        }
        cand_items = rng.integers(1, simulator.num_items + 1, samples)
        shared.append(dict(
            base, hist_item_id=[items[:length]], hist_category=[cats[:length]],
            hist_behavior=[behaviors[:length]], hist_time=[times[:length]], cand_item_id=[cand_items],
            cand_category=[simulator.item_category[cand_items]], cand_time=[times[steps]],
        ))
        for s, step in enumerate(steps):  # the sample alone: its own history, left-padded to L
            single.append(dict(
                base, hist_item_id=[pad(items, step)], hist_category=[pad(cats, step)],
                hist_behavior=[pad(behaviors, step)], hist_time=[pad(times, step)], cand_item_id=[[cand_items[s]]],
                cand_category=[[simulator.item_category[cand_items[s]]]], cand_time=[[times[step]]],
            ))
    spec = simulator.schema.input_spec(num_candidates=-1)
    stack = lambda rows: {k: np.asarray([r[k][0] for r in rows], dtype=spec[k][1]) for k in spec}  # noqa: E731
    labels = rng.integers(0, 2, (users, samples)).astype("float32")
    return (stack(shared), labels), (stack(single), labels.reshape(-1, 1))


def median_seconds(fn, repeats):
    fn()
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--model-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    length, samples = args.length, args.samples
    simulator = BehaviourSimulator(num_users=max(50, args.users), sequence_length=length,
                                   timeline_length=length + 1)
    (shared_x, shared_y), (single_x, single_y) = batches(simulator, args.users, samples, length)
    hyper = dict(model_dim=args.model_dim, num_heads=4, encoder_depth=2, ffn_dim=2 * args.model_dim)
    keras.utils.set_random_seed(0)
    per_sample = zoo.get("rest", schema=simulator.schema, **hyper)
    shared = zoo.get("rest", schema=simulator.schema.with_candidates(samples), **hyper)
    shared.set_weights(per_sample.get_weights())
    # the two layouts compute the same scores (the prefix-valid mask at work)
    np.testing.assert_allclose(
        shared.predict_on_batch(shared_x).reshape(-1), per_sample.predict_on_batch(single_x).reshape(-1), atol=1e-5
    )
    for model in (shared, per_sample):
        model.compile(optimizer="adam", loss="binary_crossentropy", jit_compile=keras.backend.backend() == "jax")
    n = args.users * samples
    t_shared = median_seconds(lambda: shared.train_on_batch(shared_x, shared_y), args.repeats)
    t_single = median_seconds(lambda: per_sample.train_on_batch(single_x, single_y), args.repeats)
    print(f"backend {keras.backend.backend()}; L = {length}, {args.users} users x {samples} samples, d = {args.model_dim}")
    print(f"one encoder pass per sample: {n / t_single:8.1f} samples/s ({t_single * 1e3:.0f} ms/step)")
    print(f"shared prefix (ULT):         {n / t_shared:8.1f} samples/s ({t_shared * 1e3:.0f} ms/step)")
    print(f"ULT speed-up: {t_single / t_shared:.1f}x")


if __name__ == "__main__":
    main()
