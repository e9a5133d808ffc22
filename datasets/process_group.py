"""The processes of a multi-process run that build one data set together, each from its own shards.

Under `--strategy multi-worker` every process reads only its share of a spec's shard files
(`shards`: files rank, rank + size, ... in name order) and the fit is made over all of them by exchanging
what each process counted (zoo.datasets.transforms.fit): vocabularies as (value, count) pairs, numeric
moments and, for bucket edges, each process's distinct training values with their counts, the users of
each process, and exact order statistics of times (time-split cuts) by a synchronised bisection over
counts. What travels between processes is bounded by the distinct values, never the rows. zoo.datasets.spec_engine uses
it; `ProcessGroup.jax()` exchanges through JAX's multi-process runtime (what keras.distribution runs on),
and any `allgather` function with the same contract works (a test runs N threads as N processes).
"""

import pickle

import numpy as np

from zoo.errors import ZooError


class ProcessGroup:
    """`size` processes, this one of rank `rank`, and `allgather(value) -> [value of rank 0, 1, ...]`.

    Every process must make the same calls in the same order (a collective). `ProcessGroup()` is one
    process alone (allgather returns [value]); `ProcessGroup.jax()` the processes of JAX's runtime
    (`keras.distribution.initialize`)."""

    def __init__(self, rank=0, size=1, allgather=None):
        if size < 1 or not 0 <= rank < size:
            raise ZooError(f"process rank {rank} of {size} processes: the rank must be in 0..{size - 1}")
        if size > 1 and allgather is None:
            raise ZooError(f"a group of {size} processes needs an allgather function")
        self.rank, self.size = rank, size
        self._allgather = allgather or (lambda value: [value])

    @classmethod
    def jax(cls):
        """The processes of JAX's multi-process runtime (one process: a group of one)."""
        import jax

        if jax.process_count() == 1:
            return cls()
        return cls(jax.process_index(), jax.process_count(), _jax_allgather)

    def __repr__(self):
        return f"ProcessGroup(rank={self.rank}, size={self.size})"

    def allgather(self, value):
        """Every process's `value` (any picklable object), in rank order."""
        return list(self._allgather(value))

    def shards(self, files):
        """This process's files: every size-th of the name-ordered `files`, from its rank."""
        if len(files) < self.size:
            raise ZooError(f"{len(files)} shard file(s) for {self.size} processes: each process reads its own "
                           f"shards, so give at least {self.size} files (a folder or glob of shards)")
        return list(files[self.rank :: self.size])

    def sum(self, values):
        """The element-wise sum of every process's `values` (a number or array)."""
        gathered = self.allgather(np.asarray(values))
        return np.sum(np.stack(gathered), axis=0)

    def order_statistics(self, sorted_keys, ks):
        """The ks-th smallest (0-based) of every process's int64 `sorted_keys` together, exactly: a bisection
        over the key range in which each round sums the processes' counts of keys <= the midpoint."""
        sorted_keys = np.asarray(sorted_keys, np.int64)
        ks = np.asarray(ks, np.int64)
        if self.size == 1:
            return sorted_keys[ks]
        bounds = self.allgather((int(sorted_keys[0]), int(sorted_keys[-1])) if sorted_keys.size else None)
        bounds = [b for b in bounds if b is not None]
        if not bounds:
            raise ZooError("an order statistic of no values")
        low = np.full(ks.shape, min(b[0] for b in bounds), np.int64)
        high = np.full(ks.shape, max(b[1] for b in bounds), np.int64)
        while True:  # every process sees the same counts, so all stop in the same round
            open_ = low < high
            if not open_.any():
                break
            middle = (low >> 1) + (high >> 1) + (low & high & 1)  # floor((low + high) / 2) without overflow
            at_most = self.sum(np.searchsorted(sorted_keys, middle, side="right"))
            high = np.where(open_ & (at_most >= ks + 1), middle, high)
            low = np.where(open_ & (at_most < ks + 1), middle + 1, low)
        return low


def _jax_allgather(value):
    """Any picklable value from every process, through jax.experimental.multihost_utils (bytes padded to
    the longest)."""
    from jax.experimental import multihost_utils

    data = np.frombuffer(pickle.dumps(value), np.uint8)
    lengths = np.asarray(multihost_utils.process_allgather(np.asarray([data.size], np.int64))).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: data.size] = data
    gathered = np.asarray(multihost_utils.process_allgather(padded))
    return [pickle.loads(gathered[i, : lengths[i]].tobytes()) for i in range(lengths.size)]
