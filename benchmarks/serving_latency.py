"""Per-request latency of the exported SavedModels (a TF-only process) against the Keras path, p50 / p99.

    python benchmarks/serving_latency.py                      # shipped presets din, lightsuan, rest on CPU
    python benchmarks/serving_latency.py --requests 500 --rounds 3 --concurrency 1 4
    python benchmarks/serving_latency.py --raw                # lightsuan raw vs id signature, m1 = 512, L = 200

Three requests, each on its shipped preset (trained weights, the simulator's schema, L = 30):
- din `serving_default`: one request = `--rows` rows (a user's candidates, M = 1 each);
- lightsuan `score_all`: one row with `--m1` candidates, scored in ceil(m1 / m2) parallel passes with
  the history cache (m2 = the preset's 16);
- rest `encode` then `decode`: one history encoded once, `--candidates` candidates decoded against it.

The SavedModel side runs in a process that imports TensorFlow only (no zoo, no Keras backend; TF's
loader may import its own Keras module), as TF Serving would: `tf.saved_model.load(...).signatures[...]`
called with tf.constant inputs. The Keras side runs the zoo's own serving calls under the TensorFlow
backend (`--keras-backend` picks another): DIN's `predict_on_batch`, LightSUAN's `score_candidates`,
ReST's `encode` + `decode` (NumPy in, NumPy out, as a Python server calls them). Each side is warmed
up, then timed over `--requests` requests, issued by `--concurrency` threads at once (each thread
waits for its answer before sending the next); the latency of a request is its own call's wall time.
The sides alternate over `--rounds` processes each; the fastest round's p50 (and that round's p99)
counts, so load from elsewhere on the machine hits both alike. The SavedModel's outputs are checked
against the Keras outputs (1e-5). Goal: the SavedModel no slower than Keras (ratio SavedModel / Keras
p50 <= 1).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("din", "lightsuan", "rest")


def latencies(call, requests, concurrency):
    """Seconds of each of `requests` calls of `call()`, issued by `concurrency` threads (a closed loop)."""
    times, lock = [], threading.Lock()
    share = [requests // concurrency + (i < requests % concurrency) for i in range(concurrency)]

    def client(n):
        mine = []
        for _ in range(n):
            start = time.perf_counter()
            call()
            mine.append(time.perf_counter() - start)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in share]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times, time.perf_counter() - started


def percentiles(times, wall):
    import numpy as np

    return {"p50_ms": 1e3 * float(np.percentile(times, 50)), "p99_ms": 1e3 * float(np.percentile(times, 99)),
            "requests_per_second": len(times) / wall}


# ----------------------------------------------------------------- the Keras side (also writes the exports)


def requests_for(args):
    """{case: inputs} as NumPy, from the default simulator (the presets' own)."""
    import numpy as np

    from zoo.datasets import BehaviourSimulator

    simulator = BehaviourSimulator()
    rows, _ = simulator.sample(args["rows"], seed=11)
    one, _ = simulator.sample(1, seed=12)
    many, _ = simulator.sample(max(args["m1"], args["candidates"]), seed=13)

    def one_row_with(n):
        request = {k: v for k, v in one.items() if not k.startswith("cand_")}
        for key in ("cand_item_id", "cand_category"):
            request[key] = many[key][:n].reshape(1, n)
        request["cand_time"] = np.repeat(one["cand_time"], n, axis=1)
        return request

    return {"din": rows, "lightsuan": one_row_with(args["m1"]), "rest": one_row_with(args["candidates"])}


def keras_side(args):
    import keras
    import numpy as np

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

    inputs = requests_for(args)
    export_dir = Path(args["export_dir"])
    results, outputs = {}, {}
    for case in args["cases"]:
        model = zoo.get(case)  # the shipped preset, trained weights
        request = inputs[case]
        if case == "din":
            def call():
                return model.predict_on_batch(request)
            signature = "serving_default"
        elif case == "lightsuan":
            def call():
                return model.score_candidates(request)
            signature = "parallel_candidates"
        else:
            history = {k: v for k, v in request.items() if k.startswith("hist")}
            candidates = {k: v for k, v in request.items() if not k.startswith("hist")}

            def call():
                return model.decode(model.encode(history), candidates)
            signature = "encode_decode"
        if args["export"] and not (export_dir / case / "1").exists():
            zoo.export(model, export_dir / case / "1", signature=signature)
        outputs[case] = np.asarray(call()).reshape(-1)
        for _ in range(args["warmup"]):
            call()
        results[case] = {c: percentiles(*latencies(call, args["requests"], c)) for c in args["concurrency"]}
    np.savez(export_dir / f"keras_outputs_{keras.backend.backend()}.npz", **outputs)
    np.savez(export_dir / "requests.npz", **{f"{case}/{k}": v for case, r in inputs.items() for k, v in r.items()})
    return results


# ------------------------------------------------------------------------ the SavedModel side (TF only)


def saved_model_calls(export_dir, cases, device=None):
    """{case: a no-argument function calling its SavedModel on the saved request}; TensorFlow only."""
    import numpy as np
    import tensorflow as tf

    saved = np.load(Path(export_dir) / "requests.npz")
    calls = {}
    for case in cases:
        request = {k.split("/", 1)[1]: tf.constant(saved[k]) for k in saved.files if k.startswith(case + "/")}
        loaded = tf.saved_model.load(str(Path(export_dir) / case / "1"))
        signatures = loaded.signatures
        if case == "din":
            serve = signatures["serving_default"]

            def call(serve=serve, request=request):
                return serve(**request)["pctr"]
        elif case == "lightsuan":
            serve = signatures["score_all"]

            def call(serve=serve, request=request):
                return serve(**request)["pctr"]
        else:
            encode, decode = signatures["encode"], signatures["decode"]
            history = {k: v for k, v in request.items() if k.startswith("hist")}
            rest = {k: v for k, v in request.items() if not k.startswith("hist") or k == "hist_time"}

            def call(encode=encode, decode=decode, history=history, rest=rest):
                state = encode(**history)
                return decode(memory=state["memory"], memory_valid=state["memory_valid"], **rest)["pctr"]
        calls[case] = (loaded, call)  # keep `loaded` alive with its functions
    return calls


def saved_model_side(args):
    import numpy as np

    assert "zoo" not in sys.modules, "the SavedModel side must not import the zoo"
    reference = np.load(Path(args["export_dir"]) / f"keras_outputs_{args['keras_backend']}.npz")
    results = {}
    for case, (_, call) in saved_model_calls(args["export_dir"], args["cases"]).items():
        difference = float(np.max(np.abs(np.asarray(call()).reshape(-1) - reference[case])))
        for _ in range(args["warmup"]):
            call()
        results[case] = {c: percentiles(*latencies(call, args["requests"], c)) for c in args["concurrency"]}
        results[case]["max_abs_difference"] = difference
    assert "zoo" not in sys.modules
    return results


# ------------------------------------------------------------------------------------------------ parent


def run_side(side, args, backend):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT), KERAS_BACKEND=backend)
    command = [sys.executable, __file__, f"--{side}-worker", json.dumps(args)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"the {side} side failed:\n{done.stderr[-3000:]}")


