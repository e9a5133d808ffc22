"""A training step's time and memory against an embedding table's size, dense Adam against the zoo's
row-wise sparse updates (zoo.recipes.SparseTableAdam), per backend (issue #39).

    python benchmarks/vocab_scaling.py
    python benchmarks/vocab_scaling.py --backends tensorflow torch --rows 10000 1000000 --steps 10

The model is issue #39's: DeepFM with 8 candidate fields of 16 dimensions, MLP (200, 80), batch 1024,
compiled by zoo.recipes.compile_for with the "suan" recipe (Adam 1e-3), `table_update` None (dense: Adam
reads and writes every row of every table each step) or "lazy_adam" (sparse). Field c0's table has
--rows rows, the other seven 10,000; every batch's ids are drawn from the first 10,000 rows of each table,
so only c0's size changes between runs. Each cell (backend, rows, variant) runs in its own process: the
first step (tracing/compilation) is not timed, then --warmup untimed and --steps timed `train_on_batch`
steps on one fixed batch (median reported). peak MB is the process' peak resident memory (the imports of
every backend included); state B/row is c0's tables (its [V, 16] embedding and FM's [V, 1] first-order
weights) and their optimizer state in bytes per row (dense and lazy Adam: 3 x 17 floats, 204 bytes;
row-wise Adagrad would keep 17 + 2). The ratio column is each variant's step at that
size over its step at the smallest size (goal: sparse <= 1.5x at 10M rows). Results go to
OUT/cells.jsonl (a rerun skips the cells already there) and OUT/table.md.
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cell_log import CellLog, answer, run_cell  # noqa: E402  (benchmarks/)

FIELDS, DIM, SMALL_ROWS = 8, 16, 10_000


def cell(spec):
    """Runs in the child (KERAS_BACKEND set): {"step_ms": [...], "first_s", "peak_mb", "state_bytes_per_row"}."""
    import resource
    import time

    import keras
    import numpy as np

    import step_timing
    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.feature import Feature
    from zoo.schema import Schema

    rows = spec["rows"]
    features = [Feature(f"c{i}", "cand", rows if i == 0 else SMALL_ROWS, DIM) for i in range(FIELDS)]
    schema = Schema(features)
    keras.utils.set_random_seed(0)
    model = zoo.get("deepfm", schema=schema)
    zoo.recipes.compile_for(model, "suan", table_update=None if spec["variant"] == "dense" else "lazy_adam")
    rng = np.random.default_rng(0)
    batch = spec["batch_size"]
    features = {f.key: rng.integers(1, min(f.vocabulary_size, SMALL_ROWS) - 1, size=(batch, 1)).astype("int32")
                for f in features}
    labels = rng.integers(0, 2, size=(batch, 1)).astype("float32")
    started = time.perf_counter()
    first, times = step_timing.train_step_seconds(model, features, labels, spec["steps"], warmup=spec["warmup"])
    tables = [w for w in model.weights if "/embedding_c0/" in w.path]  # c0's [V, 16] table and FM's [V, 1] one
    state = [v for v in model.optimizer.variables if "embedding_c0_" in v.path]
    assert len(tables) == 2 and len(state) == 4, ([w.path for w in tables], [v.path for v in state])
    state_bytes = sum(int(np.prod(v.shape)) * 4 for v in tables + state)
    return {"step_ms": [t * 1000 for t in times], "first_s": first, "wall_s": time.perf_counter() - started,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "state_bytes_per_row": state_bytes / rows}


def table(cells, backends, sizes):
    least = f"{sizes[0]:,}"
    lines = [f"| backend | table rows | dense step ms | sparse step ms | dense / sparse | dense x {least} | sparse x {least} "
             "| dense peak MB | sparse peak MB | state B/row |", "|---" * 10 + "|"]
    found = {(c["backend"], c["rows"], c["variant"]): c for c in cells if "error" not in c}
    for backend in backends:
        for rows in sizes:
            d, s = found.get((backend, rows, "dense")), found.get((backend, rows, "sparse"))
            if not d and not s:
                continue

            def ms(c):
                return statistics.median(c["step_ms"]) if c else float("nan")

            def scale(variant):
                base, here = found.get((backend, sizes[0], variant)), found.get((backend, rows, variant))
                return ms(here) / ms(base) if base and here else float("nan")

            state = (s or d)["state_bytes_per_row"]
            lines.append(f"| {backend} | {rows:,} | {ms(d):.1f} | {ms(s):.1f} | {ms(d) / ms(s):.2f}x | "
                         f"{scale('dense'):.2f}x | {scale('sparse'):.2f}x | {d['peak_mb'] if d else float('nan'):,.0f} | "
                         f"{s['peak_mb'] if s else float('nan'):,.0f} | {state:.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 1_000_000, 10_000_000])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--out", default="runs/vocab_scaling", help="cells.jsonl and table.md (resumable)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        return answer(cell, args.cell)
    log = CellLog(args.out)
    done = log.done("backend", "rows", "variant", "batch_size")
    for backend in args.backends:
        for rows in args.rows:
            for variant in ("dense", "sparse"):
                if (backend, rows, variant, args.batch_size) in done:
                    continue
                spec = {"rows": rows, "variant": variant, "steps": args.steps, "warmup": args.warmup,
                        "batch_size": args.batch_size}
                env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
                result = run_cell([sys.executable, __file__, "--cell", json.dumps(spec)], env)
                result = {"backend": backend, "rows": rows, "variant": variant, "batch_size": args.batch_size,
                          **result}
                log.add(result, shown=set(result) - {"step_ms"})
    text = table([c for c in log.cells if c["batch_size"] == args.batch_size], args.backends, sorted(set(args.rows)))
    (log.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
