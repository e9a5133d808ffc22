import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A paper's training protocol, as data: print it, override it (`dataclasses.replace`), fit with it.

    Args:
        name: the protocol's name.
        learning_rate: peak learning rate of Adam / AdamW.
        weight_decay: decoupled weight decay (AdamW when > 0).
        beta_1, beta_2: Adam's moment decays.
        batch_size: rows per step (used where the recipe batches the data itself: the CLI, tuning).
        epochs: the most epochs to run.
        warmup_fraction: share of all steps spent in linear warm-up; with `cosine=True` the rate then
            follows a cosine decay to 0 (DeRes: 5 % warm-up, then cosine).
        cosine: whether to decay with a cosine after the warm-up.
        clipnorm: gradient clipping by global norm (None: no clipping).
        early_stopping_patience: epochs without a better `monitor` before stopping (None: never stop early).
        monitor: the validation metric early stopping and tuning watch (maximised).
        seeds: the seeds a protocol averages over (the first one is used by `fit`).
        model_overrides: hyperparameters the protocol fixes on the model (e.g. DeRes' dropout 0.1).
        notes: where the numbers come from.
    """

    name: str
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    beta_1: float = 0.9
    beta_2: float = 0.999
    batch_size: int = 256
    epochs: int = 1
    warmup_fraction: float = 0.0
    cosine: bool = False
    clipnorm: float | None = None
    early_stopping_patience: int | None = None
    monitor: str = "val_auc"
    seeds: tuple = (0,)
    model_overrides: dict = dataclasses.field(default_factory=dict)
    notes: str = ""
