"""One feature of the input contract (see zoo/schema.py for the whole contract)."""

import dataclasses


def table_name(group, name):
    """The embedding table a feature of `group` and `name` reads: hist_<f> and cand_<f> share the table of
    field f, any other feature has its own (its key)."""
    return name if group in ("hist", "cand") else f"{group}_{name}"


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature of the contract.

    Args:
        name: the field name without its group prefix ("item_id").
        group: one of hist, user, cand, ctx, num.
        vocabulary_size: ids lie in [0, vocabulary_size): 0 is padding, the last id is
            out-of-vocabulary. Required for the id groups, absent for num.
        embedding_dim: width of the field's embedding (SUAN uses 8 per field).
        hashed: the ids were produced by hashing into `vocabulary_size` buckets rather than by a
            fitted vocabulary (recorded for the data pipelines; the model treats both alike).
        tags: S > 0 for a multi-valued feature of its row (a film's genres, an item's tags): up to S ids
            per row, 0 on the empty slots, in groups user, ctx ([B, S]) and cand ([B, M, S]). Its
            embedding is the mean of its present ids' embeddings (zero when none is present), so every
            model reads it as it reads a one-valued field. 0 (default): one id per row.
    """

    name: str
    group: str
    vocabulary_size: int | None = None
    embedding_dim: int = 8
    hashed: bool = False
    tags: int = 0

    @property
    def key(self):
        return f"{self.group}_{self.name}"

    @property
    def table(self):
        """The name of the embedding table this feature reads (`table_name`)."""
        return table_name(self.group, self.name)

    def to_dict(self):
        config = dataclasses.asdict(self)
        if not self.tags:  # one-valued features keep the configs written before tags existed
            del config["tags"]
        return config
