"""One feature of the input contract (see zoo/schema.py for the whole contract)."""

import dataclasses


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
    """

    name: str
    group: str
    vocabulary_size: int | None = None
    embedding_dim: int = 8
    hashed: bool = False

    @property
    def key(self):
        return f"{self.group}_{self.name}"

    def to_dict(self):
        return dataclasses.asdict(self)
