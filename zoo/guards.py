"""What keeps a model usable behind a live endpoint, on every backend: its entry points run one call at a
time, a failed call keeps the weights, running out of memory is one line, and building a config stops
at a bound on its parameters before allocating them.

- `entry_lock(model)`: a ZooModel's re-entrant lock. Every entry point (`score`, `predict`,
  `predict_on_batch`, `model(features)` on NumPy, `score_candidates`, ReST's `encode`/`decode`) holds it
  through `ZooModel.run_predictor`, so threads sharing one model are served one call at a time. Under
  JAX, Keras' `predict` detaches the weights while it runs (see `run_predictor`) and its compiled
  predict takes them donated: a second thread reading them meanwhile fails ("Array has been deleted",
  "'NoneType' object is not callable") or waits forever on a donated buffer.
- `compile_predict_keeping_weights(model)`: under JAX, Keras compiles predict with its state donated
  (`donate_argnums=0`): XLA may free the weights' buffers as the call starts, so a call that then fails
  (out of memory) would leave every weight deleted ("Array has been deleted" on every later call). The
  zoo compiles predict's outputs alone, with nothing donated and no weight copied.
- `out_of_memory(error)`: whether a backend error is an allocation failure (JAX RESOURCE_EXHAUSTED,
  TensorFlow's ResourceExhaustedError, torch's OutOfMemoryError or CPU allocator error, MemoryError).
- `parameter_budget(limit)`: while a model is built inside it, each weight is counted as it is
  declared and the one that would take the total beyond `limit` is refused before it is allocated
  (`zoo.presets.build` builds every model of `zoo.get` and `zoo.load` inside one).
"""

import contextlib
import functools
import math
import operator
import re
import threading

from zoo.errors import ZooError

_CREATING = threading.Lock()


class _EntryLock:
    """The holder of a model's lock; a copied or unpickled model gets a lock of its own."""

    def __init__(self):
        self.lock = threading.RLock()

    def __reduce__(self):
        return (_EntryLock, ())


def entry_lock(model):
    """The re-entrant lock of `model`'s entry points (made on first use, one per model)."""
    holder = model.__dict__.get("_zoo_entry_lock")
    if holder is None:
        with _CREATING:
            holder = model.__dict__.setdefault("_zoo_entry_lock", _EntryLock())
    return holder.lock


def compile_predict_keeping_weights(model):
    """Under JAX, gives `model` (unless it has one already) a predict function whose compiled step returns the
    outputs only and takes nothing donated: the weights go in as arguments and the same arrays are handed
    back to Keras' predict loop, so a call that fails leaves them intact and none is copied. Inference
    changes no weight (the non-trainable values a step returns are those it was given). A no-op on the
    other backends, which never donate."""
    import keras

    if keras.backend.backend() != "jax" or getattr(model.predict_function, "keeps_weights", False):
        return
    import jax

    def outputs(state, data):
        return model.predict_step(state, data)[0]

    if model.jit_compile and not model.run_eagerly:
        outputs = jax.jit(outputs)

    def step(state, data):
        return outputs(state, data), state

    model.predict_function = model._make_function(step, concatenate_outputs=True)
    model.predict_function.keeps_weights = True


_OOM_TYPES = ("MemoryError", "ResourceExhaustedError", "OutOfMemoryError")
_OOM_TEXT = re.compile(r"RESOURCE_EXHAUSTED|out of memory|can't allocate memory|OOM when allocating", re.I)
_BYTES = re.compile(r"(\d{7,}) bytes")


def out_of_memory(error):
    """Whether `error` (any backend's) says an allocation failed."""
    return type(error).__name__ in _OOM_TYPES or bool(_OOM_TEXT.search(str(error)))


_TENSOR = re.compile(r"shape ?\[([\d,]+)\] and type (\w+)")  # TensorFlow's "OOM when allocating tensor with ..."


def allocation(error):
    """' (an allocation of 7.0 GB failed)' when the backend's message gives the size, else ''."""
    import numpy as np

    text = str(error)
    sizes = [int(n) for n in _BYTES.findall(text)]
    for shape, dtype in _TENSOR.findall(text):
        try:
            sizes.append(math.prod(int(n) for n in shape.split(",")) * np.dtype(dtype).itemsize)
        except TypeError:
            continue
    if not sizes:
        return ""
    size = max(sizes)
    amount = f"{size / 1e9:.1f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"
    return f" (an allocation of {amount} failed)"


# ---------------------------------------------------------------------- the parameter budget
_BUDGET = threading.local()
_INSTALLING = threading.Lock()
_INSTALLED = []


class _Budget:
    def __init__(self, limit):
        self.limit, self.spent, self.refusal = limit, 0, None


def _dimensions(shape):
    """A declared weight shape as a list of ints, or None when it is not one (Keras then refuses it)."""
    try:
        return [operator.index(n) for n in (shape if isinstance(shape, (tuple, list)) else [shape])]
    except TypeError:
        return None


def _counting(add_weight):
    """Layer.add_weight, counting each weight against the budget of the thread's current build."""

    @functools.wraps(add_weight)
    def counted(layer, *args, shape=None, name=None, **kwargs):
        budget = getattr(_BUDGET, "current", None)
        declared = _dimensions(shape if shape is not None else (args[0] if args else ()))
        if budget is not None and declared is not None:
            size = math.prod(declared)
            if budget.spent + size > budget.limit:
                budget.refusal = (
                    f"more than {budget.limit:,} parameters (zoo.presets.MAX_PARAMETERS): weight "
                    f"'{getattr(layer, 'path', layer.name)}/{name}' of shape {list(declared)} brings it to "
                    f"{budget.spent + size:,}; shrink the widths, layers or vocabularies"
                )
                raise ZooError(budget.refusal)
            budget.spent += size
        return add_weight(layer, *args, shape=shape, name=name, **kwargs)

    return counted


@contextlib.contextmanager
def parameter_budget(limit):
    """Yields the budget of the models built inside (this thread): `refusal` is the one-line reason
    when a weight was refused (Keras may have wrapped the ZooError raised then in a longer message)."""
    import keras

    with _INSTALLING:
        if not _INSTALLED:
            keras.layers.Layer.add_weight = _counting(keras.layers.Layer.add_weight)
            _INSTALLED.append(True)
    outer = getattr(_BUDGET, "current", None)
    _BUDGET.current = budget = _Budget(limit)
    try:
        yield budget
    finally:
        _BUDGET.current = outer
