"""Backend-specific kernels behind keras.ops-only layers and the row-sparse table step: the one place the zoo
calls a backend directly.

`layers/` and `zoo/models/` use keras.ops only; where one backend's kernel for a keras op is much slower
than an equivalent it has, the layer calls a function here, which gives the keras.ops result on every
other backend.
"""

import threading

import keras
import numpy as np
from keras import ops


def gather_rows(table, ids):
    """`table(ids)` for a keras.layers.Embedding `table`: its rows at `ids`, [*ids.shape, d], in its compute dtype.

    Under TensorFlow the rows are a ResourceGather of the table variable (the layer's own call reads the
    whole table first).

    Under torch a float table (not quantized, no LoRA) is gathered with `torch.index_select` on int64 ids:
    the same rows as the layer's `F.embedding` (negative ids wrap, as keras.ops.take's), but its backward is
    `index_add_`, where F.embedding's is CPU `embedding_dense_backward`: 2.7x slower at 51,200 ids into a
    [1351, 32] table and 30x into a [1351, 1] one (`benchmarks/torch_step_cost.py --model deepfm` prints
    both). `layers/feature_embedding_test.py` checks the rows and the table's gradient. A table that
    zoo.recipes.SparseTableAdam was built on (`sparse_rows`) is gathered with `F.embedding(sparse=True)`:
    its gradient is then a sparse tensor of the batch's rows, not a dense [V, d] one.
    """
    backend = keras.backend.backend()
    if backend == "jax" and getattr(_ROW_SLABS, "slabs", None):
        rows = _slab_rows(table, ids)
        if rows is not None:
            return rows
    if backend == "jax" or table.quantization_mode is not None or table.lora_enabled:
        return table(ids)
    if backend == "tensorflow":
        # a ResourceGather of the rows, not the layer's gather of a whole-table read: a step that then updates
        # rows in place (zoo.recipes.SparseTableAdam) would copy the whole table while that read is alive
        import tensorflow as tf

        ids = tf.where(ids < 0, ids + tf.cast(table.input_dim, ids.dtype), ids)  # negative ids wrap, as ops.take's
        from keras.src.backend.common.variables import AutocastScope

        with AutocastScope(None):  # the variable itself (under mixed precision .value is a cast of the whole table)
            rows = tf.gather(table.embeddings.value, ids)
        return ops.cast(rows, table.compute_dtype)
    import torch

    weights = ops.convert_to_tensor(table.embeddings)
    index = ops.cast(ops.reshape(ids, (-1,)), "int64")  # with int32 ids index_add_ takes a 5x slower path
    index = ops.where(index < 0, index + weights.shape[0], index)
    owner = getattr(table.embeddings, "sparse_rows", None)  # the SparseTableAdam that updates it by rows
    if owner is not None and owner() is not None:
        rows = torch.nn.functional.embedding(index, weights, sparse=True).reshape(*ids.shape, weights.shape[-1])
    else:
        rows = torch.index_select(weights, 0, index).reshape(*ids.shape, weights.shape[-1])
    return ops.cast(rows, table.compute_dtype)


# --------------------------------------------------------------------------- JAX: row-sparse table steps
_ROW_SLABS = threading.local()  # .slabs: {id(table variable): (the batch's distinct ids [N], their rows [N, d])}
# while this thread traces a row step


def _slab_rows(table, ids):
    """The rows at `ids` from the slab of the batch's distinct rows (jax_rows_train_step), or None."""
    slab = _ROW_SLABS.slabs.get(id(table.embeddings))
    if slab is None:
        return None
    import jax.numpy as jnp

    distinct, rows = slab
    flat = jnp.reshape(ids, (-1,)).astype(distinct.dtype)
    flat = jnp.where(flat < 0, flat + table.input_dim, flat)
    picked = jnp.take(rows, jnp.searchsorted(distinct, flat), axis=0)
    return ops.cast(jnp.reshape(picked, (*ids.shape, rows.shape[-1])), table.compute_dtype)


def row_plan(model, x):
    """{index in model.trainable_variables: [keys of x]} of the FeatureEmbedding tables that the optimizer
    updates by rows (SparseTableAdam's tables) and that are looked up only at the ids of those batch keys."""
    from zoo.layers.feature_embedding import FeatureEmbedding

    tables = getattr(_row_optimizer(model), "_tables", None) or set()
    variables = model.trainable_variables  # (a walk over every layer: read once)
    index = {id(v): i for i, v in enumerate(variables)}
    plan = {}
    for layer in model._flatten_layers(include_self=False):
        if not isinstance(layer, FeatureEmbedding):
            continue
        for feature in layer.schema.features:
            table = layer._table(feature) if feature.group != "num" else None
            if table is None or feature.key not in x or table.quantization_mode is not None or table.lora_enabled:
                continue
            i = index.get(id(table.embeddings))
            if i is not None and i in tables:
                plan.setdefault(i, []).append(feature.key)
    # a table with no more rows than the batch looks up costs no more updated whole (the rule over every row)
    lookups = {i: sum(int(np.prod(x[k].shape)) for k in keys) for i, keys in plan.items()}
    return {i: keys for i, keys in plan.items() if variables[i].shape[0] > lookups[i]}


