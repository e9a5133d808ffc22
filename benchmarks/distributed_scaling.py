"""Data-parallel training samples/s on 1, 2, 4 devices and the largest item table one device trains, with
and without row sharding (zoo.recipes.distributed; issue #18).

    python benchmarks/distributed_scaling.py                                   # both parts, defaults below
    python benchmarks/distributed_scaling.py --devices 1 2 4 8 --backends jax tensorflow --skip-memory
    python benchmarks/distributed_scaling.py --skip-throughput --max-rows 268435456 --memory-limit-gb 0

Every measurement runs in a fresh interpreter, because the device count is fixed when a backend starts.
Where the accelerator is the CPU, a run gets N virtual devices (JAX: XLA_FLAGS
--xla_force_host_platform_device_count; TensorFlow: N logical CPU devices); on a GPU machine it takes the
first N GPUs and the same script runs unchanged.

Throughput is weak scaling: B rows per device (global batch N x B, `batch_scaling="linear"`), din at the
simulator's schema, the steady-state samples/s after warm-up steps; 1 device is a plain `fit` without a
distribution. Efficiency = samples/s(N) / (N x samples/s(1)).

Memory: the item table (hist_item_id and cand_item_id share it, dimension 8, Adam's two slots beside it)
doubles from --min-rows until two training steps fail for lack of memory or --max-rows is reached, under
JAX with N devices: "replicated" (DataParallel: every device holds the whole table) and "row-sharded"
(ModelParallel: each device holds 1/N of the rows). Where the accelerator is the CPU the virtual devices
share the host's memory, so each trial runs under a cap on the process's data segment (--memory-limit-gb
above what the interpreter holds after start-up; 0: no cap); on GPUs each device's own memory is the bound
and no cap is set.

What the numbers can show on a CPU: the virtual devices share the machine's cores (2 on the development
machine), so N devices add no arithmetic; samples/s there measure what splitting a batch costs (per-device
dispatch, the gradient all-reduce, smaller matrix products), not a speed-up, and the efficiency is at most
cores / N. The memory ratio is real on any machine: a replicated table costs N copies, a row-sharded one
1/N per device, so the largest row-sharded table is about N times the largest replicated one.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _virtual_devices(backend, count):
    """Before the backend starts: N devices where the accelerator is the CPU (GPUs are left as they are)."""
    if backend == "jax":
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}"
        return
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def _schema(rows=None):
    from zoo.datasets import BehaviourSimulator
    from zoo.schema import Schema

    simulator = BehaviourSimulator(seed=0)
    if rows is None:
        return simulator, simulator.schema
    config = simulator.schema.to_dict()
    for feature in config["features"]:
        if feature["name"] == "item_id":
            feature["vocabulary_size"] = rows  # the simulator's ids stay valid in a larger table
    return simulator, Schema.from_dict(config)


def child_throughput(args):
    _virtual_devices(args.backend, args.devices)
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.errors import ZooError
    from zoo.recipes.distributed import make_distribution

    class Timer(keras.callbacks.Callback):
        """Seconds from the end of the last warm-up step to the end of the last step; each step's loss is
        read (as a progress bar does), so an asynchronous backend cannot run ahead of the clock."""

        def on_train_batch_end(self, batch, logs=None):
            keras.ops.convert_to_numpy(logs["loss"])
            if batch == args.warmup - 1:
                self.start = time.perf_counter()
            self.seconds = time.perf_counter() - self.start if batch >= args.warmup else None

    try:
        run = make_distribution("data", devices=args.devices, batch_scaling="linear") if args.devices > 1 else None
    except ZooError as error:
        print(json.dumps({"skipped": str(error)}))
        return
    simulator, schema = _schema()
    keras.utils.set_random_seed(0)
    model = zoo.get("din", schema=schema)
    rows = args.batch * args.devices
    data = simulator.dataset((args.warmup + args.steps) * rows, batch_size=rows, seed=1, shuffle=False).cache()
    timer = Timer()
    zoo.recipes.fit(model, data, recipe="suan", batch_size=args.batch, verbose=0, callbacks=[timer], distribution=run)
    devices = keras.distribution.list_devices() if args.backend == "jax" else None
    print(json.dumps({"samples_per_s": args.steps * rows / timer.seconds, "device": (devices or ["tf"])[0]}))


def _cap_host_memory(gigabytes):
    """Where the accelerator is the CPU: cap the data segment at what the process holds now + `gigabytes`."""
    import resource

    import jax

    if gigabytes <= 0 or jax.default_backend() != "cpu":
        return None
    held = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmData:"))
    limit = held + int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return limit


def child_memory(args):
    _virtual_devices("jax", args.devices)
    import keras

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)
    from zoo.errors import ZooError
    from zoo.recipes.distributed import make_distribution

    try:
        run = make_distribution(args.strategy, devices=args.devices)
    except ZooError as error:
        print(json.dumps({"skipped": str(error)}))
        return
    _cap_host_memory(args.memory_limit_gb)
    simulator, schema = _schema(args.rows)
    data = simulator.dataset(32 * args.devices, batch_size=16 * args.devices, seed=1, shuffle=False)
    try:
        keras.utils.set_random_seed(0)
        with run.scope():
            model = zoo.get("din", schema=schema, attention_units=(16,), mlp_units=(32,))
        zoo.recipes.fit(model, data, recipe="suan", batch_size=16 * args.devices, verbose=0, distribution=run)
        table = [v for v in model.weights if v.path.endswith("embedding_item_id/embeddings")][0]
        shard = table.value.addressable_shards[0].data.shape
        print(json.dumps({"ok": True, "rows_per_device": int(shard[0])}))
    except Exception as error:  # out of memory: XlaRuntimeError / JaxRuntimeError / MemoryError
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}))


def _child(arguments, backend, timeout):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    try:
        result = subprocess.run([sys.executable, __file__, *arguments], env=env, capture_output=True, text=True,
                                timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no answer in {timeout} s"}
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = [line for line in result.stderr.splitlines() if line.strip()][-1:] or ["(nothing on stderr)"]
        return {"ok": False, "error": f"exit status {result.returncode}: {tail[0][:160]}"}
    return json.loads(lines[-1])


def throughput(args):
    print(f"Data-parallel training, din, {args.batch} rows per device, {args.steps} timed steps after "
          f"{args.warmup} warm-up steps")
    for backend in args.backends:
        base = None
        for devices in args.devices:
            result = _child(["--child", "throughput", "--backend", backend, "--devices", str(devices),
                             "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)],
                            backend, args.timeout)
            if "samples_per_s" not in result:
                print(f"  {backend:<10} {devices} device(s): {result.get('skipped') or result.get('error')}")
                continue
            rate = result["samples_per_s"]
            base = rate if devices == 1 else base
            efficiency = f"{rate / (devices * base):6.2f}" if base else "     -"
            print(f"  {backend:<10} {devices} device(s): {rate:10.0f} samples/s   scaling efficiency {efficiency}")


def memory(args):
    devices = max(args.devices)
    cap = f", host data cap {args.memory_limit_gb} GiB where the devices are the CPU" if args.memory_limit_gb else ""
    print(f"Largest item table (dimension 8, Adam) that trains two steps on {devices} JAX devices{cap}")
    for strategy, label in (("data", "replicated"), ("model", "row-sharded")):
        rows, largest, per_device, stop = args.min_rows, None, None, f"--max-rows {args.max_rows} reached"
        while rows <= args.max_rows:
            result = _child(["--child", "memory", "--strategy", strategy, "--devices", str(devices), "--rows",
                             str(rows), "--memory-limit-gb", str(args.memory_limit_gb)], "jax", args.timeout)
            if not result.get("ok"):
                stop = result.get("skipped") or result.get("error")
                break
            largest, per_device = rows, result["rows_per_device"]
            rows *= 2
        if largest is None:
            print(f"  {label:<12} none from {args.min_rows} rows ({stop})")
            continue
        gib = per_device * 8 * 4 * 3 / 2**30  # the table and Adam's two slots, float32
        print(f"  {label:<12} {largest:>12,} rows ({per_device:,} rows = {gib:.2f} GiB with Adam per device); "
              f"stopped: {stop}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4], help="device counts (default 1 2 4)")
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow"], choices=["jax", "tensorflow"])
    parser.add_argument("--batch", type=int, default=256, help="rows per device and step (default 256)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps (default 5)")
    parser.add_argument("--min-rows", type=int, default=2**20, help="first item table size (default 2^20)")
    parser.add_argument("--max-rows", type=int, default=2**25, help="largest table tried (default 2^25)")
    parser.add_argument("--memory-limit-gb", type=float, default=2.0,
                        help="host memory cap per trial where the devices are the CPU (default 2; 0: none)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per measurement (default 900)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--child", choices=["throughput", "memory"], help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "throughput":
        args.devices = args.devices[0]
        return child_throughput(args)
    if args.child == "memory":
        args.devices = args.devices[0]
        return child_memory(args)
    if not args.skip_throughput:
        throughput(args)
    if not args.skip_memory:
        memory(args)


if __name__ == "__main__":
    main()
