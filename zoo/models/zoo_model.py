import inspect

import keras

from zoo.errors import ZooError
from zoo.schema import Schema


class ZooModel(keras.Model):
    """Base of the zoo's registered models: a functional `keras.Model` built from a Schema.

    A subclass builds its graph in `__init__` from plain hyperparameters, keeps one attribute per
    argument and calls `super().__init__(inputs=..., outputs=...)`; `get_config` then returns exactly
    those arguments (the Schema as a dict), so a preset's config.json is readable and `from_config`
    is `cls(**config)`.
    """

    registered_name = None

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
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def score(self, features, batch_size=None):
        """Validates a batch against the Schema (one-line errors, before any backend call), then returns
        `predict` as NumPy. A rejected or failed call leaves the model as usable as before."""
        schema = self.schema
        features = schema.validate(features, empty_ok=False)
        m = {v.shape[1] for k, v in features.items() if k.startswith("cand")}
        if m and m != {schema.num_candidates}:
            raise ZooError(
                f"{self.registered_name} was built for {schema.num_candidates} candidate(s) per row "
                f"but the batch has {m.pop()}"
            )
        return self.run_predictor(lambda: self.predict(features, batch_size=batch_size, verbose=0))

    def run_predictor(self, call, model=None):
        """Runs `call` (a predict of `model`, default this one) so that a failure leaves the model as it
        was. Under JAX, Keras' predict detaches ("purges") the variables' values while it runs and puts
        them back only at the end, so a call that fails inside the backend would leave every weight empty
        (each later call: "'NoneType' object is not callable"); the values are put back here, and the
        compiled predict function is dropped."""
        model = self if model is None else model
        values = [variable.value for variable in model.variables]  # references, not copies
        try:
            return call()
        except Exception:
            for variable, value in zip(model.variables, values):
                variable.assign(value)
            model.predict_function = None
            raise

    def save_to_preset(self, directory, metadata=None, preprocessing=None):
        """Writes config.json, metadata.json, model.weights.h5 (and preprocessing.json when a fitted
        `preprocessing` is given) to `directory` (see zoo.presets)."""
        from zoo import presets

        presets.save(self, directory, metadata=metadata, preprocessing=preprocessing)
