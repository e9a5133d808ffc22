"""Training speed, accuracy and memory of the zoo's models under TensorFlow, JAX and torch, in one run.

    python benchmarks/backend_parity.py                       # ML-100K at L = 50 when found, else the simulator
    python benchmarks/backend_parity.py --models din --rounds 2
    python benchmarks/backend_parity.py --max-batches 20 --epochs 3   # a shorter epoch (a busy machine)
    python benchmarks/backend_parity.py --smoke               # tiny sizes: seconds per backend

Each (model, backend) pair trains in its own subprocess (Keras fixes the backend per process). The three
processes of a model start together, then train in turns of --turn-steps steps, one process at a time,
in rotation (each process' clock stops while it waits), so that load from elsewhere on the machine hits
every backend alike; the rotation's order changes from model to model and round to round, and with
--rounds > 1 the fastest round counts. Every run goes through the zoo's own
path: the data set's tf.data pipeline -> `zoo.recipes.fit` (recipe "suan" with the batch size, epochs
and learning rate given here, Adam, binary cross-entropy, AUC/LogLoss metrics, the validation split
evaluated after every epoch, `jit_compile` left at Keras' "auto": XLA for JAX and TensorFlow, eager for
torch; --jit changes it) -> `evaluate` on the test split.

Columns:
- samples/s: steady-state training samples per second, epochs 2.. (compilation is in epoch 1); each
  epoch's time runs from its start to the end of its last batch;
- vs jax: that rate over JAX's for the same model in the same run (goal: >= 1/1.5 = 0.67);
- compile s: the first step's time less a steady step (tracing and XLA / torch.compile);
- overhead: the largest per-epoch overhead, as a share of that epoch: the time at an epoch boundary that
  is not a training or validation step (iterator start and end, callbacks, any stall), i.e. the gap
  from an epoch's last training batch to the next epoch's first, less the validation batches and one
  steady step; over the boundaries after the first when there are 3 epochs or more (the first one
  holds one-time work, printed in the run's JSON as first_boundary_s) (goal: < 5%);
- feed x: how many times faster the pipeline fit feeds (re-batched tf.data, iterated alone) yields
  samples than the model trains on them (below ~2 the data path limits training);
- AUC, LogLoss: on the test split after training (the metrics Keras computes, 1000 AUC thresholds);
- peak MB: the process' peak resident memory (TF, the data and the model included; the same imports
  under every backend), or the accelerator's peak allocation when the backend runs on one.

Sizes: DIN as in issue #19 (attention (32, 16), MLP (64, 32), BN + Dice); every other model at its
default preset's hyperparameters (saved/<model>/config.json) with the Dice/BatchNorm momentum at the
class default (0.9). Data: ML-100K under ReST's protocol (zoo.datasets movielens, L = 50, embedding 32)
when `--data` finds u.data, else the behaviour simulator (L = 50, embedding 8).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "movielens-100k"
BACKENDS = ("jax", "tensorflow", "torch")
MODELS = ("din", "lightsuan", "rest", "deres_p", "deepfm", "bst")
ISSUE_DIN = {"attention_units": (32, 16), "mlp_units": (64, 32)}  # issue #19's DIN
SMOKE = {  # tiny sizes for --smoke
    "din": {"attention_units": (8,), "mlp_units": (8,)},
    "lightsuan": {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "window_size": 2, "dilation": 2,
                  "parallel_candidates": 4},
    "rest": {"model_dim": 8, "num_heads": 2, "encoder_depth": 1, "ffn_dim": 8, "mlp_units": (8,)},
    "deres_p": {"num_layers": 2, "width": 8, "num_heads": 2, "num_blocks": 1},
    "deepfm": {"mlp_units": (8,)},
    "bst": {"num_heads": 2, "num_layers": 1, "position_dim": 4, "ffn_dim": 8, "mlp_units": (8,)},
}


# ----------------------------------------------------------------------------------------------- worker


def hyperparameters(name, smoke):
    """DIN: the issue's sizes; others: the default preset's (Dice momentum at the class default)."""
    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

    if smoke:
        return dict(SMOKE[name])
    if name == "din":
        return dict(ISSUE_DIN)
    config = zoo.get(name, weights=None).get_config()
    skip = ("schema", "name", "trainable", "dtype", "dice_momentum")
    return {k: v for k, v in config.items() if k not in skip}


def splits(spec):
    """(train, validation, test, schema, training rows) as tf.data pipelines in the input contract."""
    from zoo.datasets import BehaviourSimulator, load

    batch = spec["batch_size"]
    if spec["data"] == "simulator":
        simulator = BehaviourSimulator(sequence_length=spec["length"], timeline_length=spec["length"] + 30,
                                       num_users=spec["sim_users"])
        rows = spec["sim_rows"]
        train = simulator.dataset(rows, batch_size=batch, seed=1)
        val = simulator.dataset(rows // 10, batch_size=4 * batch, seed=3, shuffle=False)
        test = simulator.dataset(rows // 5, batch_size=4 * batch, seed=2, shuffle=False)
        schema = simulator.schema
    else:
        options = dict(sequence_length=spec["length"], verbose=False)
        train, schema = load("movielens", spec["data"], split="train", batch_size=batch, **options)
        val, _ = load("movielens", spec["data"], split="validation", batch_size=4 * batch, **options)
        test, _ = load("movielens", spec["data"], split="test", batch_size=4 * batch, **options)
        rows = None
    if spec["max_batches"]:
        train = train.take(spec["max_batches"])
    if rows is None or spec["max_batches"]:
        rows = sum(int(labels.shape[0]) for _, labels in train)
    return train, val, test, schema, rows


class Timeline:
    """Times of fit's events on a clock that stops while the run waits for its turn (a Keras callback is
    built from it in `callback()`). With `turn_steps`, the run hands the machine back to the parent after
    every `turn_steps` training steps (and once before the first): it prints PAUSE and waits for a line
    on stdin, so that the backends of one model train in alternating turns of a few steps."""

    def __init__(self, turn_steps=0):
        self.epoch_begin, self.train_batches, self.test_begin, self.test_batches = [], [], [], []
        self.epoch_end = []
        self.turn_steps, self.steps, self.paused = turn_steps, 0, 0.0
        self.train_begin = self.train_end = None  # fit's own set-up ends, its tear-down begins

    def now(self):
        return time.perf_counter() - self.paused

    def wait_for_turn(self):
        if not self.turn_steps:
            return
        print("PAUSE", flush=True)
        started = time.perf_counter()
        sys.stdin.readline()
        self.paused += time.perf_counter() - started

    def callback(self):
        import keras

        timeline = self

        class Record(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                timeline.train_begin = timeline.now()
                timeline.wait_for_turn()

            def on_train_end(self, logs=None):
                timeline.train_end = timeline.now()

            def on_epoch_begin(self, epoch, logs=None):
                timeline.epoch_begin.append(timeline.now())
                timeline.train_batches.append([])
                timeline.test_begin.append(None)
                timeline.test_batches.append([])

            def on_train_batch_end(self, batch, logs=None):
                timeline.train_batches[-1].append(timeline.now())
                timeline.steps += 1
                if timeline.turn_steps and timeline.steps % timeline.turn_steps == 0:
                    timeline.wait_for_turn()
                    timeline.train_batches[-1][-1] = timeline.now()  # the turn's end is not a step

            def on_epoch_end(self, epoch, logs=None):
                timeline.epoch_end.append(timeline.now())

            def on_test_begin(self, logs=None):
                if timeline.test_begin:  # fit's validation (not the final evaluate)
                    timeline.test_begin[-1] = timeline.now()

            def on_test_batch_end(self, batch, logs=None):
                if timeline.test_batches:
                    timeline.test_batches[-1].append(timeline.now())

        return Record()

    def summary(self, rows):
        import numpy as np

        epochs = len(self.epoch_begin)
        steps = [np.diff(batches) for batches in self.train_batches[1:]]
        step = float(np.median(np.concatenate(steps))) if epochs > 1 else float("nan")
        compile_s = self.train_batches[0][0] - self.epoch_begin[0] - step
        train_s = sum(self.train_batches[e][-1] - self.epoch_begin[e] for e in range(1, epochs))
        overheads = []
        for e in range(1, epochs):
            gap = self.train_batches[e][0] - self.train_batches[e - 1][-1] - step
            if self.test_batches[e - 1]:
                gap -= self.test_batches[e - 1][-1] - self.test_begin[e - 1]
            epoch_s = self.train_batches[e][-1] - self.train_batches[e - 1][-1]
            overheads.append((max(gap, 0.0), epoch_s))
        recurring = overheads[1:] or overheads  # the first boundary holds one-time work (lazy builds)
        worst = max(recurring, key=lambda o: o[0] / o[1])
        return {
            "samples_per_second": rows * (epochs - 1) / train_s,
            "step_s": step,
            "compile_s": max(compile_s, 0.0),
            "first_boundary_s": overheads[0][0],
            "overhead_s": worst[0],
            "overhead_share": worst[0] / worst[1],
            "epoch_s": [self.train_batches[e][-1] - self.epoch_begin[e] for e in range(epochs)],
            # where the boundary time goes: last training batch -> validation start (the training iterator's
            # end of epoch, callbacks), last validation batch -> next epoch (the validation iterator's end)
            "to_validation_s": [v - t[-1] for t, v in zip(self.train_batches, self.test_begin) if v and t],
            "after_validation_s": [self.epoch_begin[e] - self.test_batches[e - 1][-1]
                                   for e in range(1, epochs) if self.test_batches[e - 1]],
            "validation_s": [v[-1] - b for v, b in zip(self.test_batches, self.test_begin) if v],
            "epoch_end_to_begin_s": [self.epoch_begin[e] - self.epoch_end[e - 1] for e in range(1, epochs)],
        }


def feed_rate(train, batch_size):
    """Samples/s of the pipeline fit feeds (its re-batching included), iterated alone for one pass."""
    dataset = train.unbatch().batch(batch_size)
    iterator = iter(dataset)
    next(iterator)
    start, seen = time.perf_counter(), 0
    for _, labels in iterator:
        seen += int(labels.shape[0])
    return seen / max(time.perf_counter() - start, 1e-9)


def peak_memory_mb():
    import resource

    import keras

    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform != "cpu":
                return device.memory_stats()["peak_bytes_in_use"] / 2**20, device.platform
        if backend == "torch":
            import torch

            if torch.cuda.is_available():
                return torch.cuda.max_memory_allocated() / 2**20, "cuda"
        if backend == "tensorflow":
            import tensorflow as tf

            if tf.config.list_physical_devices("GPU"):
                return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20, "gpu"
    except (KeyError, RuntimeError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss"


def set_threads(threads):
    """--threads: the compute threads of every backend (and of tf.data's own ops)."""
    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(threads)


def worker(spec):
    """One (model, backend) run; returns the measurements as a dict."""
    if spec["threads"]:
        set_threads(spec["threads"])
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

    train, val, test, schema, rows = splits(spec)
    keras.utils.set_random_seed(0)
    params = hyperparameters(spec["model"], spec["smoke"])
    model = zoo.get(spec["model"], schema=schema, **params)
    timeline = Timeline(spec.get("turn_steps", 0))
    jit = {"auto": "auto", "off": False}.get(spec["jit"], keras.backend.backend() == "torch" or "auto")
    started = timeline.now()
    zoo.recipes.fit(
        model, train, val, recipe="suan", epochs=spec["epochs"], batch_size=spec["batch_size"],
        learning_rate=spec["learning_rate"], callbacks=[timeline.callback()], verbose=0, jit_compile=jit,
    )
    fit_s = timeline.now() - started  # compilation, validation: all of fit but the waits for a turn
    result = timeline.summary(rows)
    metrics = model.evaluate(test, return_dict=True, verbose=0)
    memory, where = peak_memory_mb()
    result.update(
        model=spec["model"], backend=keras.backend.backend(), parameters=model.count_params(), rows=rows,
        auc=float(metrics["auc"]), logloss=float(metrics["logloss"]), peak_mb=memory, memory_of=where,
        feed_samples_per_second=feed_rate(train, spec["batch_size"]), hyperparameters=params,
        jit_compile=str(jit), fit_s=fit_s, fit_samples_per_second=rows * spec["epochs"] / fit_s,
        # fit_s = set-up (zoo.recipes.fit's, then Keras' until on_train_begin) + epochs + tear-down
        setup_s=timeline.train_begin - started, teardown_s=started + fit_s - timeline.train_end,
    )
    return result


# ----------------------------------------------------------------------------------------------- parent


def run_spec(data=str(DEFAULT_DATA), length=50, batch_size=1024, epochs=3, learning_rate=1e-3, max_batches=0,
             threads=0, jit="auto", smoke=False):
    """What every worker of one run gets (the model is added per run); --smoke: the simulator at tiny sizes."""
    if smoke or data == "simulator" or not (Path(data) / "u.data").is_file():
        data = "simulator"
    return {
        "data": data, "length": 8 if smoke else length, "batch_size": 64 if smoke else batch_size, "epochs": epochs,
        "learning_rate": learning_rate, "max_batches": max_batches, "threads": threads, "jit": jit, "smoke": smoke,
        "sim_rows": 512 if smoke else 40_000, "sim_users": 40 if smoke else 500,
    }


def worker_env(spec, backend):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    if spec["threads"]:
        env["OMP_NUM_THREADS"] = str(spec["threads"])
        if spec["threads"] == 1:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    return env


def error_summary(output):
    """A failed worker's output in one line: its last line naming an exception (where it started; TensorFlow
    ends a numpy_function's error with node names) and its last line."""
    lines = output.strip().splitlines() or ["no output"]
    named = [line for line in lines if "Error" in line or "Exception" in line][-1:]
    return " | ".join(dict.fromkeys(named + lines[-1:]))[-600:]


def run_worker(spec, backend, timeout):
    """One (model, backend) run on its own, start to end."""
    command = [sys.executable, __file__, "--worker", json.dumps(dict(spec, turn_steps=0))]
    try:
        done = subprocess.run(command, env=worker_env(spec, backend), capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"model": spec["model"], "backend": backend, "error": f"timed out after {timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"model": spec["model"], "backend": backend, "error": error_summary(done.stderr or done.stdout)}


def run_in_turns(spec, backends, timeout):
    """One model under every backend: one process each, started together (imports, data and model built side by
    side), then training in turns of spec["turn_steps"] steps, one process at a time, in rotation, so that
    load from elsewhere on the machine hits every backend alike. Returns {backend: result}."""
    commands = {b: ([sys.executable, __file__, "--worker", json.dumps(spec)], worker_env(spec, b)) for b in backends}
    results = take_turns(commands, timeout)
    for b, result in results.items():
        if "error" in result:
            results[b] = {"model": spec["model"], "backend": b, **result}
    return results


def take_turns(commands, timeout):
    """Runs {side: (argv, env)} side by side: all start together (imports, data and model built at once),
    then train in turns, one process at a time, in rotation (the protocol of Timeline: a
    process prints PAUSE when its turn ends and waits for a line, and RESULT <json> at its end).
    Returns {side: result}, an error in place of a result for a side that failed."""
    deadline = time.perf_counter() + timeout
    logs = {side: tempfile.TemporaryFile(mode="w+") for side in commands}
    procs = {side: subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logs[side],
                                    text=True, cwd=ROOT) for side, (argv, env) in commands.items()}
    results = {}

    def advance(side):
        """Reads the side's output until it pauses (True) or ends (False)."""
        for line in procs[side].stdout:
            if line.startswith("PAUSE"):
                return True
            if line.startswith("RESULT "):
                results[side] = json.loads(line[len("RESULT "):])
        procs[side].wait()
        if side not in results:
            logs[side].seek(0)
            results[side] = {"error": error_summary(logs[side].read())}
        return False

    try:
        active = [side for side in commands if advance(side)]
        turn = 0
        while active:
            if time.perf_counter() > deadline:
                results.update({side: {"error": f"timed out after {timeout} s"} for side in active})
                break
            side = active[turn % len(active)]
            procs[side].stdin.write("GO\n")
            procs[side].stdin.flush()
            if advance(side):
                turn += 1
            else:
                active.remove(side)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in logs.values():
            log.close()
    return results


def schedule(models, backends, rounds):
    """(round, model, backends in order): the order rotates from model to model and round to round."""
    order = []
    for r in range(rounds):
        for i, model in enumerate(models):
            shift = (i + r) % len(backends)
            order.append((r, model, backends[shift:] + backends[:shift]))
    return order


def best_of_rounds(results):
    """{(model, backend): the fastest round's result (or the last error)}."""
    best = {}
    for result in results:
        key = (result["model"], result["backend"])
        old = best.get(key)
        if old is None or "error" in old or (
            "error" not in result and result["samples_per_second"] > old["samples_per_second"]
        ):
            best[key] = result
    return best


def print_table(best, models, backends):
    print(f"{'model':<11}{'backend':<12}{'params':>9}{'samples/s':>11}{'vs jax':>8}{'compile s':>10}"
          f"{'overhead':>10}{'feed x':>8}{'AUC':>8}{'LogLoss':>9}{'peak MB':>9}")
    for model in models:
        jax_rate = best.get((model, "jax"), {}).get("samples_per_second")
        for backend in backends:
            r = best.get((model, backend))
            if r is None:
                continue
            if "error" in r:
                print(f"{model:<11}{backend:<12}  failed: {r['error']}")
                continue
            ratio = f"{r['samples_per_second'] / jax_rate:>8.2f}" if jax_rate else f"{'-':>8}"
            print(f"{model:<11}{backend:<12}{r['parameters']:>9,}{r['samples_per_second']:>11,.0f}{ratio}"
                  f"{r['compile_s']:>10.1f}{100 * r['overhead_share']:>9.1f}%"
                  f"{r['feed_samples_per_second'] / r['samples_per_second']:>8.1f}{r['auc']:>8.4f}"
                  f"{r['logloss']:>9.4f}{r['peak_mb']:>9,.0f}")


def print_goals(best, models, backends):
    for model in models:
        jax_rate = best.get((model, "jax"), {}).get("samples_per_second")
        parts = []
        for backend in backends:
            r = best.get((model, backend))
            if backend == "jax" or not r or "error" in r or not jax_rate:
                continue
            slower = jax_rate / r["samples_per_second"]
            parts.append(f"{backend} {slower:.2f}x JAX's time {'(ok)' if slower <= 1.5 else '(over 1.5x)'}")
        stalls = [f"{b} {100 * best[(model, b)]['overhead_share']:.1f}%" for b in backends
                  if (model, b) in best and "error" not in best[(model, b)]]
        print(f"{model}: {', '.join(parts) or 'no ratio'}; worst epoch overhead {', '.join(stalls)} (goal < 5%)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), help=f"default: {' '.join(MODELS)}")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="ML-100K folder (u.data), or 'simulator' (default: the shared ML-100K when present)")
    parser.add_argument("--length", type=int, default=50, help="history length L")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=3, help="at least 2 (epoch 1 holds the compilation)")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--max-batches", type=int, default=0, help="training batches per epoch (0: the whole split)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every run; the fastest round counts")
    parser.add_argument("--threads", type=int, default=0, help="compute threads per backend (0: its default)")
    parser.add_argument("--jit", choices=["auto", "off", "torch-compile"], default="auto",
                        help="fit's jit_compile: Keras' auto (XLA for JAX/TF, eager torch), off everywhere, or auto "
                        "with torch.compile for torch")
    parser.add_argument("--turn-steps", type=int, default=2,
                        help="training steps per turn when the backends of a model take turns (0: one run after "
                        "the other)")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per model")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the simulator (seconds per run)")
    parser.add_argument("--json", help="also write every run's result to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: epoch 1 holds the compilation")
    spec = run_spec(args.data, args.length, args.batch_size, args.epochs, args.learning_rate, args.max_batches,
                    args.threads, args.jit, args.smoke)
    data = spec["data"]
    print(f"data: {'ML-100K (' + data + ')' if data != 'simulator' else 'behaviour simulator'}, "
          f"L = {spec['length']}, batch {spec['batch_size']}, {args.epochs} epochs"
          f"{f', {args.max_batches} batches per epoch' if args.max_batches else ''}, Adam {args.learning_rate}; "
          f"{os.cpu_count()} CPU cores; threads per backend: {args.threads or 'default'}"
          f"; jit_compile {args.jit}", flush=True)
    results = []
    for r, model, backends in schedule(args.models, args.backends, args.rounds):
        started = time.perf_counter()
        if args.turn_steps:
            runs = run_in_turns(dict(spec, model=model, turn_steps=args.turn_steps), backends, args.timeout)
        else:
            runs = {b: run_worker(dict(spec, model=model), b, args.timeout) for b in backends}
        for backend in backends:
            result = dict(runs[backend], round=r)
            results.append(result)
            note = result.get("error") or (f"{result['samples_per_second']:,.0f} samples/s, "
                                           f"AUC {result['auc']:.4f}, LogLoss {result['logloss']:.4f}")
            print(f"  round {r + 1} {model:<10} {backend:<11} {note}", flush=True)
        print(f"  ({model}: {time.perf_counter() - started:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    best = best_of_rounds(results)
    print()
    print_table(best, args.models, args.backends)
    print()
    print_goals(best, args.models, args.backends)


if __name__ == "__main__":
    main()
