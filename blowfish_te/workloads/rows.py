"""Some of a workload's queries: its rows ``rows``, in that order."""

from __future__ import annotations

import numpy as np

from .._validation import check_index_array
from .base import CHUNK_ENTRIES, Workload, as_block, unit_blocks


class QueryRows(Workload):
    """The rows ``rows`` of ``base`` as a workload over the same domain (W_S = S W)."""

    def __init__(self, base: Workload, rows):
        rows = check_index_array(rows, "rows", base.num_queries - 1)
        if rows.size == 0:
            raise ValueError("rows must select at least one query")
        self.base = base
        self.rows = rows
        super().__init__(base.domain, rows.size, f"{base.name}[{rows.size} queries]")

    def _matmat(self, x):
        return np.asarray(self.base._matmat(as_block(x)))[self.rows]

    def _rmatmat(self, z):
        z = as_block(z)
        full = np.zeros((self.base.num_queries, z.shape[1]))
        np.add.at(full, self.rows, z)
        return self.base._rmatmat(full)

    def frobenius_sq(self) -> float:
        """‖W_S‖_F² from the selected rows (Wᵀ on unit vectors), not from the K columns."""
        m, k = self.shape
        total = 0.0
        for _, unit in unit_blocks(m, CHUNK_ENTRIES // max(k, 1)):
            total += float((np.asarray(self._rmatmat(unit)) ** 2).sum())
        return total
