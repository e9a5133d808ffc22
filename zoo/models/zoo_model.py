import functools
import inspect
import numbers
import os

import keras
import numpy as np

import zoo.backend_kernels as backend_kernels
import zoo.guards as guards
import zoo.hyperparameters as hyperparameters
from zoo.errors import ZooError
from zoo.layers.calibration import Calibration
from zoo.schema import Schema


def _is_array(value):
    return isinstance(value, np.ndarray) or keras.ops.is_tensor(value)


def _is_tf_data(value):
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec") and hasattr(value, "map")


BATCH_REFUSAL = "assertion failed: [a batch of the data: "


def _batch_refusal(error):
    """The one-line ZooError of a batch `Schema.batch_check` refused (InvalidArgumentError from the input
    pipeline, under any backend: "... assertion failed: [a batch of the data: <line>]"), or None."""
    for line in str(error).splitlines():
        start = line.find(BATCH_REFUSAL)
        if start >= 0:
            return ZooError(line[start + len("assertion failed: ["):].rstrip().removesuffix("]"))
    return None


def _variant_init(cls):
    """The `__init__` of a variant `cls` (ZooModel's docstring): the parent's signature with the defaults of
    `cls.defaults`, filled in and passed on to the parent's `__init__` (which checks every value once)."""
    parent = cls.__mro__[1].__init__
    signature = inspect.signature(parent)
    unknown = sorted(set(cls.defaults) - set(signature.parameters))
    if unknown:
        raise TypeError(f"{cls.__name__}.defaults names {unknown}, which {cls.__mro__[1].__name__} does not take")
    signature = signature.replace(parameters=[
        p.replace(default=cls.defaults[name]) if name in cls.defaults else p for name, p in signature.parameters.items()])

    def __init__(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        self = arguments.pop("self")
        keywords = {}
        for name, p in signature.parameters.items():
            if p.kind is p.VAR_KEYWORD:
                keywords = arguments.pop(name, {})
        parent(self, **arguments, **keywords)

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = f"{cls.__mro__[1].__name__}'s arguments, with the defaults {cls.defaults}."
    __init__.declares_hyperparameters = True
    return __init__


def _verbose(verbose):
    """Keras' verbose ("auto", None, 0, 1, 2) as the raw-row readers' (1 a progress bar, 2 a line, 0 none)."""
    if verbose in ("auto", None):
        return 1
    if verbose not in (0, 1, 2) or isinstance(verbose, float):
        raise ZooError(f"verbose is {verbose!r}; it must be 'auto', 0, 1 or 2")
    return int(verbose)


def _is_tensor(value):
    """A backend tensor or a KerasTensor (a trace or a symbolic call), not a request's NumPy array."""
    return keras.ops.is_tensor(value) or isinstance(value, keras.KerasTensor)


class ZooModel(backend_kernels.RowSteps, keras.Model):
    """Base of the zoo's registered models: a functional `keras.Model` built from a Schema.

    A subclass builds its graph in `__init__` from plain hyperparameters and calls
    `super().__init__(inputs=..., outputs=...)`. Its hyperparameters are declared once, by that
    signature (name and default) and, for the kind of check, by the name's rule in
    `zoo.hyperparameters.RULES` (one rule per name for every model). The base does the bookkeeping
    around the model (`__init_subclass__` wraps the subclass's `__init__`): every argument is checked
    by its rule and normalised (a bad value is one line "<model>: <name> is ..."), the schema made a
    `Schema`, and once the graph is built each argument is kept as the attribute of its name.
    `get_config` then returns exactly those arguments (the Schema as a dict), so a preset's config.json
    is readable and `from_config` is `cls(**config)`. A model keeps only its own checks that involve
    several values or its own range (width divisible by num_heads, k <= L).

    A variant is its parent with other defaults, declared as such: a subclass with no `__init__` and a
    class attribute `defaults = {name: value}` (LightSUAN: SUAN with window_size 8, dilation 2 and 32
    parallel candidates) takes the parent's hyperparameters, with those defaults (`_variant_init`).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None and "defaults" in cls.__dict__:
            cls.__init__ = _variant_init(cls)
            return
        if init is None or getattr(init, "declares_hyperparameters", False):
            return
        signature = inspect.signature(init)
        names = [name for name, p in signature.parameters.items()
                 if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]

        @functools.wraps(init)
        def __init__(*args, **kwargs):  # (self is args[0]: no positional parameter, so the copied defaults below
            self = args[0]              # are only read by introspection, never filled in)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = {name: bound.arguments[name] for name in names}
            if "schema" in values:
                values["schema"] = Schema.from_dict(values["schema"])
            values = hyperparameters.declared(self.registered_name or cls.__name__, values, type(self).required)
            bound.arguments.update(values)
            init(*bound.args, **bound.kwargs)
            for name, value in values.items():
                setattr(self, name, value)

        __init__.__defaults__, __init__.__kwdefaults__ = init.__defaults__, init.__kwdefaults__  # as the class's own
        __init__.declares_hyperparameters = True
        cls.__init__ = __init__

    registered_name = None
    # hyperparameters added after presets were written: {name: the value a config without the name meant}, so
    # a preset written before builds the graph its weights were trained in (presets._build_from_folder,
    # from_config); a fresh model takes the class default
    written_before = {}
    required = ()  # hyperparameters whose rule admits None (zoo.hyperparameters) that this model needs a value for
    @staticmethod
    def attention_scores(L, M, F, hyperparameters):
        """Attention scores one row holds per head and layer, for the step's memory budget (zoo.budget), from
        L (history), M (candidates), F (fields outside the history) and the hyperparameters: 0 for a model
        with no attention over the history. Each model with attention states its own."""
        return 0

    preprocessor = None  # a preset's data contract (zoo.datasets.Preprocessor), attached by zoo.load / zoo.get

    def __init__(self, inputs, outputs, calibration=None, **kwargs):
        """The functional graph `inputs` -> `outputs` (pctr [B, M]); with `calibration` (the config of a
        `zoo.layers.Calibration`: {"method", "slope", "intercept"}, fitted by `zoo.recipes.calibration`)
        the output goes through that layer too, so predict, score and every export return calibrated
        probabilities."""
        layer = None
        if calibration is not None:
            if not isinstance(calibration, dict) or not set(calibration) <= {"method", "slope", "intercept"}:
                raise ZooError(
                    f"calibration is {calibration!r}; it must be None or a dict of method, slope and intercept"
                )
            layer = Calibration(**calibration, name="calibration")
            outputs = layer(outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.calibration_layer = layer

    @property
    def calibration(self):
        """{"method", "slope", "intercept"} of the model's post-hoc calibration, or None."""
        layer = self.calibration_layer
        return None if layer is None else {"method": layer.method, "slope": layer.slope, "intercept": layer.intercept}

    def calibrate(self, pctr):
        """`pctr` through the model's calibration (unchanged without one), in keras.ops: for the scoring
        paths that do not run the functional graph's output (SUAN's score_all, ReST's decoder)."""
        return pctr if self.calibration_layer is None else self.calibration_layer(pctr)

    def with_calibration(self, calibration):
        """A copy of this model (same config and weights) with `calibration` instead of its own; None gives
        the uncalibrated model (the one to train further)."""
        config = self.get_config()
        config.pop("calibration", None)
        model = type(self).from_config({**config, "calibration": calibration} if calibration else config)
        model.set_weights(self.get_weights())
        model.preprocessor = self.preprocessor
        return model

    @classmethod
    def hyperparameter_names(cls):
        parameters = inspect.signature(cls.__init__).parameters
        return [
            name
            for name, p in parameters.items()
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable}
        for name in self.hyperparameter_names():
            value = getattr(self, name)
            if isinstance(value, Schema):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            config[name] = value
        if self.calibration is not None:
            config["calibration"] = self.calibration
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**{**cls.written_before, **config})

    # ------------------------------------------------------------------ entry points
    def raw_rows(self, x):
        """Whether `x` is raw rows for the model's preprocessor rather than data in the input contract: a
        path (text or os.PathLike), a pandas DataFrame, a pyarrow Table, a list of dicts, or a dict none of
        whose keys is a contract key (with a preprocessor; a dict is otherwise a batch)."""
        from zoo.datasets import in_memory

        if isinstance(x, (str, os.PathLike)):
            return True
        if isinstance(x, dict):
            return self.preprocessor is not None and not set(map(str, x)) & set(self.schema.keys())
        return in_memory.is_rows(x)

    def fit(self, x=None, y=None, *args, history_from=None, **kwargs):
        """keras.Model.fit. Raw rows (a path, a pandas DataFrame, a pyarrow Table, a dict of columns or a list
        of dicts; `raw_rows`) go through the model's preprocessor with its fitted vocabularies
        (zoo.recipes.raw_rows.training_data: shuffled by `seed` (default 0; `shuffle=False` keeps their
        order), `batch_size` rows a batch, default 1024; `validation_data` may be raw rows too;
        `history_from`: earlier logs for the rows' histories).
        Data in the contract is guarded as `predict`'s is (see `guarded_source`): a bad value in a batch is
        one ZooError line naming the key, never a backend traceback or a silent NaN."""
        if self.raw_rows(x):
            from zoo.recipes.raw_rows import training_data

            validation = kwargs.pop("validation_data", None)
            if y is not None or args:
                raise ZooError("raw rows carry their labels: fit(rows, epochs=..., ...) takes no y")
            with training_data(self, x, validation, history_from=history_from,
                               batch_size=kwargs.pop("batch_size", None) or 1024, shuffle=kwargs.pop("shuffle", True),
                               seed=kwargs.pop("seed", 0)) as (train, val):
                return self.fit(train, validation_data=val, **kwargs)
        if history_from is not None:
            raise ZooError("history_from goes with raw rows (a path or rows in memory), not data in the input contract")
        if _is_tf_data(kwargs.get("validation_data")):
            kwargs["validation_data"] = self.guarded_source(kwargs["validation_data"])
        rest = (y, *args) if y is not None or args else ()
        return self._refusing(lambda: super(ZooModel, self).fit(self.guarded_source(x), *rest, **kwargs))

    def evaluate(self, x=None, y=None, *args, history_from=None, report_path=None, plots_dir=None, **kwargs):
        """keras.Model.evaluate, with its data guarded as `fit`'s is. Raw rows (`raw_rows`) give the report
        `python -m zoo evaluate` prints and writes (zoo.recipes.raw_rows.evaluate_rows: AUC, LogLoss, GAUC
        by the raw user, calibration, and with `history_from` the trivial baselines on the same rows);
        `report_path` (JSON) and `plots_dir` (figures) write it."""
        if self.raw_rows(x):
            from zoo.recipes.raw_rows import evaluate_rows

            if y is not None or args:
                raise ZooError("raw rows carry their labels: evaluate(rows) takes no y")
            ignored = sorted(set(kwargs) - {"batch_size", "verbose"})
            if ignored:
                raise ZooError(f"evaluate(rows) gives the metrics report and takes no {', '.join(ignored)}")
            return evaluate_rows(self, x, history_from=history_from, report_path=report_path, plots_dir=plots_dir,
                                 batch_size=kwargs.get("batch_size") or 1024, verbose=_verbose(kwargs.get("verbose")))
        if history_from is not None or report_path is not None or plots_dir is not None:
            raise ZooError("history_from, report_path and plots_dir go with raw rows (a path or rows in memory)")
        rest = (y, *args) if y is not None or args else ()
        return self._refusing(lambda: super(ZooModel, self).evaluate(self.guarded_source(x), *rest, **kwargs))

    def guarded_source(self, x):
        """The Keras data path guarded as the exported signatures are, but refusing instead of repairing: a
        dict of arrays is validated here (`checked`: one ZooError line); a tf.data.Dataset (the zoo's
        pipelines, any backend) is mapped through `Schema.batch_check`, so a batch with an id outside its
        vocabulary or a non-finite numeric stops the call with one line (`_refusing`) before any backend
        sees it (unguarded: TensorFlow raised an 80-line InvalidArgumentError, JAX scored NaN and trained on
        it, torch an IndexError). Other sources (generators, a keras.utils.PyDataset), and a tf.data.Dataset
        under a `keras.distribution` (which must read the batch size from the dataset's own batching, which
        a map hides), are passed on as they are: validate their batches with `model.schema.validate` when
        they may be bad."""
        if isinstance(x, dict):
            return self.checked(x)
        if _is_tf_data(x) and keras.distribution.distribution() is None:
            check = self.schema.batch_check

            def checked(*batch):
                if len(batch) == 1:
                    return check(batch[0]) if isinstance(batch[0], dict) else batch[0]
                return (check(batch[0]) if isinstance(batch[0], dict) else batch[0],) + tuple(batch[1:])

            from zoo.datasets.pipeline import map_graph_only

            return map_graph_only(x, checked)  # (the source's options kept: no autotuning thread, ...)
        return x

    def _refusing(self, call, keep_state=True):
        """Runs `call` (a fit, evaluate or predict); a batch that `Schema.batch_check` refused becomes its
        one-line ZooError. With `keep_state` (fit, evaluate), whatever fails, the model stays usable: under
        JAX, Keras detaches ("purges") the variables' values while it trains or evaluates and puts them back
        only at the end, so they are put back here (the last completed step's state, else the values before
        the call). predict's own `run_predictor` does this for predict, under the model's lock."""
        tracked, before = [], []
        if keep_state:
            tracked = list(self.variables)
            if getattr(self, "optimizer", None) is not None:
                tracked += list(self.optimizer.variables)
            before = [getattr(variable, "_value", None) for variable in tracked]  # references, not copies
        try:
            return call()
        except Exception as error:
            sync = getattr(self, "jax_state_sync", None)
            if keep_state and sync is not None and getattr(self, "_jax_state", None):
                sync()
                self._jax_state = None
            for variable, value in zip(tracked, before):
                if getattr(variable, "_value", True) is None and value is not None:
                    variable.assign(value)
            refusal = _batch_refusal(error)
            if refusal is None:
                raise
            raise refusal from None

    def score(self, features, batch_size=None):
        """pctr [B, M] of a batch in the contract, as NumPy: `predict` without Keras' progress bar (validated,
        one call at a time; a rejected or failed call leaves the model as usable as before)."""
        return self.predict(features, batch_size=batch_size, verbose=0)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, *, history_from=None):
        """keras.Model.predict, guarded like every entry point: a dict of arrays is validated against the
        Schema first (`checked`: one-line ZooError, before any backend call); a tf.data.Dataset or another
        Keras data source is passed on (its keys are checked as each batch reaches the model); the call
        runs through `run_predictor` (one call at a time, the model as usable after a failure).

        Raw rows (`raw_rows`: a path, a pandas DataFrame, a pyarrow Table, a dict of columns, a list of dicts)
        go through the model's preprocessor and give one score per row, float32 [N], as `python -m zoo score`
        writes them (zoo.recipes.raw_rows.score_rows): rows in memory in their order (NaN, with a warning,
        for a row the reading drops), a path's rows in file order. `history_from`: earlier logs (a path or
        a list) whose rows build the histories and running statistics of these rows."""
        if self.raw_rows(x):
            from zoo.recipes.raw_rows import score_rows

            if steps is not None or callbacks is not None:
                raise ZooError("raw rows are scored whole: predict(rows) takes no steps or callbacks")
            return score_rows(self, x, history_from=history_from, batch_size=batch_size or 1024,
                              verbose=_verbose(verbose)).scores
        if history_from is not None:
            raise ZooError("history_from goes with raw rows (a path or rows in memory), not data in the input contract")
        x = self._checked_input(x)  # a dict validated here; a tf.data.Dataset mapped through the batch check
        x = self.guarded_source(x) if _is_tf_data(x) else x
        return self._refusing(lambda: self.run_predictor(
            lambda: super(ZooModel, self).predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                                                  callbacks=callbacks)
        ), keep_state=False)

    def predict_on_batch(self, x):
        """keras.Model.predict_on_batch, guarded like `predict`."""
        x = self._checked_input(x)
        return self.run_predictor(lambda: super(ZooModel, self).predict_on_batch(x))

    def __call__(self, *args, **kwargs):
        """keras.Model.__call__. A dict must hold exactly the Schema's keys (an extra key would shift the
        others onto the wrong inputs); a dict of NumPy arrays or lists (a request, not the tensors of a
        trace) is validated like `score`'s and run under the model's lock."""
        inputs = args[0] if args else None
        if isinstance(inputs, dict):
            self.schema.check_keys(inputs)
            if not any(_is_tensor(value) for value in inputs.values()):
                features = self.checked(inputs)
                with guards.entry_lock(self):
                    return super().__call__(features, *args[1:], **kwargs)
            self._warn_repairs(inputs)
        elif isinstance(inputs, (list, tuple, np.ndarray)) and not any(map(_is_tensor, keras.tree.flatten(inputs))):
            raise ZooError(f"features must be a dict of named arrays, got {type(inputs).__name__}")
        return super().__call__(*args, **kwargs)

    def call(self, inputs, training=None, mask=None, **kwargs):
        """The functional graph, behind the request guard the exported signatures run (zoo/serving/guard.py):
        an id outside [0, vocabulary_size) (a negative one too) reads the OOV row, a NaN or infinite numeric
        reads 0 (the transformed feature's fill, its mean once standardised), a numeric beyond +-1e9 is
        clipped. The checked entry points (predict, fit, evaluate, a dict of NumPy arrays) refuse such
        values before they get here; `model(tensors)`, the plain Keras call, is repaired (and warned,
        `_warn_repairs`) as a server would. A dict must hold exactly the Schema's keys (under JAX, predict
        and fit reach the graph through here, not through `__call__`)."""
        if isinstance(inputs, dict):
            from zoo.serving import guard

            self.schema.check_keys(inputs)
            inputs, _ = guard.repair(self.schema, inputs)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def _warn_repairs(self, features):
        """Warns (one line) when a plain call's concrete tensors hold values `call` repairs, with their counts
        (the exported signatures' `repaired_ids` and `repaired_numerics`); traced tensors pass silently."""
        import warnings

        from zoo.serving import guard

        if any(isinstance(value, keras.KerasTensor) for value in features.values()):
            return
        try:
            _, counts = guard.repair(self.schema, {k: v for k, v in features.items() if k in set(self.schema.keys())})
            ids, numerics = (int(np.sum(keras.ops.convert_to_numpy(counts[key])))
                             for key in ("repaired_ids", "repaired_numerics"))
        except (TypeError, ValueError, AttributeError, NotImplementedError):  # a traced call: no values to count
            return
        if ids or numerics:
            warnings.warn(f"{self.registered_name}: {ids} id(s) outside their vocabulary read the OOV row and "
                          f"{numerics} non-finite or out-of-range numeric(s) were repaired, as the exported "
                          "signatures do (repaired_ids, repaired_numerics); predict refuses them instead",
                          stacklevel=3)

    def checked(self, features):
        """`features` validated for this model: `Schema.validate` (every scoring entry point's checks,
        B >= 1 and M >= 1) and the M the model was built for. Returns the NumPy batch."""
        schema = self.schema
        features = schema.validate(features, empty_ok=False)
        m = {v.shape[1] for k, v in features.items() if k.startswith("cand")}
        if m and m != {schema.num_candidates}:
            raise ZooError(
                f"{self.registered_name} was built for {schema.num_candidates} candidate(s) per row "
                f"but the batch has {m.pop()}"
            )
        return features

    def _checked_input(self, x):
        """predict's input: a dict is `checked`; a value that is neither a dict nor a source of batches
        (arrays or lists, not named; None, text, numbers) is refused; a source of batches (a
        tf.data.Dataset, a generator, a PyDataset) is Keras'."""
        if isinstance(x, dict):
            return self.checked(x)
        if x is None or isinstance(x, (str, bytes, numbers.Number, list, tuple, set)) or _is_array(x):
            raise ZooError(f"features must be a dict of named arrays, got {type(x).__name__}")
        return x

    def run_predictor(self, call, model=None):
        """Runs `call` (a predict of `model`, default this one) under the model's lock (zoo.guards) so
        that a failure leaves the model as it was. Under JAX, Keras' predict detaches ("purges") the
        variables' values while it runs and puts them back only at the end, so a call that fails inside
        the backend would leave every weight empty (each later call: "'NoneType' object is not callable");
        the values are put back here (the predict function is compiled without donating them, so they
        outlive a failed call), and the compiled predict function is dropped. Running out of memory is
        one ZooError line saying what to shrink."""
        model = self if model is None else model
        with guards.entry_lock(self):
            guards.compile_predict_keeping_weights(model)
            values = [variable.value for variable in model.variables]  # references, not copies
            try:
                return call()
            except Exception as error:
                for variable, value in zip(model.variables, values):
                    variable.assign(value)
                model.predict_function = None
                if guards.out_of_memory(error):
                    raise ZooError(
                        f"{self.registered_name} ran out of memory on this request{guards.allocation(error)}: "
                        f"send fewer rows or candidates per call (batch_size, rows_per_call), or use a model "
                        f"built for a shorter history than L = {self.schema.sequence_length}"
                    ) from None
                raise

    def save_to_preset(self, directory, metadata=None, preprocessing=None):
        """Writes config.json, metadata.json, model.weights.h5 and preprocessing.json (the fitted
        `preprocessing` given, else the model's own `preprocessor`, when it has one) to `directory` (see
        zoo.presets)."""
        from zoo import presets

        if preprocessing is None and self.preprocessor is not None:
            preprocessing = self.preprocessor.state
        presets.save(self, directory, metadata=metadata, preprocessing=preprocessing)
