"""DeRes-P vs the residual-only Transformer: parameters, FLOPs and training step time, as ratios.

    python benchmarks/deres_cost.py                      # L=8, d=128, B=8, then the L sweep (B = L)
    KERAS_BACKEND=jax python benchmarks/deres_cost.py --layers --rounds 5 --steps 3   # L = 8 only

Both variants are the connector alone (layers/deres.py with paths="dual", weighting="silu" vs
paths="residual-only") over n random tokens of width d, under a mean-pool + Dense(1) head, trained
with binary cross-entropy by `train_on_batch` (same backend, same process). A third variant, the
two budget-matched half-width paths with a plain residual each and no connector, splits DeRes'
step time into the cost of the path split (2 paths / res) and the connector's own (DeRes / 2 paths).
A last line times the FFN sublayers alone, full width vs the two paths, with GELU and with no
activation, to show where the split's cost comes from on the machine at hand.

Step times are the fastest of `--rounds` interleaved rounds of `--steps` steps each, so that other
load on the machine hits every variant alike. FLOPs are an analytic count of the multiply-adds each
variant's code performs per row (x2): the matrix products and DeRes' block weighting, gate and
fusion, the terms of the paper's O(L(n^2 d + Bd + d^2)) analysis. Elementwise functions are left
out. LayerNorm and softmax cost both variants about the same, GELU does not: the paths evaluate 10d
GELUs per token and layer against the full-width layer's 4d, so the last line prints that count's
ratio too, and what the FLOPs ratio becomes if a GELU is counted as 10 FLOPs. The paper's
goal: at most +5% FLOPs, +7% parameters, +10% step time (it reports +4.4%, +6.5%, +9.9%, measured
on 8 A100s in BF16).
"""

import argparse
import time

import keras
import numpy as np
from keras import ops

from zoo.layers.deres import DeRes, path_sublayer
from zoo.layers.deres_transformer_layer import DeResTransformerLayer


def layer_macs(n, w, heads, key_dim, ffn_units):
    """One Pre-Norm layer's matrix products on n tokens of width w (attention width heads * key_dim)."""
    a = heads * key_dim
    return 3 * n * w * a + 2 * n * n * a + n * a * w + 2 * n * w * ffn_units


def gelus(n, d, L, heads, dual):
    """GELU evaluations per row: the FFN hidden units, 4d per token-layer, or 2 x 5d over the paths."""
    return L * n * path_sublayer(d, heads, dual)[1]["ffn_units"] * (2 if dual else 1)


