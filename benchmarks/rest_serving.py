"""ReST serving (§2.4): encode once per request, decode N candidates, vs the full model per candidate.

    KERAS_BACKEND=jax python benchmarks/rest_serving.py               # L = 200, N = 16, 64, 256
    KERAS_BACKEND=jax python benchmarks/rest_serving.py --lengths 200 1000

For each (L, N): the full model scores N rows (the request's history repeated, one candidate each, so
T runs N times); encode-once runs `model.encoder()` on the one history and `model.decoder(N)` on the
N candidates. Both use the compiled predict functions (`predict_on_batch`), median of --repeats runs
after a warm-up. The goal of the issue: at least 0.8·N times faster at N = 64.

It also prints the analytic FLOPs of the decoder C per candidate, with PF-KV (K = V = H) and with
K/V projections of H recomputed per candidate, as a share of the encoder T's FLOPs per sequence
(the paper's Table 3: 6.7% -> 0.2% for its own, unpublished, configuration).
"""

import argparse
import time

import numpy as np

import zoo
zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
from zoo.datasets import BehaviourSimulator


def encoder_flops(length, d, depth, ffn_dim):
    """T per sequence (a multiply-add = 2 FLOPs): 6 d x d projections (Q, K, V, gv, go, O), the two
    L x L attention products, the SwiGLU FFN (3 d x f matrices)."""
    per_layer = 2 * 6 * length * d * d + 2 * 2 * length * length * d + 2 * 3 * length * d * ffn_dim
    return depth * per_layer


def decoder_flops(length, d, depth, ffn_dim, tokens, kv_projections):
    """C per candidate: each of the K query tokens has W_Q, W_go, W_o and its FFN, and attends to the
    L memory rows; with kv_projections the candidate also pays H W_K and H W_V (2 L d x d)."""
    per_layer = tokens * (2 * 3 * d * d + 2 * 3 * d * ffn_dim) + 2 * 2 * tokens * length * d
    if kv_projections:
        per_layer += 2 * 2 * length * d * d
    return depth * per_layer


def median_seconds(fn, repeats):
    fn()  # warm-up (compiles)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[200])
    parser.add_argument("--candidates", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--model-dim", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    d, ffn = args.model_dim, 2 * args.model_dim
    import keras

    print(f"backend {keras.backend.backend()}; d = {d}, heads = {args.heads}, encoder depth {args.depth}, "
          "decoder depth 1, FFN width 2d")
    for length in args.lengths:
        simulator = BehaviourSimulator(num_users=50, sequence_length=length, timeline_length=length + 20)
        features, _ = simulator.sample(1, seed=0)
        model = zoo.get("rest", schema=simulator.schema, model_dim=d, num_heads=args.heads,
                        encoder_depth=args.depth, ffn_dim=ffn, mlp_units=(64, 32))
        tokens = 4  # [CLS], context, user, candidate
        enc = encoder_flops(length, d, args.depth, ffn)
        pf = decoder_flops(length, d, 1, ffn, tokens, kv_projections=False)
        kv = decoder_flops(length, d, 1, ffn, tokens, kv_projections=True)
        print(f"L = {length}: decoder FLOPs per candidate / encoder FLOPs: PF-KV {pf / enc:.2%}, "
              f"with K/V projections {kv / enc:.2%}")
        encoder = model.encoder()
        history = {k: v for k, v in features.items() if k.startswith("hist")}
        for n in args.candidates:
            rng = np.random.default_rng(n)
            rows = {k: np.repeat(v, n, axis=0) for k, v in features.items()}
            rows["cand_item_id"] = rng.integers(1, simulator.num_items + 1, (n, 1)).astype("int32")
            rows["cand_category"] = simulator.item_category[rows["cand_item_id"]].astype("int32")
            request = {k: v for k, v in features.items() if not k.startswith(("hist", "cand"))}
            request.update({k: rows[k].reshape(1, n) for k in ("cand_item_id", "cand_category", "cand_time")})
            decoder = model.decoder(n)

            def full():
                return model.predict_on_batch(rows)

            def encode_decode():
                state = encoder.predict_on_batch(history)
                inputs = dict(request, memory=state["memory"], memory_valid=state["memory_valid"],
                              hist_time=history["hist_time"])
                return decoder.predict_on_batch(inputs)

            np.testing.assert_allclose(encode_decode().reshape(-1), full().reshape(-1), atol=1e-5)
            t_full = median_seconds(full, args.repeats)
            t_shared = median_seconds(encode_decode, args.repeats)
            print(f"L = {length:5d}  N = {n:4d}: full model per candidate {t_full * 1e3:8.1f} ms, "
                  f"encode once + decode N {t_shared * 1e3:7.1f} ms, speed-up {t_full / t_shared:6.1f}x "
                  f"({t_full / t_shared / n:.2f}·N)")


if __name__ == "__main__":
    main()
