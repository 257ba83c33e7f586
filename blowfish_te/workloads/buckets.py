"""A workload seen through a partition: the queries on bucket totals spread evenly over cells."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .base import Workload, as_block
from .boxes import Boxes

#: Boxes with at most this many (box, cell) pairs are multiplied out sparsely.
SPARSE_PAIRS = 2**22


class BucketWorkload(Workload):
    """W E over m buckets, E[i, b] = 1/|b| for the cells i of bucket b: the answers W x̂ when each
    bucket's total is spread evenly over its cells (DAWA's reduced workload); ``spread`` is E
    (sparse, K × m)."""

    def __init__(self, base: Workload, labels):
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        if labels.shape != (base.size,) or labels.min(initial=0) < 0:
            raise ValueError(f"labels must give one bucket in 0..m-1 for each of the {base.size} cells")
        sizes = np.bincount(labels)
        if (sizes == 0).any():
            raise ValueError("labels must number the buckets 0..m-1, each used")
        self.base = base
        self.labels = labels
        self.sizes = sizes
        self.spread = sp.csr_array((1.0 / sizes[labels], (np.arange(labels.size), labels)), shape=(labels.size, sizes.size))
        super().__init__((sizes.size,), base.num_queries, f"{base.name} on {sizes.size} buckets")

    def expand(self, totals: np.ndarray) -> np.ndarray:
        """Cell estimates from bucket totals, uniform within each bucket."""
        return self.spread @ np.asarray(totals, dtype=np.float64)

    def _matmat(self, y):
        return self.base._matmat(self.expand(as_block(y)))

    def _rmatmat(self, z):
        return self.spread.T @ self.base._rmatmat(as_block(z))

    def frobenius_sq(self) -> float:
        """‖W E‖_F²: from W's sparse rows when W is boxes, in groups of at most 2·SPARSE_PAIRS
        (box, cell) pairs (linear in the boxes' total volume); else from the columns."""
        base = self.base
        if not isinstance(base, Boxes):
            return super().frobenius_sq()
        volumes = (base.hi - base.lo + 1).prod(axis=1)
        if volumes.max() > SPARSE_PAIRS:
            return super().frobenius_sq()
        groups = (np.cumsum(volumes) - 1) // SPARSE_PAIRS
        cuts = np.concatenate(([0], np.flatnonzero(np.diff(groups)) + 1, [volumes.size]))
        total = 0.0
        for start, end in zip(cuts[:-1], cuts[1:]):
            weights = None if base.weights is None else base.weights[start:end]
            group = base if (start, end) == (0, volumes.size) else Boxes(base.domain, base.lo[start:end], base.hi[start:end],
                                                                         weights=weights)
            total += float(((group.tosparse() @ self.spread).data ** 2).sum())
        return total

    def gram_matrix(self, max_entries: int = 2**26) -> np.ndarray:
        m = self.size
        if m * m > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {m * m} entries (limit {max_entries})")
        spread = self.spread.toarray()
        if self.num_queries <= self.base.size:  # (W E)ᵀ (W E): one pass through W
            reduced = np.asarray(self.base.matmat(spread), dtype=np.float64)
            return reduced.T @ reduced
        return np.asarray(self.spread.T @ self.base.gram().matmat(spread), dtype=np.float64)