def jax_rows_train_step(model, state, data):
    """Keras' JAX train step, with the row-updated tables differentiated at the batch's rows only.

    For each table of `row_plan`, the batch's distinct ids (jnp.unique with a static size, padded with the
    out-of-range id V) select a slab of N rows; gather_rows reads the slab (ids located by searchsorted),
    jax.grad differentiates the slab instead of the [V, d] table, and SparseTableAdam updates those rows
    (zoo.recipes.SparseTableAdam, `row_ids`). A step then costs O(N d) per table, not O(V d)."""
    import jax
    import jax.numpy as jnp
    from keras.src.trainers.data_adapters import data_adapter_utils

    trainable, non_trainable, optimizer_variables, metrics_variables = state
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    plan = row_plan(model, x)
    optimizer = _row_optimizer(model)
    variables = model.trainable_variables
    distinct, slabs = {}, {}
    for i, keys in plan.items():
        size = variables[i].shape[0]
        ids = jnp.concatenate([jnp.reshape(x[k], (-1,)).astype("int32") for k in keys])
        ids = jnp.where(ids < 0, ids + size, ids)
        distinct[i] = jnp.unique(ids, size=min(ids.shape[0], size), fill_value=size)  # sorted; padded with V
        slabs[i] = jnp.take(trainable[i], distinct[i], axis=0, mode="fill", fill_value=0)

    def loss(dense, slabs):
        values = [trainable[i] if i in plan else v for i, v in enumerate(dense)]
        _ROW_SLABS.slabs = {id(variables[i]): (distinct[i], slabs[i]) for i in plan}
        try:
            return model.compute_loss_and_updates(values, non_trainable, metrics_variables, x, y, sample_weight,
                                                  training=True, optimizer_variables=optimizer_variables)
        finally:
            _ROW_SLABS.slabs = None

    dense = [None if i in plan else v for i, v in enumerate(trainable)]
    (_, aux), (dense_grads, slab_grads) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(dense, slabs)
    unscaled_loss, y_pred, non_trainable, metrics_variables = aux
    grads = [slab_grads[i] if i in plan else g for i, g in enumerate(dense_grads)]
    with optimizer.row_ids(distinct):
        trainable, optimizer_variables = model.optimizer.stateless_apply(optimizer_variables, grads, trainable)
    logs, metrics_variables = model._update_metrics_variables(metrics_variables, unscaled_loss, x, y, y_pred,
                                                              sample_weight)
    return logs, (trainable, non_trainable, optimizer_variables, metrics_variables)


def uses_row_steps(model):
    """Whether `model`'s JAX train step should be jax_rows_train_step (a SparseTableAdam with tables, and no
    keras.distribution: a sharded table takes the rule over every row, the same results at the dense cost)."""
    return (keras.backend.backend() == "jax" and keras.distribution.distribution() is None
            and bool(getattr(_row_optimizer(model), "_tables", None)))


def _row_optimizer(model):
    """The model's SparseTableAdam, also inside a LossScaleOptimizer (mixed_float16), or None."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    return optimizer if hasattr(optimizer, "row_ids") else None


def clear_row_markers(model):
    """Forgets which of `model`'s tables a SparseTableAdam updates by rows (a model compiled again with another
    optimizer gets dense torch gradients again; a SparseTableAdam marks its tables when it is built)."""
    for variable in model.weights:
        if getattr(variable, "sparse_rows", None) is not None:
            variable.sparse_rows = None


class RowSteps:
    """A keras.Model mixin (ZooModel, the recipes' trainers): under JAX with zoo.recipes.SparseTableAdam the
    train step is jax_rows_train_step; compiling again forgets the tables' torch sparse-gradient markers."""

    def compile(self, *args, **kwargs):
        clear_row_markers(self)
        return super().compile(*args, **kwargs)

    def train_step(self, *args, **kwargs):
        if uses_row_steps(self):
            return jax_rows_train_step(self, *args, **kwargs)
        return super().train_step(*args, **kwargs)