def best(rounds, case, concurrency):
    """The round with the lowest p50 for (case, concurrency)."""
    return min((r[case][str(concurrency)] for r in rounds), key=lambda m: m["p50_ms"])


def describe(args):
    return {"din": f"din serving_default, {args.rows} rows x 1 candidate",
            "lightsuan": f"lightsuan score_all, 1 row x m1 = {args.m1} (m2 = 16)",
            "rest": f"rest encode + decode, 1 history, N = {args.candidates}"}


def raw_vs_id(args):
    """`--raw`: LightSUAN's raw signature (the preset's preprocessing in the graph: lookups, ISO times, the
    history's ordering and cut) against its id signature `score_all` on the same request: one row,
    m1 = --m1 candidates, a history of L = --length behaviours, in one TensorFlow-only process; p50 / p99."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from tests.impression_logs import impression_spec, write_impression_log
    from zoo.datasets import prepare
    from zoo.serving.request import build_request

    with tempfile.TemporaryDirectory(prefix="zoo-raw-") as scratch:
        log = write_impression_log(os.path.join(scratch, "log.csv"), rows=4 * args.length, users=2,
                                   items=args.m1 + 20)
        processed = prepare(impression_spec(sequence_length=args.length), log, cache_dir=scratch, verbose=False)
        model = zoo.get("lightsuan", schema=processed.schema, num_layers=1, mlp_units=(64,))
        state = processed.preprocessing()
        model.save_to_preset(os.path.join(scratch, "preset"), preprocessing=state)
        zoo.export(os.path.join(scratch, "preset"), os.path.join(scratch, "export", "1"), signature="raw")
        body, lines = build_request(state, log, 4 * args.length)
        row = int(np.argmax([sum(v != "" for v in h) for h in body["inputs"]["history_item_id"]]))
        raw = {k: np.asarray(v)[row:row + 1] for k, v in body["inputs"].items()}
        tokens = state["fitted"]["item_id"]["tokens"][:args.m1]
        raw["item_id"] = np.asarray([tokens + tokens[: args.m1 - len(tokens)]])
        for key in ("category", "title"):
            raw[key] = np.repeat(raw[key][:, :1], args.m1, axis=1)
        graph = zoo.serving.raw.RawPreprocessing(state, processed.schema)
        import tensorflow as tf

        features, _, _ = graph({k: tf.constant(v) for k, v in raw.items()})
        ids = {k: v.numpy() for k, v in features.items()}
        history = int((ids["hist_item_id"] > 0).sum())
        code = f"""
