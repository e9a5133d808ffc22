"""Training on several devices or hosts, on each backend's own engine: `zoo.recipes.fit(..., distribution=...)`.

| strategy | JAX (keras.distribution) | TensorFlow (tf.distribute) | torch |
|---|---|---|---|
| "data" | DataParallel | MirroredStrategy | ZooError |
| "model" | ModelParallel: tables split by rows over a "model" mesh axis | ZooError | ZooError |
| "multi-worker" | initialize + DataParallel (ModelParallel: `model_axis`) | ZooError | ZooError |

"multi-worker" runs one process per host (or per device) over every device of every process.

What TensorFlow lacks, measured with Keras 3.15 and TF 2.21 (recipes/distributed_test.py re-measures it):
- MultiWorkerMirroredStrategy: with two or more workers Keras 3's `fit` fails on its first batch, even for a
  one-layer Sequential model: its symbolic build reduces the batch with `strategy.reduce`, which this strategy
  does not map over a structure ("Attempt to convert a value (PerReplica...)", keras-team/keras#20329), and
  past that, it reduces every scalar log along axis 0 ("Invalid reduction dimension 0 for input with 0
  dimensions", tensorflow/tensorflow#72388).
- ParameterServerStrategy: the variables are created on the parameter servers, but `fit` stops at the data
  ("To use this dataset, you need to pass this dataset to ClusterCoordinator.create_per_worker_dataset";
  Keras 3 has no ClusterCoordinator path and no `DatasetCreator`). Keras' TensorFlow `keras.distribution`
  backend is a DTensor prototype marked "DO NOT USE". Tables beyond one device, and several hosts, train
  under JAX; the preset then loads under TensorFlow for export.
Why there is nothing under torch: Keras 3 offers no multi-device engine for the torch backend
(`keras.distribution` is JAX's, `tf.distribute` TensorFlow's); torch's DistributedDataParallel needs a
hand-written training loop around the model instead of `fit`, which the zoo does not carry.

keras_rs.layers.DistributedEmbedding is not used: off TPU SparseCore it is a plain lookup placed by the same
`keras.distribution` layout this module sets, so it adds nothing on CPU or GPU, and it would change the tables'
weights (and so every preset) for all backends.
"""

import contextlib
import math
import os
import warnings

import keras

from zoo.errors import ZooError

STRATEGIES = ("data", "model", "multi-worker")
BATCH_SCALING = ("global", "sqrt", "linear")

_TORCH = (
    "Keras 3 has no multi-device training for the torch backend (keras.distribution is JAX's, tf.distribute "
    "TensorFlow's): train with KERAS_BACKEND=jax or tensorflow; the preset loads under torch afterwards"
)
_TF_MULTI_WORKER = (
    "strategy 'multi-worker' runs under KERAS_BACKEND=jax: Keras 3's fit fails under TensorFlow's "
    "MultiWorkerMirroredStrategy with two or more workers (keras-team/keras#20329, tensorflow/tensorflow#72388)"
)
_TF_MODEL = (
    "strategy 'model' (embedding tables split by rows over devices) runs under KERAS_BACKEND=jax: Keras 3 cannot "
    "fit with TensorFlow's ParameterServerStrategy, and its TensorFlow keras.distribution is a prototype"
)


