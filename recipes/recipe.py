import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A paper's training protocol, as data: print it, override it (`dataclasses.replace`), fit with it.

    Args:
        name: the protocol's name.
        learning_rate: peak learning rate of Adam / AdamW.
        weight_decay: decoupled weight decay (AdamW when > 0).
        beta_1, beta_2: Adam's moment decays.
        batch_size: rows per step. `fit` re-batches a tf.data training set to it; the CLI and
            `reproduce` build their pipelines with it.
        epochs: the most epochs to run.
        warmup_fraction: share of all steps spent in linear warm-up; with `cosine=True` the rate then
            follows a cosine decay to 0 (DeRes: 5 % warm-up, then cosine).
        cosine: whether to decay with a cosine after the warm-up.
        clipnorm: gradient clipping by global norm (None: no clipping).
        table_update: how the embedding tables are updated: "dense" (Adam reads and writes every row of
            every table each step), or the rule that updates only the rows a batch touches
            (zoo.recipes.SparseTableAdam: "lazy_adam", "rowwise_adagrad" or "sgd"; the dense weights stay
            on Adam), whose step's cost does not grow with the tables' size (benchmarks/vocab_scaling.py).
            None: `fit` picks by the model's largest table (zoo.recipes.fit.table_choice: "lazy_adam" from
            SPARSE_TABLE_ROWS rows, "dense" below; "dense" under a distribution).
        early_stopping_patience: epochs without a better `monitor` before stopping (None: never stop early).
        monitor: the validation metric early stopping and tuning watch (maximised).
        seeds: the seeds a protocol averages over (the first one is used by `fit`).
        model_overrides: hyperparameters the protocol fixes on the model (e.g. DeRes' dropout 0.1).
        trainer: the training wrapper the protocol adds around the model: None (cross-entropy only),
            "rest_auxiliary" (ReST §2.3: L_ce + λ_seq L_seq + λ_align L_align, for ReST models) or
            "distillation" (SUAN eq 17: a teacher trained online with the student).
        trainer_options: the wrapper's options: {"seq_weight", "align_weight"} for ReST; {"teacher"
            (the teacher's model name), "teacher_hyperparameters", "temperature", "distillation_weight"}
            for distillation.
        batching: how the recipe's own pipelines group rows: None (one candidate per row) or "prefix"
            (ReST §2.4 user-level shared-prefix training: `group_size` samples of one user per row,
            one encoder pass for all of them; `fit` trains a twin of the model built for that many
            candidates and copies its weights back).
        group_size: samples per row in "prefix" batching (m2).
        grid: the hyperparameter grid the protocol searches on the validation split
            ({"learning_rate": (...), "weight_decay": (...)}); `reproduce` picks the best cell by the
            monitor on seed 0 and runs every seed with it.
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
    table_update: str | None = None
    early_stopping_patience: int | None = None
    monitor: str = "val_auc"
    seeds: tuple = (0,)
    model_overrides: dict = dataclasses.field(default_factory=dict)
    trainer: str | None = None
    trainer_options: dict = dataclasses.field(default_factory=dict)
    batching: str | None = None
    group_size: int = 1
    grid: dict = dataclasses.field(default_factory=dict)
    notes: str = ""

    def __str__(self):
        """Every field on its own line, so `print(get_recipe("rest"))` shows the whole protocol."""
        lines = [f"Recipe '{self.name}'"]
        for field in dataclasses.fields(self):
            if field.name not in ("name", "notes"):
                lines.append(f"  {field.name:<24} {getattr(self, field.name)!r}")
        lines.append(f"  {'notes':<24} {self.notes}")
        return "\n".join(lines)