def residual_only_macs(n, d, L, heads):
    return L * layer_macs(n, d, heads, d // heads, 4 * d)


def deres_macs(n, d, L, B, heads):
    """Two half-width paths (heads / 2 heads of d / heads channels each, FFN 5d) + per layer: the
    logits and the weighted sum over the S_l sources (eq 4-5, two n*w*S_l products), each block's
    RMS once when it is written or the partial block's when there is one (n*w per layer), the
    gate W_g [r; d] (n * d * d/2) and the fusion (3 n d/2); then the d/2 -> d output projection."""
    w = d // 2
    per_block = L // B
    total = n * w  # RMS of B_0 = d_0
    for l in range(1, L + 1):
        partial = 1 if l % per_block else 0
        sources = 1 + l // per_block + partial
        total += 2 * layer_macs(n, w, heads // 2, d // heads, 5 * d)
        total += 2 * n * w * sources + n * w + n * d * w + 3 * n * w  # one RMS: the new block's or the partial's
    return total + n * w * d


class TwoPathsNoConnector(keras.layers.Layer):
    """DeRes' two half-width paths (the same sublayers) with a plain residual on each and
    no block attention, gate or projection: separates the cost of splitting the layer into two
    budget-matched paths from the cost of the connector itself."""

    def __init__(self, num_layers, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.num_layers, self.num_heads = num_layers, num_heads

    def build(self, x_shape):
        width, sublayer = path_sublayer(x_shape[-1], self.num_heads, dual=True)
        self.path_layers = [[DeResTransformerLayer(**sublayer) for _ in range(2)] for _ in range(self.num_layers)]
        for pair in self.path_layers:
            for layer in pair:
                layer.build(tuple(x_shape[:-1]) + (width,))

    def call(self, x):
        w = ops.shape(x)[-1] // 2
        r, d = x[..., :w], x[..., w:]
        for residual, attnres in self.path_layers:
            r, d = r + residual(r), d + attnres(d)
        return ops.concatenate([r, d], axis=-1)


def connector_model(d, n, jit_compile, **deres):
    tokens = keras.Input((n, d))
    if deres.pop("connector", True):
        encoded = DeRes(**deres, name="connector")(tokens)
    else:
        encoded = TwoPathsNoConnector(deres["num_layers"], deres["num_heads"], name="connector")(tokens)
    logit = keras.layers.Dense(1)(keras.ops.mean(encoded, axis=1))
    model = keras.Model(tokens, keras.layers.Activation("sigmoid")(logit))
    model.compile(optimizer="adam", loss="binary_crossentropy", jit_compile=jit_compile)
    return model


def ffn_model(d, n, L, heads, dual, activation, jit_compile):
    """Only the FFN sublayers of L layers, with residuals: x + act(x W_1 + c_1) W_2 + c_2 on the
    full-width stream (d -> 4d -> d) or on each of the two half-width paths (d/2 -> 5d -> d/2),
    sized by the same `path_sublayer` as the connector. Equal multiply-adds up to the attention's
    share; with activation=None it times the matrix products' shapes alone."""
    tokens = keras.Input((n, d))
    width, sublayer = path_sublayer(d, heads, dual=dual)
    streams = [tokens[..., :width], tokens[..., width:]] if dual else [tokens]
    for _ in range(L):
        streams = [
            s + keras.layers.Dense(width)(keras.layers.Dense(sublayer["ffn_units"], activation=activation)(s))
            for s in streams
        ]
    encoded = keras.layers.Concatenate()(streams) if dual else streams[0]
    logit = keras.layers.Dense(1)(keras.ops.mean(encoded, axis=1))
    model = keras.Model(tokens, keras.layers.Activation("sigmoid")(logit))
    model.compile(optimizer="adam", loss="binary_crossentropy", jit_compile=jit_compile)
    return model


def ffn_split_cost(L, d, heads, n, batch, steps, rounds, rng, jit_compile):
    """(two-path / full-width step time of the FFN sublayers alone) with GELU and without an activation."""
    x = rng.normal(size=(batch, n, d)).astype("float32")
    y = (rng.random((batch, 1)) < 0.5).astype("float32")
    ratios = []
    for activation in ("gelu", None):
        full, paths = (ffn_model(d, n, L, heads, dual, activation, jit_compile) for dual in (False, True))
        times = step_times((full, paths), x, y, steps, rounds)
        ratios.append(times[1] / times[0])
    return ratios


def step_times(models, x, y, steps, rounds):
    """Seconds per train step of each model: the fastest of `rounds` interleaved rounds of `steps`
    steps, so that load from elsewhere on the machine hits every variant alike and a slow round
    (a preemption, a page fault) is dropped rather than averaged in."""
    for model in models:
        model.train_on_batch(x, y)  # compile
        model.train_on_batch(x, y)
    best = [float("inf")] * len(models)
    for _ in range(rounds):
        for i, model in enumerate(models):
            start = time.perf_counter()
            for _ in range(steps):
                model.train_on_batch(x, y)
            best[i] = min(best[i], (time.perf_counter() - start) / steps)
    return best


def compare(L, d, B, heads, n, batch, steps, rounds, rng, jit_compile):
    x = rng.normal(size=(batch, n, d)).astype("float32")
    y = (rng.random((batch, 1)) < 0.5).astype("float32")
    res = connector_model(d, n, jit_compile, num_layers=L, num_heads=heads, num_blocks=1, paths="residual-only")
    dual = connector_model(d, n, jit_compile, num_layers=L, num_heads=heads, num_blocks=B, weighting="silu")
    split = connector_model(d, n, jit_compile, num_layers=L, num_heads=heads, connector=False)
    params = [m.get_layer("connector").count_params() for m in (res, dual)]
    flops = [2 * residual_only_macs(n, d, L, heads), 2 * deres_macs(n, d, L, B, heads)]
    times = step_times((res, dual, split), x, y, steps, rounds)
    return params, flops, times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=128, help="d")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=8, help="B at L = 8 (the sweep uses B = L)")
    parser.add_argument("--tokens", type=int, default=40, help="n, tokens per row")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the fastest counts")
    parser.add_argument("--layers", type=int, nargs="*", default=[4, 8, 12, 16], help="the L sweep")
    parser.add_argument("--jit", choices=["auto", "on", "off"], default="auto",
                        help="the train step's jit_compile (auto: Keras' default, XLA for JAX, none on a TF CPU)")
    args = parser.parse_args(argv)
    jit_compile = {"auto": "auto", "on": True, "off": False}[args.jit]
    rng = np.random.default_rng(0)
    print(
        f"backend {keras.backend.backend()}, d = {args.width}, heads = {args.heads}, n = {args.tokens} tokens, "
        f"batch {args.batch}, fastest of {args.rounds} rounds of {args.steps} steps, jit_compile {args.jit}"
    )
    print(f"{'L':>3} {'B':>3} | {'params res':>11} {'DeRes-P':>11} {'ratio':>7} | {'GFLOPs/row res':>14} "
          f"{'DeRes-P':>8} {'ratio':>7} | {'step ms res':>11} {'DeRes-P':>8} {'ratio':>7} | "
          f"{'2 paths':>8} {'/res':>6} {'DeRes/2 paths':>13}")
    runs = [(8, args.blocks)] + [(L, L) for L in args.layers if (L, L) != (8, args.blocks)]
    flops_at_8 = None
    for L, B in runs:
        params, flops, times = compare(L, args.width, B, args.heads, args.tokens, args.batch, args.steps, args.rounds, rng, jit_compile)
        print(
            f"{L:>3} {B:>3} | {params[0]:>11,} {params[1]:>11,} {params[1] / params[0]:>7.3f} | "
            f"{flops[0] / 1e9:>14.4f} {flops[1] / 1e9:>8.4f} {flops[1] / flops[0]:>7.3f} | "
            f"{1e3 * times[0]:>11.1f} {1e3 * times[1]:>8.1f} {times[1] / times[0]:>7.3f} | "
            f"{1e3 * times[2]:>8.1f} {times[2] / times[0]:>6.3f} {times[1] / times[2]:>13.3f}",
            flush=True,
        )
        flops_at_8 = flops_at_8 or flops  # the first run is L = 8
    counts = [gelus(args.tokens, args.width, 8, args.heads, dual) for dual in (False, True)]
    flops = flops_at_8
    print(
        f"GELUs/row at L = 8: {counts[0]:,} res, {counts[1]:,} DeRes-P ({counts[1] / counts[0]:.2f}x); FLOPs ratio "
        f"with a GELU counted as 10 FLOPs: {(flops[1] + 10 * counts[1]) / (flops[0] + 10 * counts[0]):.3f}"
    )
    gelu, linear = ffn_split_cost(8, args.width, args.heads, args.tokens, args.batch, args.steps, args.rounds, rng, jit_compile)
    print(
        f"The split's cost, FFN sublayers alone at L = 8 (two paths d/2 -> 5d -> d/2 / one d -> 4d -> d, "
        f"{5 / 4:.2f}x the FFN multiply-adds, 2.5x the hidden units): {gelu:.3f} with GELU, {linear:.3f} "
        f"with no activation (the matrix products' shapes alone)"
    )


if __name__ == "__main__":
    main()