class Distributed:
    """How a run spreads over devices: the engine, its scope, the replicas, the batch and learning-rate rule.

    Build it with `make_distribution`. Attributes:
        strategy: "data", "model" or "multi-worker".
        engine: the backend's own object (a keras.distribution.Distribution or a tf.distribute.Strategy).
        num_devices: the devices the run uses, over every process.
        num_replicas: the data-parallel replicas: each step's global batch is split in this many parts.
        num_processes, process_index: the processes of the run and this one's rank (0 is the chief).
        batch_scaling: "global" (the recipe's batch is the global batch; each replica gets 1/num_replicas of
            it and the learning rate stays: the same optimisation as one device), "linear" (the recipe's
            batch is per replica; global batch and learning rate x num_replicas, Goyal et al. 2017) or "sqrt"
            (global batch x num_replicas, learning rate x sqrt(num_replicas), the rule for Adam of Malladi
            et al. 2022).
        replicated: paths of the variables the "model" layout would split but whose shape does not divide
            the mesh axis: they are replicated instead (a table of 62 rows does not split over 4 devices).
    """

    def __init__(self, strategy, engine, num_devices, num_replicas, num_processes=1, process_index=0,
                 batch_scaling="global"):
        self.strategy = strategy
        self.engine = engine
        self.num_devices = num_devices
        self.num_replicas = num_replicas
        self.num_processes = num_processes
        self.process_index = process_index
        self.batch_scaling = batch_scaling

    @property
    def replicated(self):
        return sorted(getattr(self.engine, "replicated", ()))

    @property
    def is_chief(self):
        """Whether this process writes the run's files (presets, reports): process 0."""
        return self.process_index == 0

    def process_group(self):
        """The run's processes as a zoo.datasets.ProcessGroup: what `zoo.datasets.load(..., process_group=)`
        takes so that each process reads its own shards."""
        from zoo.datasets.process_group import ProcessGroup

        return ProcessGroup.jax() if self.num_processes > 1 else ProcessGroup()

    @property
    def uses_tf_distribute(self):
        return keras.backend.backend() == "tensorflow"

    def scope(self):
        """The engine's scope: variables created in it are placed by the distribution."""
        return self.engine.scope()

    def __repr__(self):
        return (f"Distributed({self.strategy!r}, devices={self.num_devices}, replicas={self.num_replicas}, "
                f"processes={self.num_processes}, engine={type(self.engine).__name__})")

    def scale(self, recipe):
        """The recipe with its batch size and learning rate for this many replicas (`batch_scaling`)."""
        import dataclasses

        if self.batch_scaling == "global":
            return recipe
        factor = self.num_replicas if self.batch_scaling == "linear" else math.sqrt(self.num_replicas)
        return dataclasses.replace(
            recipe, batch_size=recipe.batch_size * self.num_replicas, learning_rate=recipe.learning_rate * factor
        )

    def check_batch(self, rows):
        parts = math.lcm(self.num_replicas, self.num_processes)
        if rows % parts:
            over = f"{self.num_replicas} replicas" + (
                f" of {self.num_processes} processes" if self.num_processes > 1 else "")
            raise ZooError(
                f"a global batch of {rows} rows does not split over {over}: use a batch size that is a multiple "
                f"of {parts}"
            )

    def holds(self, model):
        """Whether every variable of `model` was created in this distribution."""
        if self.uses_tf_distribute:
            extended = self.engine.extended
            return all(extended.variable_created_in_scope(v.value) for v in model.variables)
        devices = set(self.engine.device_mesh.backend_mesh.devices.flat)
        return all(set(v.value.sharding.device_set) == devices for v in model.variables)

    def place(self, model):
        """`model` when it was built in this distribution, else a copy built in its scope with its weights."""
        if self.holds(model):
            return model
        with self.scope():
            placed = type(model).from_config(model.get_config())
        placed.set_weights(model.get_weights())
        return placed

    def host_weights(self, model):
        """The model's weights as NumPy arrays, whole, on every process (a collective: call it on all)."""
        if self.uses_tf_distribute or self.num_processes == 1:
            return model.get_weights()
        import numpy as np
        from jax.experimental import multihost_utils

        weights = []
        for variable in model.weights:
            value = variable.value
            if not value.is_fully_addressable and not value.is_fully_replicated:
                value = multihost_utils.process_allgather(value, tiled=True)
            weights.append(np.asarray(value))
        return weights

    def to_single_device(self, model):
        """A plain copy of `model` outside any distribution (evaluate it, save it as a preset anywhere).
        Every process must call it (the weights are gathered from all of them)."""
        weights = self.host_weights(model)
        with _no_distribution():
            copy = type(model).from_config(model.get_config())
        copy.set_weights(weights)
        return copy

    def save_preset(self, model, directory, metadata=None):
        """Writes `model` as a single-device preset from the chief (call it on every process); returns the
        directory on the chief, None elsewhere."""
        copy = self.to_single_device(model)
        if not self.is_chief:
            return None
        copy.save_to_preset(directory, metadata=metadata)
        return directory


@contextlib.contextmanager
def _no_distribution():
    if keras.backend.backend() == "jax":
        previous = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        try:
            yield
        finally:
            keras.distribution.set_distribution(previous)
    else:
        yield


