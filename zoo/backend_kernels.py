"""Backend-specific kernels behind keras.ops-only layers: the one place the zoo calls a backend directly.

`layers/` and `zoo/models/` use keras.ops only; where one backend's kernel for a keras op is much slower
than an equivalent it has, the layer calls a function here, which gives the keras.ops result on every
other backend.
"""

import keras
from keras import ops


def gather_rows(table, ids):
    """`table(ids)` for a keras.layers.Embedding `table`: its rows at `ids`, [*ids.shape, d], in its compute dtype.

    Under torch a float table (not quantized, no LoRA) is gathered with `torch.index_select` on int64 ids:
    the same rows as the layer's `F.embedding` (negative ids wrap, as keras.ops.take's), but its backward is
    `index_add_`, where F.embedding's is CPU `embedding_dense_backward`: 2.7x slower at 51,200 ids into a
    [1351, 32] table and 30x into a [1351, 1] one (`benchmarks/torch_step_cost.py --model deepfm` prints
    both). `layers/feature_embedding_test.py` checks the rows and the table's gradient. A table that
    zoo.recipes.SparseTableAdam was built on (`sparse_rows`) is gathered with `F.embedding(sparse=True)`:
    its gradient is then a sparse tensor of the batch's rows, not a dense [V, d] one.
    """
    if keras.backend.backend() != "torch" or table.quantization_mode is not None or table.lora_enabled:
        return table(ids)
    import torch

    weights = ops.convert_to_tensor(table.embeddings)
    index = ops.cast(ops.reshape(ids, (-1,)), "int64")  # with int32 ids index_add_ takes a 5x slower path
    index = ops.where(index < 0, index + weights.shape[0], index)
    if getattr(table.embeddings, "sparse_rows", False):
        rows = torch.nn.functional.embedding(index, weights, sparse=True).reshape(*ids.shape, weights.shape[-1])
    else:
        rows = torch.index_select(weights, 0, index).reshape(*ids.shape, weights.shape[-1])
    return ops.cast(rows, table.compute_dtype)
