import contextlib
import weakref

import keras
from keras import ops

from zoo.errors import ZooError

TABLE_UPDATES = ("lazy_adam", "rowwise_adagrad", "sgd")


def is_table(variable):
    """Whether `variable` is an embedding table: the 2-D `embeddings` weight of a keras.layers.Embedding
    (FeatureEmbedding's tables, and every other Embedding layer's)."""
    return len(variable.shape) == 2 and variable.name == "embeddings"


@keras.saving.register_keras_serializable(package="zoo")
class SparseTableAdam(keras.optimizers.Adam):
    """Adam for the dense weights; embedding tables updated only at the rows a batch touches.

    Dense weights follow Adam (Kingma & Ba, ICLR 2015, Algorithm 1) exactly as keras.optimizers.Adam.
    A table's row r is updated at step t only where its gradient g_r, summed over the batch, is not zero;
    every other row keeps its weights and its optimizer state (its moments do not decay), so a step reads
    and writes U rows, U the distinct ids of the batch, whatever the table's size. `table_update`:

    - "lazy_adam" (TF-Addons' LazyAdam; TorchRec's and TF Recommenders-Addons' sparse Adam):
          m_r <- b1 m_r + (1 - b1) g_r          v_r <- b2 v_r + (1 - b2) g_r^2
          w_r <- w_r - lr sqrt(1 - b2^t) / (1 - b1^t) * m_r / (sqrt(v_r) + eps)
      with t the global step (Keras' Adam: the same bias correction, the same eps). Memory per row:
      3 D floats (weights and both moments).
    - "rowwise_adagrad" (FBGEMM's and TorchRec's row-wise Adagrad: one accumulator per row):
          a_r <- a_r + mean_d(g_rd^2)           w_r <- w_r - table_lr g_r / (sqrt(a_r) + table_epsilon)
      Memory per row: D + 1 floats.
    - "sgd":  w_r <- w_r - table_lr g_r  (the dense SGD update of those rows). Memory per row: D floats.

    How the rows are found: under TensorFlow a gathered table's gradient is a tf.IndexedSlices; under
    torch zoo.backend_kernels.gather_rows gathers a table this optimizer was built on with
    `F.embedding(sparse=True)`, whose gradient is a sparse COO tensor. Both are summed per distinct id
    and only those rows are gathered and scattered back. Under JAX (where jax.grad of a gather is a dense
    scatter into zeros) the models' train step becomes zoo.backend_kernels.jax_rows_train_step: the
    batch's distinct rows of each FeatureEmbedding table are differentiated as a slab and updated in
    place. A table gradient that arrives dense anyway (a table outside FeatureEmbedding) gets the same
    rule over every row, at the dense cost. benchmarks/vocab_scaling.py prints each backend's step time
    against the table's size.

    Args:
        table_update: "lazy_adam", "rowwise_adagrad" or "sgd" (above).
        table_learning_rate: the tables' rate for rowwise_adagrad and sgd (None: the optimizer's rate).
        table_epsilon: rowwise_adagrad's eps.
        **kwargs: keras.optimizers.Adam's (learning_rate, beta_1, beta_2, epsilon, weight_decay, ...).
            Decoupled weight decay is not applied to the tables (it would touch every row). Gradient
            clipping (clipnorm, global_clipnorm, clipvalue) is Keras' on the table gradients summed per
            row, which is the dense gradient's clipping. amsgrad is refused.
    """

    def __init__(self, learning_rate=0.001, table_update="lazy_adam", table_learning_rate=None,
                 table_epsilon=1e-8, **kwargs):
        if table_update not in TABLE_UPDATES:
            raise ZooError(f"table_update is {table_update!r}; it must be one of {', '.join(TABLE_UPDATES)}")
        if kwargs.get("amsgrad"):
            raise ZooError("SparseTableAdam: amsgrad is not supported")
        if kwargs.get("gradient_accumulation_steps"):
            raise ZooError("SparseTableAdam: gradient_accumulation_steps is not supported (an accumulator holds "
                           "every row of a table); use a larger batch")
        super().__init__(learning_rate=learning_rate, **kwargs)
        self._row_ids = None  # {table index: the rows its gradient holds} during a JAX row step
        self.table_update = table_update
        self.table_learning_rate = table_learning_rate
        self.table_epsilon = table_epsilon

    def build(self, var_list):
        if self.built:
            return
        keras.optimizers.Optimizer.build(self, var_list)
        tables = [is_table(v) for v in var_list]
        moments = [v if not table or self.table_update == "lazy_adam" else None for v, table in zip(var_list, tables)]
        self._momentums, self._velocities = self._variables_for(moments, ["momentum", "velocity"])
        rowwise = [v if table and self.table_update == "rowwise_adagrad" else None for v, table in zip(var_list, tables)]
        self._accumulators = [None if v is None else self.add_variable(
            (v.shape[0],), initializer="zeros", dtype=v.dtype, name=f"{v.path.replace('/', '_')}_rowwise_accumulator")
            for v in rowwise]
        self._tables = {i for i, table in enumerate(tables) if table}
        if self._tables and keras.backend.backend() == "torch" and keras.config.dtype_policy().name == "mixed_float16":
            raise ZooError("SparseTableAdam under torch with mixed_float16: the loss scale's check cannot read sparse "
                           "gradients; use mixed_bfloat16 (no loss scale) or TensorFlow or JAX")
        for variable, table in zip(var_list, tables):
            if table:
                variable.sparse_rows = weakref.ref(self)  # while this optimizer lives, gather_rows gives it a
                # sparse gradient under torch (a dense optimizer compiled in its place gets dense ones again)
        # (added to what the caller excluded: Keras' exclude_from_weight_decay replaces its set)
        self._exclude_from_weight_decay = set(getattr(self, "_exclude_from_weight_decay", set())) | {
            self._var_key(v) for v, table in zip(var_list, tables) if table}

    def _variables_for(self, variables, names):
        lists = tuple([] for _ in names)
        for variable in variables:
            for values, name in zip(lists, names):
                values.append(None if variable is None else self.add_variable_from_reference(variable, name))
        return lists

    @contextlib.contextmanager
    def row_ids(self, ids):
        """While applying gradients of JAX row steps (zoo.backend_kernels.jax_rows_train_step): {table index:
        the distinct ids [N] (padded with the out-of-range id V) whose rows the table's gradient [N, d] holds}."""
        self._row_ids = ids
        try:
            yield
        finally:
            self._row_ids = None

    def _is_table(self, variable):
        # (TensorFlow's distributed update passes the tf.Variable under a Keras variable: found by its index)
        return self._get_variable_index(variable) in self._tables

    def update_step(self, gradient, variable, learning_rate):
        if not self._is_table(variable):
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        rows = _sparse_rows(gradient)
        if rows is None and self._row_ids is not None and index in self._row_ids:
            rows = (self._row_ids[index], gradient)  # a JAX row step's slab gradient
        if rows is None:  # a dense gradient (JAX, or a table gathered without gather_rows): every row, masked
            ids, g = None, ops.cast(gradient, variable.dtype)
        else:
            ids, g = rows[0], ops.cast(rows[1], variable.dtype)
        touched = ops.any(ops.not_equal(g, 0), axis=-1, keepdims=True)  # [U or V, 1]
        lr = ops.cast(learning_rate if self.table_learning_rate is None else self.table_learning_rate, variable.dtype)
        if self.table_update == "lazy_adam":
            m, v = self._momentums[index], self._velocities[index]
            step = ops.cast(self.iterations + 1, variable.dtype)
            alpha = ops.cast(learning_rate, variable.dtype) * ops.sqrt(
                1 - ops.power(ops.cast(self.beta_2, variable.dtype), step)) / (
                1 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
            m_rows, v_rows, w_rows = (_read_rows(x, ids) for x in (m, v, variable))
            m_new = m_rows + (g - m_rows) * (1 - self.beta_1)
            v_new = v_rows + (ops.square(g) - v_rows) * (1 - self.beta_2)
            w_new = w_rows - alpha * m_new / (ops.sqrt(v_new) + self.epsilon)
            updates = [(m, m_rows, m_new), (v, v_rows, v_new), (variable, w_rows, w_new)]
        elif self.table_update == "rowwise_adagrad":
            a = self._accumulators[index]
            a_rows, w_rows = _read_rows(a, ids), _read_rows(variable, ids)
            a_new = a_rows + ops.mean(ops.square(g), axis=-1)
            w_new = w_rows - lr * g / (ops.sqrt(a_new)[:, None] + self.table_epsilon)
            updates = [(a, a_rows, ops.where(touched[:, 0], a_new, a_rows)), (variable, w_rows, w_new)]
        else:
            w_rows = _read_rows(variable, ids)
            updates = [(variable, w_rows, w_rows - lr * g)]
        for target, old, new in updates:
            if len(new.shape) == 2:
                new = ops.where(touched, new, old)
            self._write_rows(target, ids, new)

    def _write_rows(self, target, ids, values):
        if ids is None:
            self.assign(target, values)
        elif keras.backend.backend() == "jax":  # (a padding id V is out of range: dropped)
            self.assign(target, ops.convert_to_tensor(target).at[ids].set(values, mode="drop"))
        elif keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            _raw(target).scatter_update(tf.IndexedSlices(values, ids))
        else:  # torch
            _raw(target).index_copy_(0, ids, values)

    def _clip_gradients(self, grads):
        """Keras' clipping, of a sparse gradient's rows summed per id (the dense gradient's norm and values)."""
        if not (self.clipnorm or self.global_clipnorm or self.clipvalue):
            return grads
        rows = [None if g is None else _sparse_rows(g) for g in grads]
        clipped = super()._clip_gradients([g if r is None else r[1] for g, r in zip(grads, rows)])
        return [c if r is None else _sparse_gradient(r[0], c, g) for g, r, c in zip(grads, rows, clipped)]

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.backend.backend() != "torch":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import torch
        from keras.src.backend.torch.optimizers import torch_adam  # torch's multi-tensor Adam for dense weights

        with torch.no_grad():
            dense = [(g, v) for g, v in zip(grads, trainable_variables) if not self._is_table(v)]
            if dense:
                torch_adam.Adam._parallel_update_step(self, [g for g, _ in dense], [v for _, v in dense],
                                                      learning_rate)
            for g, v in zip(grads, trainable_variables):
                if self._is_table(v):
                    self.update_step(g, v, learning_rate)

    def get_config(self):
        config = super().get_config()
        config.update({"table_update": self.table_update, "table_learning_rate": self.table_learning_rate,
                       "table_epsilon": self.table_epsilon})
        return config


def _sparse_rows(gradient):
    """(distinct row ids [U], the gradient summed per id [U, D]) of a sparse gradient, else None."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            ids, position = tf.unique(gradient.indices)
            return ids, tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(ids)[0])
    elif backend == "torch" and gradient.is_sparse:
        gradient = gradient.coalesce()
        return gradient.indices()[0], gradient.values()
    return None


def _sparse_gradient(ids, values, like):
    """A sparse gradient of the rows `ids` (distinct) with `values`, of the kind and shape of `like`."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.IndexedSlices(values, ids, like.dense_shape)
    import torch

    return torch.sparse_coo_tensor(ids[None, :], values, like.shape, check_invariants=True, is_coalesced=True)


def _read_rows(variable, ids):
    """The rows `ids` of `variable` (all of it for ids None), read without copying the rest."""
    if ids is None:
        return ops.convert_to_tensor(variable)
    if keras.backend.backend() == "jax":
        import jax.numpy as jnp

        return jnp.take(ops.convert_to_tensor(variable), ids, axis=0, mode="fill", fill_value=0)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.gather(_raw(variable), ids)  # a ResourceGather: the rows only
    return _raw(variable).index_select(0, ids)


def _raw(variable):
    """The backend's variable under a Keras variable (TensorFlow's update step may pass either)."""
    return variable.value if isinstance(variable, keras.Variable) else variable
