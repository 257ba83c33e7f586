"""All k(k+1)/2 range queries of a 1-D domain, as an implicit operator with closed forms.

Queries are the ranges [a, b], 0 <= a <= b < k, in lexicographic order of (a, b). Cells u < v are
0-indexed. Closed forms (each tested against the dense matrix):

- column L1 norm: ranges containing u, (u + 1)(k - u);
- Gram entry: ranges containing u and v, (u + 1)(k - v);
- column difference: ranges containing exactly one of u, v, (v - u)(u + 1 + k - v).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._digest import digest
from .._operator import LinearMap
from .._validation import check_index_array, check_size
from .base import Workload, as_block, check_norm
from .boxes import Boxes


class AllRanges(Workload):
    """Every range query [a, b] of a domain of ``k`` cells; never stored as an m × K array."""

    is_binary = True
    structured_gram = True

    def __init__(self, k: int):
        k = check_size(k)
        super().__init__((k,), k * (k + 1) // 2, f"all_ranges({k})")

    def _endpoints(self) -> tuple[np.ndarray, np.ndarray]:
        return np.triu_indices(self.size)

    def _matmat(self, x):
        x = as_block(x)
        prefix = np.concatenate([np.zeros((1, x.shape[1]), dtype=x.dtype), np.cumsum(x, axis=0)])
        a, b = self._endpoints()
        return prefix[b + 1] - prefix[a]

    def _rmatmat(self, y):
        # (Wᵀy)_j = Σ_{a <= j <= b} y_ab: suffix sums over b, prefix sums over a, read on the diagonal.
        y = as_block(y)
        k = self.size
        a, b = self._endpoints()
        out = np.empty((k, y.shape[1]), dtype=np.result_type(y.dtype, np.int64))
        for col in range(y.shape[1]):
            table = np.zeros((k, k), dtype=out.dtype)
            table[a, b] = y[:, col]
            table = np.cumsum(np.flip(np.cumsum(np.flip(table, 1), axis=1), 1), axis=0)
            out[:, col] = np.diagonal(table)
        return out

    def fingerprint(self) -> str:
        return digest("all_ranges", self.size)

    def query_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._endpoints()
        return a[:, None].astype(np.int64), b[:, None].astype(np.int64)

    def max_abs_entry(self) -> float:
        return 1.0

    def gram(self) -> LinearMap:
        """WᵀW with entries (min(u, v) + 1)(k - max(u, v)), applied in O(k)."""
        return _AllRangesGram(self.size)

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        u, v = self._check_pairs(u, v)
        check_norm(norm)  # entries are 0/1: L1 and squared L2 agree
        k = self.size
        out = np.empty(u.size)
        bottom = v == k
        ub = u[bottom]
        out[bottom] = (ub + 1) * (k - ub)
        a = np.minimum(u[~bottom], v[~bottom])
        b = np.maximum(u[~bottom], v[~bottom])
        out[~bottom] = (b - a) * (a + 1 + k - b)
        return out

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        """max over a < b in cells of f(b) = (b - a)(a + 1 + k - b). f is a concave parabola in b
        with its top at b* = a + (k + 1)/2, so for each a only the cells next to b* are candidates:
        O(|cells| log |cells|), exact."""
        k = self.size
        cells = np.arange(k) if cells is None else np.unique(check_index_array(cells, "cells", k - 1))
        if cells.size < 2:
            return 0.0
        a = cells[:-1]
        top = np.searchsorted(cells, a + (k + 1) / 2)
        best = 0
        for idx in (top - 1, top):
            idx = np.clip(idx, np.arange(1, cells.size), cells.size - 1)  # a partner after a
            b = cells[idx]
            best = max(best, int(((b - a) * (a + 1 + k - b)).max()))
        return float(best)

    def _as_boxes(self) -> Boxes:
        a, b = self._endpoints()
        return Boxes(self.domain, a, b, name=self.name)

    def tosparse(self) -> sp.csr_array:
        return self._as_boxes().tosparse()

    def times_incidence(self, child: np.ndarray, parent: np.ndarray) -> sp.csr_array:
        """Sparse W·P through the ranges' endpoints: O(m + total edge length), not O(nnz(W))."""
        return self._as_boxes().times_incidence(child, parent)


class _AllRangesGram(LinearMap):
    """(G y)_u = (k - u) Σ_{v <= u} (v + 1) y_v + (u + 1) Σ_{v > u} (k - v) y_v."""

    def __init__(self, k: int):
        self.k = k
        super().__init__((k, k))

    def _matmat(self, y):
        y = np.asarray(y)
        k = self.k
        idx = np.arange(k)[:, None]
        below = np.cumsum((idx + 1) * y, axis=0)
        above = np.cumsum(((k - idx) * y)[::-1], axis=0)[::-1]
        above = np.concatenate([above[1:], np.zeros((1, y.shape[1]), dtype=above.dtype)])
        return (k - idx) * below + (idx + 1) * above

    def _matvec(self, y):
        return self._matmat(np.asarray(y).reshape(-1, 1)).reshape(-1)

    _rmatmat = _matmat
    _rmatvec = _matvec

    def _adjoint(self):
        return self