class _ShardWhereEven(keras.distribution.ModelParallel):
    """keras.distribution.ModelParallel that applies a LayoutMap entry only where the variable's rank matches
    and every split dimension divides by its mesh axis; other variables are replicated and recorded in
    `replicated` (JAX cannot split 62 rows over 4 devices)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.replicated = set()

    def get_variable_layout(self, variable):
        layout = super().get_variable_layout(variable)
        sizes = dict(zip(self.device_mesh.axis_names, self.device_mesh.shape))
        axes = layout.axes
        if len(axes) == len(variable.shape) and all(
            axis is None or dim % sizes[axis] == 0 for axis, dim in zip(axes, variable.shape)
        ):
            return layout
        self.replicated.add(variable.path)
        return keras.distribution.TensorLayout([None] * len(variable.shape), self.device_mesh)


def _model_parallel(devices, model_axis, shard_dense):
    """Mesh ("batch", "model") = (len(devices) / model_axis, model_axis). Every Keras Embedding table
    (`.../embeddings`, the FeatureEmbedding tables `embedding_<field>`) is split by rows over "model"; with
    `shard_dense`, every 2-D kernel (`.../kernel`) by output columns. The batch is split over "batch"."""
    mesh = keras.distribution.DeviceMesh(
        (len(devices) // model_axis, model_axis), ("batch", "model"), devices
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[r".*/embeddings"] = ("model", None)
    if shard_dense:
        layout_map[r".*/kernel"] = (None, "model")
    return _ShardWhereEven(layout_map=layout_map, batch_dim_name="batch")


def _check_options(strategy, devices, model_axis, shard_dense, batch_scaling):
    if strategy not in STRATEGIES:
        raise ZooError(f"unknown strategy '{strategy}' (strategies: {', '.join(STRATEGIES)})")
    if batch_scaling not in BATCH_SCALING:
        raise ZooError(f"unknown batch_scaling '{batch_scaling}' ({', '.join(BATCH_SCALING)})")
    if devices is not None and (not isinstance(devices, int) or devices < 1):
        raise ZooError(f"devices must be a positive number of devices, not {devices!r}")
    if model_axis is not None and (not isinstance(model_axis, int) or model_axis < 1):
        raise ZooError(f"model_axis must be a positive number of devices, not {model_axis!r}")
    if strategy == "data" and (model_axis is not None or shard_dense):
        raise ZooError("strategy 'data' replicates every variable: model_axis and shard_dense belong to 'model'")
    if strategy == "multi-worker" and devices is not None:
        raise ZooError("strategy 'multi-worker' uses every device of every process: leave devices unset "
                       "(choose a process's devices with CUDA_VISIBLE_DEVICES)")
    backend = keras.backend.backend()
    if backend == "torch":
        raise ZooError(_TORCH)
    if backend == "tensorflow" and strategy == "model":
        raise ZooError(_TF_MODEL)
    if backend == "tensorflow" and strategy == "multi-worker":
        raise ZooError(_TF_MULTI_WORKER)
    if backend not in ("jax", "tensorflow"):
        raise ZooError(f"distributed training runs under jax or tensorflow, not {backend}")


def _local(devices, available, kind):
    """The first `devices` of the `available` ones (all of them by default)."""
    count = len(available) if devices is None else devices
    if count > len(available):
        raise ZooError(
            f"{count} devices asked for but {kind} sees {len(available)} ({', '.join(map(str, available))})"
        )
    return list(available[:count])


def _jax(strategy, devices, model_axis, shard_dense, batch_scaling):
    import jax

    if strategy == "multi-worker":
        _initialize_jax()
    available = keras.distribution.list_devices()
    chosen = _local(devices, available, "JAX")
    if strategy == "model" or model_axis is not None or shard_dense:
        axis = len(chosen) if model_axis is None else model_axis
        if axis > len(chosen) or len(chosen) % axis:
            raise ZooError(f"a model axis of {axis} devices does not tile the {len(chosen)} devices of the mesh")
        engine = _model_parallel(chosen, axis, shard_dense)
        replicas = len(chosen) // axis
    else:
        engine = keras.distribution.DataParallel(devices=chosen)
        replicas = len(chosen)
    return Distributed(strategy, engine, len(chosen), replicas, jax.process_count(), jax.process_index(),
                       batch_scaling)


def _initialize_jax():
    """keras.distribution.initialize from KERAS_DISTRIBUTION_JOB_ADDRESSES / _NUM_PROCESSES / _PROCESS_ID."""
    import jax

    names = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise ZooError(f"strategy 'multi-worker' under JAX reads the cluster from {', '.join(names)}: "
                       f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set")
    if jax.distributed.is_initialized():
        return  # a second distribution in the same process
    try:
        keras.distribution.initialize()
    except RuntimeError as error:
        raise ZooError(f"keras.distribution.initialize failed ({str(error).splitlines()[0]}): make the "
                       "distribution before anything runs on JAX") from None


def _tensorflow(strategy, devices, batch_scaling):
    import tensorflow as tf

    available = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    chosen = _local(devices, [d.name for d in available], "TensorFlow")
    engine = tf.distribute.MirroredStrategy(chosen)
    return Distributed(strategy, engine, len(chosen), engine.num_replicas_in_sync, 1, 0, batch_scaling)


def make_distribution(strategy="data", *, devices=None, model_axis=None, shard_dense=False, batch_scaling="global"):
    """The distribution of a training run on the backend's engine (see the module's table).

    Args:
        strategy: "data" (one process, `devices` replicas), "model" (JAX: tables split by rows over a
            "model" mesh axis of `model_axis` devices, the batch over the rest) or "multi-worker" (JAX: one
            process per host or device, each launched with KERAS_DISTRIBUTION_JOB_ADDRESSES (process 0's
            host:port), KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID; every device of
            every process; call this first thing in the program, before anything runs on JAX).
        devices: how many local devices (the first ones; default all).
        model_axis: devices per table shard ("model"; default all of them; "multi-worker" under JAX: a mesh
            of processes' devices with tables split over this many).
        shard_dense: also split every 2-D Dense kernel by output columns over the "model" axis.
        batch_scaling: "global", "linear" or "sqrt" (see `Distributed`).
    """
    _check_options(strategy, devices, model_axis, shard_dense, batch_scaling)
    if keras.backend.backend() == "jax":
        return _jax(strategy, devices, model_axis, shard_dense, batch_scaling)
    return _tensorflow(strategy, devices, batch_scaling)


def resolve(distribution):
    """A `Distributed` from a strategy name (all local devices) or a `Distributed`."""
    if isinstance(distribution, Distributed):
        return distribution
    if isinstance(distribution, str):
        return make_distribution(distribution)
    raise ZooError(f"distribution must be a strategy name ({', '.join(STRATEGIES)}) or make_distribution(...)'s "
                   f"result, not {type(distribution).__name__}")


class _SynchronizedBatchNorm(keras.callbacks.Callback):
    """Under tf.distribute, every BatchNormalization (Dice's too) of the trained model normalises with the
    global batch's statistics during fit (Keras' `synchronized`), as on one device; restored after."""

    def on_train_begin(self, logs=None):
        self.layers = [layer for layer in self.model._flatten_layers()
                       if isinstance(layer, keras.layers.BatchNormalization) and not layer.synchronized]
        for layer in self.layers:
            layer.synchronized = True

    def on_train_end(self, logs=None):
        for layer in self.layers:
            layer.synchronized = False


def fit_distributed(fit, distribution, model, train, val, recipe, *, callbacks=(), **options):
    """`fit` (zoo.recipes.fit) of `model` in `distribution`: the recipe scaled by its batch rule, the data in
    full global batches, the model (rebuilt in the scope unless it was built there), its trainer, optimizer
    and metrics built and trained in the scope; the weights copied back into `model` after.

    With several processes, `train` and `val` are this process's share of the data (zoo.datasets.load(...,
    process_group=run.process_group()) reads only its shards): each process feeds 1/num_processes of every
    global batch, and every process runs the same number of steps (the fewest any process's share holds:
    a collective step must be taken by all)."""
    from zoo.recipes.fit import _is_tf_data, _num_candidates

    run = resolve(distribution)
    if not _is_tf_data(train) or (val is not None and not _is_tf_data(val)):
        raise ZooError("fit(distribution=...) trains on tf.data datasets (zoo.datasets.load, simulator.dataset)")
    recipe = run.scale(recipe)
    rows = max(recipe.batch_size // (_num_candidates(train) or 1), 1)
    run.check_batch(rows)
    # Every step a full global batch: JAX cannot split a partial batch over the devices, and the same number
    # of steps on every backend; at most one batch of rows per pass is left out. Each process feeds its part.
    local = rows // run.num_processes
    train = train.unbatch().batch(local, drop_remainder=True)
    if val is not None and not run.uses_tf_distribute:
        val = val.unbatch().batch(local, drop_remainder=True)
    if run.num_processes > 1:
        group = run.process_group()
        steps = min(group.allgather(sum(1 for _ in train)))
        if not steps:
            raise ZooError(f"a process's share of the training data holds fewer than {local} rows (one batch)")
        options["steps_per_epoch"] = min(options.get("steps_per_epoch") or steps, steps)
        if val is not None:
            val = val.take(min(group.allgather(sum(1 for _ in val))))
    extra = list(callbacks) + ([_SynchronizedBatchNorm()] if run.uses_tf_distribute else [])
    placed = run.place(model)
    if run.replicated:
        warnings.warn(f"replicated on every device, their shape does not divide the model axis: "
                      f"{', '.join(run.replicated)}", stacklevel=3)
    with run.scope():
        history = fit(placed, train, val, recipe=recipe, callbacks=extra, **options)
    if placed is not model:
        model.set_weights(run.host_weights(placed))
    history.distribution = run
    return history
