"""The Haar wavelet strategy of Privelet (Xiao, Wang, Gehrke 2010), 1-D and multi-dimensional.

On n = 2^m cells the unnormalised Haar matrix H_n has the total and, for every dyadic block, the
left half's sum minus the right half's; H_n = [H_{n/2} ⊗ (1, 1); I_{n/2} ⊗ (1, -1)]. Every column has
L1 norm m + 1, so uniform Laplace((m+1)/ε) noise on all coefficients is Privelet's
generalised-sensitivity weighting. In d dimensions the strategy is the Kronecker product of the
per-axis matrices (the standard decomposition), with column norm ∏(m_i + 1).

Domains that are not powers of two are padded with empty cells (public zeros); the estimate is
H⁻¹ y on the padded grid, restricted to the real cells — unbiased, as in DPBench — computed with
O(K) fast transforms.

The rows of H are orthogonal, H Hᵀ = D with D_j = ‖row j‖² (n for the total, 2s for a block of
halves of s cells), so H⁻¹ = Hᵀ D⁻¹ and ‖W H⁻¹‖_F² = Σ_q Σ_j (H q)_j² / D_j². A range has non-zero
details only in the (at most two) blocks per level holding its ends, and a box's coefficients are
the product of its sides', which gives the analytic error in O(m·d·log n).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._grid import shape_label
from .._validation import check_shape
from ..workloads.base import CHUNK_ENTRIES, Workload, as_block, check_norm
from ..workloads.boxes import Boxes
from .base import LeastSquares


def _forward(a: np.ndarray, axis: int) -> np.ndarray:
    """Unnormalised Haar analysis along ``axis`` (length 2^m): [total, coarsest ... finest details]."""
    a = np.moveaxis(a, axis, 0)
    details = []
    while a.shape[0] > 1:
        details.append(a[0::2] - a[1::2])
        a = a[0::2] + a[1::2]
    return np.moveaxis(np.concatenate([a] + details[::-1]), 0, axis)


def _synthesis(c: np.ndarray, axis: int, halve: bool) -> np.ndarray:
    """From a block's sum s and its detail d, the halves are s ± d: the adjoint of the analysis;
    with ``halve``, (s ± d)/2: its inverse."""
    c = np.moveaxis(c, axis, 0)
    a, pos = c[:1], 1
    while pos < c.shape[0]:
        d = c[pos : 2 * pos]
        nxt = np.empty((2 * pos,) + c.shape[1:], dtype=np.float64 if halve else c.dtype)
        nxt[0::2], nxt[1::2] = a + d, a - d
        a, pos = (nxt / 2 if halve else nxt), 2 * pos
    return np.moveaxis(a, 0, axis)


def _forward_adjoint(c: np.ndarray, axis: int) -> np.ndarray:
    return _synthesis(c, axis, halve=False)


def _inverse(c: np.ndarray, axis: int) -> np.ndarray:
    return _synthesis(c, axis, halve=True)


def _inverse_adjoint(a: np.ndarray, axis: int) -> np.ndarray:
    a = np.moveaxis(a, axis, 0)
    details = []
    while a.shape[0] > 1:
        details.append((a[0::2] - a[1::2]) / 2)
        a = (a[0::2] + a[1::2]) / 2
    return np.moveaxis(np.concatenate([a] + details[::-1]), 0, axis)


def _row_norms(n: int) -> np.ndarray:
    """‖row j‖² of H_n: n for the total, 2s for the blocks of halves of s cells."""
    rows = np.arange(n)
    level = np.floor(np.log2(np.maximum(rows, 1))).astype(np.int64)  # row j in [2^l, 2^(l+1)): halves of n / 2^(l+1)
    return np.where(rows == 0, float(n), 2.0 * (n >> (level + 1)))


def _haar_column(cells: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and signs of the non-zeros of H_n's columns ``cells``: the total, then one per level."""
    half = n >> np.arange(1, n.bit_length())  # s = n/2, ..., 1
    cells = np.asarray(cells, dtype=np.int64)[:, None]
    rows = np.concatenate([np.zeros_like(cells), n // (2 * half) + cells // (2 * half)], axis=1)
    signs = np.concatenate([np.ones(cells.shape), np.where((cells // half) % 2 == 0, 1.0, -1.0)], axis=1)
    return rows, signs


def _range_energy(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """Σ_j (H_n q)_j² / D_j² for the ranges q = [lo, hi]: the total, plus the blocks holding an end."""
    energy = ((hi - lo + 1) / n) ** 2
    half = n // 2
    while half >= 1:
        block = 2 * half
        t_lo, t_hi = lo // block, hi // block
        for t, counted in ((t_lo, True), (t_hi, t_hi != t_lo)):
            start = t * block
            left = np.maximum(0, np.minimum(hi, start + half - 1) - np.maximum(lo, start) + 1)
            right = np.maximum(0, np.minimum(hi, start + block - 1) - np.maximum(lo, start + half) + 1)
            energy += np.where(counted, (left - right) ** 2, 0) / block**2
        half //= 2
    return energy


class HaarStrategy(LeastSquares, Workload):
    """Privelet's strategy on a grid: unnormalised Haar coefficients of the zero-padded data."""

    def __init__(self, domain):
        domain = check_shape(domain, "domain")
        self.padded = tuple(1 << max(0, (k - 1).bit_length()) for k in domain)
        self.levels = tuple(int(math.log2(n)) for n in self.padded)
        super().__init__(domain, math.prod(self.padded), f"haar({shape_label(domain)})")

    def _pad(self, x: np.ndarray) -> np.ndarray:
        grid = x.reshape(self.domain + (x.shape[-1],))
        return np.pad(grid, [(0, n - k) for n, k in zip(self.padded, self.domain)] + [(0, 0)])

    def _crop(self, grid: np.ndarray) -> np.ndarray:
        return grid[tuple(slice(0, k) for k in self.domain)].reshape(self.size, -1)

    def _apply(self, grid: np.ndarray, step) -> np.ndarray:
        for axis in range(len(self.domain)):
            grid = step(grid, axis)
        return grid

    def _matmat(self, x):
        return self._apply(self._pad(as_block(x)), _forward).reshape(self.shape[0], -1)

    def _rmatmat(self, y):
        y = as_block(y)
        return self._crop(self._apply(y.reshape(self.padded + (y.shape[1],)), _forward_adjoint))

    def _pinv_matmat(self, y):
        y = np.asarray(y, dtype=np.float64)
        return self._crop(self._apply(y.reshape(self.padded + (y.shape[1],)), _inverse))

    def _pinv_rmatmat(self, x):
        return self._apply(self._pad(np.asarray(x, dtype=np.float64)), _inverse_adjoint).reshape(self.shape[0], -1)

    # -- the analytic error in closed form (module docstring) ---------------------------------
    def lstsq_frobenius_sq(self, workload: Workload) -> float:
        """‖W H⁻¹‖_F² = Σ_q Σ_j (H q)_j² / D_j²: per box a product over its sides; through the
        sparse coefficients of the used cells for workloads with sparse rows; else generic."""
        if workload.domain == self.domain:
            if isinstance(workload, Boxes):
                per_box = np.ones(workload.num_queries)
                for axis, n in enumerate(self.padded):
                    per_box *= _range_energy(workload.lo[:, axis], workload.hi[:, axis], n)
                weights = 1.0 if workload.weights is None else workload.weights**2
                return float((weights * per_box).sum())
            rows = workload.sparse_rows()
            if rows is not None:
                return self._sparse_error(rows)
        return super().lstsq_frobenius_sq(workload)

    def _sparse_error(self, rows) -> float:
        cells = np.flatnonzero(np.bincount(rows.indices, minlength=self.size))
        index, sign = self._columns(cells)
        norm = np.ones(1)
        for n in self.padded:
            norm = np.multiply.outer(norm, _row_norms(n)).reshape(-1)
        position = np.zeros(self.size, dtype=np.int64)
        position[cells] = np.arange(cells.size)
        used = sp.csr_array((rows.data, position[rows.indices], rows.indptr), shape=(rows.shape[0], cells.size))
        per_cell = index.shape[1]
        columns = sp.csr_array(
            (sign.ravel(), index.ravel(), np.arange(0, cells.size * per_cell + 1, per_cell)), shape=(cells.size, norm.size)
        )
        coefficients = sp.csr_array(used @ columns)
        return float((coefficients.data**2 / norm[coefficients.indices] ** 2).sum())

    def column_norms(self, norm: str = "l1") -> np.ndarray:
        """Every column has L1 and squared-L2 norm ∏(m_i + 1)."""
        check_norm(norm)
        return np.full(self.size, float(math.prod(m + 1 for m in self.levels)))

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """1-D closed form: cells whose m-bit indices share t leading bits differ on the row of the
        block where they part (by 2) and on one row per finer level each (by 1 and 1), so the
        L1 norm is 2(m - t) and the squared L2 norm 2(m - t) + 2. Other dimensions: from the
        columns' ∏(m_i + 1) non-zeros each (a pair with ⊥: the column's own norm, ∏(m_i + 1))."""
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        if len(self.domain) > 1:
            out = np.full(u.size, float(math.prod(m + 1 for m in self.levels)))  # ⊥: a column's own norm
            cells = np.flatnonzero(v < self.size)
            if cells.size:
                out[cells] = self._grid_differences(u[cells], v[cells], norm)
            return out
        out = np.empty(u.size)
        bottom = v == self.size
        out[bottom] = self.levels[0] + 1
        out[~bottom] = self._line_differences(0, u[~bottom], v[~bottom], norm)
        return out

    def _line_differences(self, axis: int, a: np.ndarray, b: np.ndarray, norm: str) -> np.ndarray:
        """Norms of H_i e_a - H_i e_b for the 1-D Haar matrix of ``axis``."""
        m = self.levels[axis]
        parted = m - self._shared_bits(a, b, m)  # levels at or below the parting block
        return np.where(a == b, 0, 2 * parted + (2 if norm == "l2sq" else 0)).astype(np.float64)

    def _grid_differences(self, u: np.ndarray, v: np.ndarray, norm: str) -> np.ndarray:
        """Cells that differ on one axis j: H e_u - H e_v = ⊗_{i<j} h_i ⊗ (h_j - h'_j) ⊗_{i>j} h_i,
        whose norm is the 1-D difference's times the other axes' column norms (m_i + 1 for both L1
        and squared L2); other pairs from the columns' non-zeros."""
        cu, cv = np.unravel_index(u, self.domain), np.unravel_index(v, self.domain)
        differs = np.stack([a != b for a, b in zip(cu, cv)])
        count = differs.sum(axis=0)
        out = np.zeros(u.size)
        for axis in range(len(self.domain)):
            on = (count == 1) & differs[axis]
            if on.any():
                others = math.prod(m + 1 for i, m in enumerate(self.levels) if i != axis)
                out[on] = others * self._line_differences(axis, cu[axis][on], cv[axis][on], norm)
        several = count > 1
        if several.any():
            out[several] = self._sparse_differences(u[several], v[several], norm)
        return out

    def _columns(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Coefficient indices and signs of the columns ``cells`` ((len, ∏(m_i + 1)) each): the
        Kronecker product of the per-axis columns."""
        coords = np.unravel_index(cells, self.domain)
        index, sign = np.zeros((cells.size, 1), dtype=np.int64), np.ones((cells.size, 1))
        for axis, n in enumerate(self.padded):
            idx, sgn = _haar_column(coords[axis], n)
            width = index.shape[1] * idx.shape[1]
            index = (index[:, :, None] * n + idx[:, None, :]).reshape(cells.size, width)
            sign = (sign[:, :, None] * sgn[:, None, :]).reshape(cells.size, width)
        return index, sign

    def _sparse_differences(self, u: np.ndarray, v: np.ndarray, norm: str) -> np.ndarray:
        """Norms of H[:, u] - H[:, v] (v = K: a zero column) from the columns' non-zeros."""
        out = np.empty(u.size)
        per_pair = 2 * math.prod(m + 1 for m in self.levels)
        step = max(1, CHUNK_ENTRIES // per_pair)
        for start in range(0, u.size, step):
            cu, cv = u[start : start + step], v[start : start + step]
            real = cv < self.size
            iu, su = self._columns(cu)
            iv, sv = self._columns(cv[real])
            pairs = np.arange(cu.size)
            rows = np.concatenate([np.repeat(pairs, iu.shape[1]), np.repeat(pairs[real], iv.shape[1])])
            diff = sp.csr_array((np.concatenate([su.ravel(), -sv.ravel()]), (rows, np.concatenate([iu.ravel(), iv.ravel()]))),
                                shape=(cu.size, self.shape[0]))
            diff.sum_duplicates()
            values = np.abs(diff.data) if norm == "l1" else diff.data**2
            out[start : start + step] = np.bincount(np.repeat(pairs, np.diff(diff.indptr)), weights=values, minlength=cu.size)
        return out

    def _shared_bits(self, a: np.ndarray, b: np.ndarray, m: int | None = None) -> np.ndarray:
        m = self.levels[0] if m is None else m
        diff = np.bitwise_xor(a, b)
        return np.where(diff == 0, m, m - np.floor(np.log2(np.maximum(diff, 1))).astype(np.int64) - 1)

    def column_diameter(self, cells: ArrayLike | None = None) -> float:
        """1-D: the two extreme cells part at the coarsest level of any pair, 2(m - t(min, max))."""
        if len(self.domain) > 1:
            return super().column_diameter(cells)
        cells = np.arange(self.size) if cells is None else np.asarray(cells, dtype=np.int64)
        if cells.size < 2 or cells.min() == cells.max():
            return 0.0
        lo, hi = np.array([cells.min()]), np.array([cells.max()])
        return float(2 * (self.levels[0] - self._shared_bits(lo, hi)[0]))
