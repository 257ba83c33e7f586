"""The Haar wavelet strategy of Privelet (Xiao, Wang, Gehrke 2010), 1-D and multi-dimensional.

On n = 2^m cells the unnormalised Haar matrix H_n has the total and, for every dyadic block, the
left half's sum minus the right half's; H_n = [H_{n/2} ⊗ (1, 1); I_{n/2} ⊗ (1, -1)]. Every column has
L1 norm m + 1, so uniform Laplace((m+1)/ε) noise on all coefficients is Privelet's
generalised-sensitivity weighting. In d dimensions the strategy is the Kronecker product of the
per-axis matrices (the standard decomposition), with column norm ∏(m_i + 1).

Domains that are not powers of two are padded with empty cells (public zeros); the estimate is
H⁻¹ y on the padded grid, restricted to the real cells — unbiased, as in DPBench — computed with
O(K) fast transforms.
"""

from __future__ import annotations

import math

import numpy as np

from .._grid import shape_label
from .._validation import check_shape
from ..workloads.base import Workload, as_block, check_norm
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

    def column_norms(self, norm: str = "l1") -> np.ndarray:
        """Every column has L1 and squared-L2 norm ∏(m_i + 1)."""
        check_norm(norm)
        return np.full(self.size, float(math.prod(m + 1 for m in self.levels)))

    def difference_norms(self, u, v, norm: str = "l1") -> np.ndarray:
        """1-D closed form: cells whose m-bit indices share t leading bits differ on the row of the
        block where they part (by 2) and on one row per finer level each (by 1 and 1), so the
        L1 norm is 2(m - t) and the squared L2 norm 2(m - t) + 2. Other dimensions: generic."""
        if len(self.domain) > 1:
            return super().difference_norms(u, v, norm)
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        m = self.levels[0]
        out = np.empty(u.size)
        bottom = v == self.size
        out[bottom] = m + 1
        a, b = u[~bottom], v[~bottom]
        parted = m - self._shared_bits(a, b)  # levels at or below the parting block
        out[~bottom] = np.where(a == b, 0, 2 * parted + (2 if norm == "l2sq" else 0))
        return out

    def _shared_bits(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m = self.levels[0]
        diff = np.bitwise_xor(a, b)
        return np.where(diff == 0, m, m - np.floor(np.log2(np.maximum(diff, 1))).astype(np.int64) - 1)

    def column_diameter(self, cells=None) -> float:
        """1-D: the two extreme cells part at the coarsest level of any pair, 2(m - t(min, max))."""
        if len(self.domain) > 1:
            return super().column_diameter(cells)
        cells = np.arange(self.size) if cells is None else np.asarray(cells, dtype=np.int64)
        if cells.size < 2 or cells.min() == cells.max():
            return 0.0
        lo, hi = np.array([cells.min()]), np.array([cells.max()])
        return float(2 * (self.levels[0] - self._shared_bits(lo, hi)[0]))
