"""Explicit workloads: any dense or sparse matrix, stored sparse."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._digest import digest
from .._validation import as_array, check_index_array
from .base import CHUNK_ENTRIES, MAX_DENSE_ENTRIES, MAX_ROW_NONZEROS, Workload, as_block, check_norm


class MatrixWorkload(Workload):
    """A workload given by an explicit (m × K) matrix; ``domain`` defaults to ``(K,)``."""

    def __init__(self, matrix, domain=None, name: str | None = None):
        if sp.issparse(matrix):
            if matrix.dtype.kind not in "biuf":
                raise TypeError(f"matrix must be real, got a sparse matrix of dtype {matrix.dtype}")
            mat = sp.csr_array(matrix, dtype=np.float64, copy=True)  # never share the caller's arrays
        else:
            arr = as_array(matrix, "matrix")
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"matrix must be real, got dtype {arr.dtype}")
            if arr.ndim != 2:
                raise ValueError(f"matrix must be 2-D (queries × cells), got shape {arr.shape}")
            mat = sp.csr_array(arr.astype(np.float64))
        m, k = mat.shape
        if m == 0 or k == 0:
            raise ValueError(f"matrix must have at least one query and one cell, got shape {mat.shape}")
        if not np.isfinite(mat.data).all():
            raise ValueError("matrix has NaN or infinite entries")
        mat.eliminate_zeros()
        mat.sum_duplicates()
        domain = (k,) if domain is None else domain
        super().__init__(domain, m, name or f"matrix({m}×{k})")
        if self.size != k:
            raise ValueError(f"domain {self.domain} has {self.size} cells but the matrix has {k} columns")
        for a in (mat.data, mat.indices, mat.indptr):
            a.flags.writeable = False
        self.matrix = mat
        self._csc = mat.tocsc()
        self.is_binary = bool(np.all(mat.data == 1.0))

    def _matmat(self, x):
        return self.matrix @ as_block(x)

    def _rmatmat(self, y):
        return self.matrix.T @ as_block(y)

    def fingerprint(self) -> str:
        m = self.matrix
        return digest("matrix", self.domain, m.shape, m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64))

    def tosparse(self) -> sp.csr_array:
        return self.matrix.copy()

    def sparse_rows(self) -> sp.csr_array | None:
        rows = sp.csr_array(self.matrix, dtype=np.float64)
        return rows if rows.nnz <= MAX_ROW_NONZEROS else None

    def max_abs_entry(self) -> float:
        return float(np.abs(self.matrix.data).max(initial=0.0))

    def gram_matrix(self, max_entries: int = MAX_DENSE_ENTRIES) -> np.ndarray:
        k = self.size
        if k * k > max_entries:
            raise ValueError(f"the Gram matrix of {self.name} would have {k * k} entries (limit {max_entries})")
        return np.asarray((self.matrix.T @ self.matrix).toarray())

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Exact norms of ``W[:, u] - W[:, v]`` by sparse products, in blocks of bounded work."""
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        k = self.size
        col_nnz = np.diff(self._csc.indptr)
        work = np.cumsum(col_nnz[u] + np.where(v < k, col_nnz[np.minimum(v, k - 1)], 0) + 1)
        out = np.empty(u.size)
        start = 0
        while start < u.size:
            stop = max(start + 1, int(np.searchsorted(work, work[start] + CHUNK_ENTRIES)))
            cu, cv = u[start:stop], v[start:stop]
            cols = np.arange(cu.size)
            keep = cv < k
            signs = sp.csc_array(
                (np.concatenate([np.ones(cu.size), -np.ones(int(keep.sum()))]),
                 (np.concatenate([cu, cv[keep]]), np.concatenate([cols, cols[keep]]))),
                shape=(k, cu.size),
            )
            diff = sp.csc_array(self.matrix @ signs)
            values = np.abs(diff.data) if norm == "l1" else diff.data**2
            column = np.repeat(np.arange(cu.size), np.diff(diff.indptr))
            out[start:stop] = np.bincount(column, weights=values, minlength=cu.size)
            start = stop
        return out

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        """Largest pairwise L1 distance between the given columns.

        0/1 matrices: ‖a - b‖₁ = ‖a‖₁ + ‖b‖₁ - 2 aᵀb, so one Gram block gives a whole block of pairs.
        Other matrices: pairwise city-block distances (scipy ``cdist``) over dense column blocks.
        """
        cells = np.arange(self.size) if cells is None else np.unique(check_index_array(cells, "cells", self.size - 1))
        if cells.size < 2:
            return 0.0
        sub = self._csc[:, cells]
        m = self.num_queries
        step = max(1, CHUNK_ENTRIES // max(cells.size, m))
        best = 0.0
        if self.is_binary:
            norms = np.asarray(sub.sum(axis=0)).reshape(-1)
            # float32 products of 0/1 columns are exact while counts stay below 2**24
            dtype = np.float32 if m < 2**24 else np.float64
            dense = sub.toarray().astype(dtype) if cells.size * m <= MAX_DENSE_ENTRIES else None
            for start in range(0, cells.size, step):
                stop = min(start + step, cells.size)
                if dense is not None:
                    gram = (dense[:, start:stop].T @ dense).astype(np.float64)
                else:
                    gram = np.asarray((sub[:, start:stop].T @ sub).toarray())
                dist = norms[start:stop, None] + norms[None, :] - 2 * gram
                dist[np.arange(stop - start), np.arange(start, stop)] = 0.0
                best = max(best, float(dist.max()))
            return best
        dense_t = sub.T.toarray() if cells.size * m <= MAX_DENSE_ENTRIES else None
        if dense_t is None:
            return super().column_diameter(cells)
        for start in range(0, cells.size, step):
            from scipy.spatial.distance import cdist  # heavy: only for dense matrices

            best = max(best, float(cdist(dense_t[start : start + step], dense_t, "cityblock").max()))
        return best
