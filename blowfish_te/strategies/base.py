"""Strategies with exact least squares: x̂ = A⁺ y, its adjoint, and ‖W A⁺‖_F² (the matrix mechanism:
Li et al., PODS 2010)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._validation import check_real_array
from ..transform import TransformedWorkload
from ..workloads.base import CHUNK_ENTRIES, Workload, unit_blocks
from ..workloads.matrix import MatrixWorkload


def sparse_rows(workload: Workload) -> sp.csr_array | None:
    """W as a CSR array when it has a cheap sparse form with at most MAX_ROW_NONZEROS entries
    (:meth:`Workload.sparse_rows <blowfish_te.workloads.Workload.sparse_rows>`), else None."""
    return workload.sparse_rows()


class LeastSquares(Workload):
    """A strategy: a workload A (p × K) that carries its own linear estimator x̂ = A⁺ y (a base
    placed before the workload class it refines, e.g. ``class S(LeastSquares, Boxes)``).

    Subclasses implement ``_pinv_matmat`` (A⁺ on a (p, c) block) and ``_pinv_rmatmat`` ((A⁺)ᵀ on
    a (K, c) block). A⁺ is exact least squares for full-column-rank A — except Privelet on a
    domain padded to a power of two, whose estimator is the padded inverse restricted to the real
    cells (unbiased, a few per cent above least squares). Either way the matrix mechanism's
    expected total squared error 2 (Δ/ε)² ‖W A⁺‖_F² is exact for the estimator used, and is
    computed from whichever side is smaller.
    """

    def _pinv_matmat(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _pinv_rmatmat(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def pinv(self, y: ArrayLike) -> np.ndarray:
        """x̂ = A⁺ y: the least-squares estimate of the data from measurements y ((p,) or (p, c))."""
        y = check_real_array(y, "y", copy=False)  # read only: every estimator returns a new array
        p = self.shape[0]
        if y.ndim not in (1, 2) or y.shape[0] != p:
            raise ValueError(f"y must have shape ({p},) or ({p}, c), one row per measured query, got {y.shape}")
        return self._pinv_matmat(y.reshape(y.shape[0], -1)).reshape((self.size,) + y.shape[1:])

    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        """‖W A⁺‖_F², through A⁺ on unit blocks (p columns) or (A⁺)ᵀ on W's rows (m columns),
        whichever side is smaller; with more queries than cells and a structured Gram (e.g. all
        ranges), as Σ_c (A⁺e_c)ᵀ WᵀW (A⁺e_c) without touching the m rows."""
        m, k = workload.shape
        p = self.shape[0]
        total = 0.0
        if workload.structured_gram and m > k:
            gram = workload.gram()
            for _, unit in unit_blocks(p, CHUNK_ENTRIES // max(2 * k, 1)):
                block = np.asarray(self._pinv_matmat(unit), dtype=np.float64)
                total += float((block * np.asarray(gram.matmat(block), dtype=np.float64)).sum())
        elif m <= p:
            for _, unit in unit_blocks(m, CHUNK_ENTRIES // max(k + p, 1)):
                total += float((self._pinv_rmatmat(np.asarray(workload.rmatmat(unit), dtype=np.float64)) ** 2).sum())
        else:
            for _, unit in unit_blocks(p, CHUNK_ENTRIES // max(k + m, 1)):
                total += float((np.asarray(workload.matmat(self._pinv_matmat(unit)), dtype=np.float64) ** 2).sum())
        return total


def integer_entries(strategy: Workload) -> bool:
    """Whether every entry of A is an integer, read off its structure (never the data): binary
    workloads, explicit matrices with integral entries, and W P_G of such a W (P_G has entries
    0 and ±1). Then A x is an integer vector for every histogram x."""
    if strategy.is_binary:
        return True
    if isinstance(strategy, MatrixWorkload):
        data = strategy.matrix.data
        return bool(np.array_equal(data, np.round(data)))
    if isinstance(strategy, TransformedWorkload):
        return integer_entries(strategy.base)
    return False