import json, sys, time
sys.modules["keras"] = None; sys.modules["zoo"] = None
import numpy as np, tensorflow as tf
loaded = tf.saved_model.load({os.path.join(scratch, "export", "1")!r})
cases = np.load({os.path.join(scratch, "cases.npz")!r})
out = {{}}
for name in ("raw", "score_all"):
    f = loaded.signatures[name]
    specs = f.structured_input_signature[1]
    inputs = {{k.split("/", 1)[1]: tf.constant(cases[k], dtype=specs[k.split("/", 1)[1]].dtype)
              for k in cases.files if k.startswith(name + "/")}}
    for _ in range({args.warmup}):
        f(**inputs)
    times = []
    for _ in range({args.requests}):
        start = time.perf_counter(); result = f(**inputs); times.append(time.perf_counter() - start)
    out[name] = {{"p50_ms": 1000 * float(np.percentile(times, 50)), "p99_ms": 1000 * float(np.percentile(times, 99)),
                 "pctr": result["pctr"].numpy().tolist()}}
print("RESULT " + json.dumps(out))
"""
        np.savez(os.path.join(scratch, "cases.npz"), **{f"raw/{k}": v for k, v in raw.items()},
                 **{f"score_all/{k}": v for k, v in ids.items()})
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        result = next((json.loads(x[7:]) for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if result is None:
            raise SystemExit(f"the SavedModel side failed:\n{done.stderr[-3000:]}")
    raw_ms, id_ms = result["raw"], result["score_all"]
    diff = float(np.max(np.abs(np.asarray(raw_ms["pctr"]) - np.asarray(id_ms["pctr"]))))
    print(f"CPU ({os.cpu_count()} cores), lightsuan (1 UAB, L = {args.length}), one row x m1 = {args.m1} candidates, "
          f"history of {history} behaviours; {args.requests} requests, TensorFlow-only process")
    print(f"{'signature':<12}{'p50 ms':>9}{'p99 ms':>9}")
    for name, r in (("score_all", id_ms), ("raw", raw_ms)):
        print(f"{name:<12}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
    print(f"raw / id p50 = {raw_ms['p50_ms'] / id_ms['p50_ms']:.2f} (goal <= 1.5); max |raw - id| = {diff:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--rows", type=int, default=64, help="DIN rows per request")
    parser.add_argument("--m1", type=int, default=512, help="LightSUAN candidates per request")
    parser.add_argument("--candidates", type=int, default=64, help="ReST candidates decoded per request")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per case and concurrency")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1])
    parser.add_argument("--rounds", type=int, default=2, help="alternating processes per side; the fastest counts")
    parser.add_argument("--keras-backend", default="tensorflow", choices=["tensorflow", "jax", "torch"])
    parser.add_argument("--keras-worker", help=argparse.SUPPRESS)
    parser.add_argument("--savedmodel-worker", help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help="only LightSUAN's raw signature against its id signature "
                        "(m1 = --m1, L = --length)")
    parser.add_argument("--length", type=int, default=200, help="history length L of the --raw comparison")
    args = parser.parse_args(argv)
    if args.raw:
        raw_vs_id(args)
        return
    if args.keras_worker or args.savedmodel_worker:
        worker = json.loads(args.keras_worker or args.savedmodel_worker)
        worker["concurrency"] = [int(c) for c in worker["concurrency"]]
        result = keras_side(worker) if args.keras_worker else saved_model_side(worker)
        print("RESULT " + json.dumps(result), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="zoo-serving-") as scratch:
        shared = {"cases": args.cases, "rows": args.rows, "m1": args.m1, "candidates": args.candidates,
                  "requests": args.requests, "warmup": args.warmup, "concurrency": args.concurrency,
                  "export_dir": scratch, "keras_backend": args.keras_backend}
        keras_rounds, saved_rounds = [], []
        for r in range(args.rounds):
            keras_rounds.append(run_side("keras", dict(shared, export=r == 0), args.keras_backend))
            saved_rounds.append(run_side("savedmodel", shared, "tensorflow"))
    print(f"CPU ({os.cpu_count()} cores), shipped presets (simulator schema, L = 30); {args.requests} requests per "
          f"case and concurrency, fastest of {args.rounds} alternating rounds; Keras under {args.keras_backend}")
    print(f"{'request':<46}{'conc':>5}{'Keras p50':>10}{'p99':>8}{'SavedModel p50':>15}{'p99':>8}"
          f"{'SM/Keras p50':>13}{'max |diff|':>11}")
    for case in args.cases:
        for c in args.concurrency:
            k, s = best(keras_rounds, case, c), best(saved_rounds, case, c)
            diff = max(r[case]["max_abs_difference"] for r in saved_rounds)
            print(f"{describe(args)[case]:<46}{c:>5}{k['p50_ms']:>10.2f}{k['p99_ms']:>8.2f}{s['p50_ms']:>15.2f}"
                  f"{s['p99_ms']:>8.2f}{s['p50_ms'] / k['p50_ms']:>13.2f}{diff:>11.1e}")
    print("goal: SavedModel / Keras p50 <= 1 (milliseconds per request); outputs equal within 1e-5")


if __name__ == "__main__":
    main()
