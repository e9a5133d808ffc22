"""The range of every hyperparameter the registered models take, by name, checked once as a model is built.

`ZooModel` checks every argument of a model's `__init__` by its rule (`declared`) before the model's own
code runs (under `zoo.get`, `zoo.load`, `python -m zoo fit/tune --set`), so a bad value is one line
naming the key, before anything is built or trained; the command line checks `--set` values by the same
rules before a backend loads (`overrides`, reading the model's declarations from its source:
zoo.declarations): `dice_momentum is nan; it must be a finite number in [0, 1)`. One rule per name for
every model alike. Numbers are never converted from text: `window_size="8"` is refused
(`window_size is '8' (text); it must be an integer >= 1 or None`), as are booleans where numbers belong
and floats where integers do (8.0). Choices among names (alignment_pool="causal", ...) are strings here;
the model checks the name. A rule that admits None (ffn_dim: bst's default) is made strict for a model
that declares the name in its class attribute `required` (llama, transformer, stca need a width). A
model's own checks that involve several values (width divisible by num_heads, k <= L) stay in the model.
"""

import dataclasses
import math
import numbers

from zoo.errors import ZooError


@dataclasses.dataclass(frozen=True)
class Rule:
    """kind: "int", "number" (finite), "units" (a list of ints), "bool" or "text"; numbers lie in
    [low, high] (`open_low` / `open_high` leave the bound out); `optional`: None is allowed too."""

    kind: str
    low: float = None
    high: float = None
    open_low: bool = False
    open_high: bool = False
    optional: bool = False

    def describe(self):
        if self.kind in ("bool", "text"):
            text = {"bool": "True or False", "text": "a string (a name)"}[self.kind]
        else:
            noun = {"int": "an integer", "number": "a finite number", "units": "a list of integers"}[self.kind]
            if self.low is not None and self.high is not None:
                interval = f"{'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"
                text = f"{noun} in {interval}"
            elif self.low is not None:
                text = f"{noun} {'>' if self.open_low else '>='} {self.low:g}"
            else:
                text = noun
        return text + (" or None" if self.optional else "")

    def admits(self, value):
        if value is None:
            return self.optional
        if self.kind == "bool":
            return isinstance(value, bool) or type(value).__name__ == "bool_"
        if self.kind == "text":
            return isinstance(value, str)
        if self.kind == "units":
            return isinstance(value, (list, tuple)) and all(self._number(v, integer=True) for v in value)
        return self._number(value, integer=self.kind == "int")

    def _number(self, value, integer):
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return False
        if not isinstance(value, numbers.Integral if integer else numbers.Real):
            return False
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return False
        return self.high is None or (value < self.high if self.open_high else value <= self.high)


SIZE = Rule("int", low=1)
OPTIONAL_SIZE = Rule("int", low=1, optional=True)
UNITS = Rule("units", low=1)
FRACTION = Rule("number", low=0, high=1, open_high=True)
NAME = Rule("text")

RULES = {
    # sizes and counts
    "attention_dim": SIZE, "block_size": SIZE, "decoder_depth": SIZE, "dilation": SIZE, "encoder_depth": SIZE,
    "expansion": SIZE, "expansion_rate": Rule("int", low=2), "feed_dim": SIZE, "head_dim": SIZE,
    "inter_residual_interval": SIZE, "k": SIZE, "linear_dim": SIZE, "model_dim": SIZE, "num_bits": SIZE,
    "num_blocks": SIZE, "num_cross_layers": SIZE, "num_heads": SIZE, "num_layers": SIZE, "num_ns_tokens": SIZE,
    "orders": SIZE, "parallel_candidates": SIZE, "position_dim": SIZE, "reduction_ratio": SIZE,
    "sinkhorn_iterations": SIZE, "time_buckets": SIZE, "time_embedding_dim": SIZE, "width": SIZE,
    "ffn_dim": OPTIONAL_SIZE, "projection_dim": OPTIONAL_SIZE, "window_size": OPTIONAL_SIZE,
    # hidden widths; time granularities in seconds (0: a RoPE head)
    "attention_units": UNITS, "micro_mlp_units": UNITS, "mlp_units": UNITS,
    "time_granularities": Rule("units", low=0, optional=True),
    # rates and temperatures
    "dice_momentum": FRACTION, "dropout": FRACTION, "sample_rate": Rule("number", low=0, high=1, open_low=True),
    "temperature": Rule("number", low=0, open_low=True),
    # switches and names
    "first_order": Rule("bool"), "share_relative_bias": Rule("bool"), "alignment_pool": NAME, "bilinear_type": NAME, "feed": NAME,
    "fusion": NAME, "residual_matrix": NAME, "structure": NAME, "weighting": NAME,
}


def _kind(value):
    """What `value` is, when its repr alone does not say (a string that reads like a number)."""
    if isinstance(value, str):
        return " (text)"
    if isinstance(value, bool):
        return " (a boolean)"
    return ""


def rule_of(name, required=()):
    """The rule of hyperparameter `name` (None without one), strict about None where `required` names it."""
    rule = RULES.get(name)
    return dataclasses.replace(rule, optional=False) if rule is not None and name in required else rule


def check_names(model, values, names):
    """Refuses, in one line, a name of `values` that `model` (its registered name) does not take (`names`)."""
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ZooError(f"{model} has no hyperparameter {', '.join(unknown)} (hyperparameters: {', '.join(names)})"
                       f"{did_you_mean(unknown, names)}")


def overrides(model, values, names, required=()):
    """Refuses, in one line, hyperparameter `values` (name -> value) that `model` (its registered name) does not
    take (`names`: its hyperparameters) or whose value is outside its rule; the checks `zoo.get` and
    `declared` make, for the command line's `--set` before a backend loads."""
    check_names(model, values, names)
    declared(f"{model} hyperparameters", values, required)


def did_you_mean(names, known):
    """"; did you mean 'x'?" for the first of `names` close to one of `known`, else ""."""
    import difflib

    close = difflib.get_close_matches(str(names[0]), known, n=1) if names else []
    return f"; did you mean '{close[0]}'?" if close else ""


def _normalised(rule, value):
    """`value` (admitted by `rule`) as the plain Python type its kind stores: int, float, a tuple of ints."""
    if value is None or rule.kind == "text":
        return value
    if rule.kind == "units":
        return tuple(int(v) for v in value)
    return {"int": int, "number": float, "bool": bool}[rule.kind](value)


def declared(model, values, required=()):
    """A model's hyperparameters `values` (name -> value, as its __init__ received them) checked by RULES and
    normalised (ints, floats, tuples of ints): what `ZooModel` passes to the model's __init__ and stores as
    its attributes. A bad value is one ZooError line "<model>: <name> is <value>; it must be ..." (for a list,
    the first bad item is named). Names without a rule are passed on as they are; `required` names whose
    rule admits None that this model needs a value for."""
    out = {}
    for name, value in values.items():
        rule = rule_of(name, required)
        if rule is None:
            out[name] = value
            continue
        if not rule.admits(value):
            if rule.kind == "units" and isinstance(value, (list, tuple)) and value:
                item = Rule("int", low=rule.low)
                bad = next((v for v in value if not item.admits(v)), value)
                if bad is not value:
                    raise ZooError(f"{model}: {name} is {bad!r}{_kind(bad)} (in {value!r}); it must be "
                                   f"{rule.describe()}")
            raise ZooError(f"{model}: {name} is {value!r}{_kind(value)}; it must be {rule.describe()}")
        out[name] = _normalised(rule, value)
    return out
