"""Least squares for any full-column-rank strategy, by factorising AᵀA.

The solver is picked by structure: a sparse LU of AᵀA when A has a sparse form whose Gram stays
sparse (at most 50 entries per column); else a dense Cholesky factor for K <= 4096 cells;
otherwise LSMR iterations (answers only: the analytic error needs a factorisation).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._grid import shape_label
from .._validation import check_shape
from ..workloads import Boxes, Workload, as_workload
from ..workloads.base import CHUNK_ENTRIES, unit_blocks
from .base import LeastSquares

#: Largest domain for the dense Cholesky factor of AᵀA (K² entries).
MAX_DENSE_CELLS = 4096


class GeneralStrategy(LeastSquares, Workload):
    """A strategy workload A with exact least squares x̂ = (AᵀA)⁻¹ Aᵀ y; products and column norms
    are those of A itself."""

    def __init__(self, strategy):
        base = as_workload(strategy, "strategy")
        self.base = base
        super().__init__(base.domain, base.num_queries, base.name)
        self.is_binary = base.is_binary
        k = base.size
        self._factor = self._sparse_lu = self._sparse = None
        singular = f"strategy {base.name} does not have full column rank: AᵀA is singular"
        try:
            self._sparse = base.tosparse()
        except ValueError:
            pass
        if self._sparse is not None:
            gram = sp.csc_array(self._sparse.T @ self._sparse)
            if gram.nnz <= 50 * k:
                from scipy.sparse.linalg import splu  # loads scipy.linalg: on first use only

                try:
                    self._sparse_lu = splu(gram)
                except RuntimeError:
                    raise ValueError(singular) from None
                diagonal = np.abs(self._sparse_lu.U.diagonal())
                if diagonal.min() <= k * np.finfo(float).eps * max(diagonal.max(), 1e-300):
                    raise ValueError(singular)
                return
        if k <= MAX_DENSE_CELLS:
            gram = base.gram_matrix(max_entries=k * k)
            from scipy.linalg import cho_factor

            try:
                self._factor = cho_factor(gram, lower=True)
            except np.linalg.LinAlgError:
                raise ValueError(singular) from None
            # a factor of a numerically singular matrix can still come out: check its pivots
            pivots = np.diagonal(self._factor[0]) ** 2
            if pivots.min() <= k * np.finfo(float).eps * max(np.diagonal(gram).max(), 1e-300):
                raise ValueError(singular)

    def _solve(self, b: np.ndarray) -> np.ndarray:
        if self._factor is not None:
            from scipy.linalg import cho_solve

            return cho_solve(self._factor, b)
        if self._sparse_lu is not None:
            return self._sparse_lu.solve(b)
        raise NotImplementedError(
            f"no factorisation of AᵀA for {self.base.name} ({self.size} cells): exact least squares and "
            "its analytic error need K <= 4096 or a sparse strategy with a sparse Gram"
        )

    def _matmat(self, x):
        return self.base._matmat(x)

    def _rmatmat(self, y):
        return self.base._rmatmat(y)

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        return self.base.difference_norms(u, v, norm)

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        return self.base.column_diameter(cells)

    def _pinv_matmat(self, y):
        y = np.asarray(y, dtype=np.float64)
        if self._factor is None and self._sparse_lu is None:  # LSMR, column by column
            from scipy.sparse.linalg import lsmr

            op = self._sparse if self._sparse is not None else self.base
            return np.stack([lsmr(op, y[:, j], atol=1e-12, btol=1e-12)[0] for j in range(y.shape[1])], axis=1)
        return self._solve(np.asarray(self.base.rmatmat(y), dtype=np.float64))

    def _pinv_rmatmat(self, x):
        return np.asarray(self.base.matmat(self._solve(np.asarray(x, dtype=np.float64))), dtype=np.float64)

    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        """‖W A⁺‖_F² = tr(W (AᵀA)⁻¹ Wᵀ) (A has full column rank, so A⁺ A⁺ᵀ = (AᵀA)⁻¹): one solve
        per block of W's rows, without products with A, where the general method would also walk
        W's rows (at most as many queries as measurements, no structured Gram to use instead)."""
        self._solve(np.zeros((self.size, 0)))  # raises early without a factorisation
        m, k = workload.shape
        if m > self.shape[0] or (workload.structured_gram and m > k):
            return super().lstsq_frobenius_sq(workload)
        rows = workload.sparse_rows()  # W's rows as blocks of a sparse array: no product per block
        columns = None if rows is None else sp.csc_array(rows.T)
        total = 0.0
        for index, unit in unit_blocks(m, CHUNK_ENTRIES // max(2 * k, 1)):
            if columns is None:
                block = np.asarray(workload.rmatmat(unit), dtype=np.float64)
            else:
                block = columns[:, index].toarray()
            total += float((block * self._solve(block)).sum())
        return total


class IdentityStrategy(LeastSquares, Boxes):
    """The identity strategy: x̂ = y, so ‖W A⁺‖_F² = ‖W‖_F²."""

    def __init__(self, domain):
        domain = check_shape(domain, "domain")
        Boxes.__init__(self, domain, None, None, name=f"identity({shape_label(domain)})")

    def _matmat(self, x):
        return np.asarray(x)

    def _rmatmat(self, y):
        return np.asarray(y)

    def _pinv_matmat(self, y):
        return np.array(y, dtype=np.float64)  # a new array: the estimate never aliases the measurements

    def _pinv_rmatmat(self, x):
        return np.asarray(x, dtype=np.float64)

    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        return workload.frobenius_sq()
