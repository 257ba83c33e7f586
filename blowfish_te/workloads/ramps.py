"""Ramped prefix counts: each row averages w consecutive cumulative counts.

Row i is (1/w_i) Σ_{t < w_i} s_{a_i + t}, s_j = x_0 + ... + x_j: a prefix count whose step at its
end is spread into a linear ramp over w_i cells (weight 1 on cells up to a_i, then falling by 1/w_i
per cell). In cumulative coordinates (the line transform) a row is one box of w_i counts, so its
sparse transformed form has w_i entries. With disjoint windows, a record moved from u to v < u
changes the counts s_v, ..., s_{u-1}, and row i by the share of its window among them: the L1
change is a count of windows crossed, partial ones by their share. (Used by
:class:`~blowfish_te.mechanisms.TunedOrderedHierarchical`; see docs/theory.md.)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._digest import digest
from .._validation import check_index_array, check_int
from .base import Workload, as_block, check_norm


class RampedPrefixes(Workload):
    """Rows (1/w_i) Σ_{t < w_i} s_{a_i + t} over K cells, windows [a_i, a_i + w_i - 1] sorted and
    disjoint (w_i = 1: the prefix count s_{a_i})."""

    def __init__(self, k: int, starts, widths):
        k = check_int(k, "k", minimum=1)
        starts = check_index_array(starts, "starts", k - 1)
        widths = check_index_array(widths, "widths", k)
        if starts.shape != widths.shape:
            raise ValueError(f"starts and widths must have the same length, got {starts.size} and {widths.size}")
        ends = starts + widths - 1
        if starts.size and (widths.min() < 1 or ends.max() > k - 1):
            raise ValueError(f"every window [start, start + width - 1] must have width >= 1 and lie in [0, {k - 1}]")
        if np.any(starts[1:] <= ends[:-1]):
            raise ValueError("the windows must be sorted and disjoint (each starts after the previous one ends)")
        self.starts, self.widths, self.ends = starts, widths, ends
        super().__init__((k,), starts.size, f"ramped prefixes({k}, {starts.size})")
        self.is_binary = bool(np.all(widths == 1))

    def fingerprint(self) -> str:
        return digest("ramped_prefixes", self.size, self.starts, self.widths)

    def _matmat(self, x):
        x = as_block(x)
        counts = np.cumsum(x, axis=0)
        sums = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(counts, axis=0)])
        return (sums[self.ends + 1] - sums[self.starts]) / self.widths[:, None]

    def _rmatmat(self, y):
        y = as_block(y)
        k = self.size
        spread = np.zeros((k + 1, y.shape[1]))
        np.add.at(spread, self.starts, y / self.widths[:, None])
        np.add.at(spread, self.ends + 1, -y / self.widths[:, None])
        on_counts = np.cumsum(spread[:k], axis=0)
        return np.cumsum(on_counts[::-1], axis=0)[::-1]  # (Lᵀ z)_j = Σ_{t >= j} z_t

    def _intervals(self, u, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x_u - x_v changes the cumulative counts [lo, hi] by ±1 (v = K, ⊥: [u, K-1]); also the sign."""
        k = self.size
        bottom = v == k
        lo = np.where(bottom, u, np.minimum(u, v))
        hi = np.where(bottom, k - 1, np.maximum(u, v) - 1)
        sign = np.where(bottom | (u < v), 1.0, -1.0)
        return lo, hi, sign

    def _overlaps(self, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        """Index ranges [first, last] of the windows meeting each interval [lo, hi]."""
        first = np.searchsorted(self.ends, lo, side="left")
        last = np.searchsorted(self.starts, hi, side="right") - 1
        return first, last

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Column u minus column v is ±(1/w_i)·|window i ∩ [lo, hi]| on row i, [lo, hi] the counts
        the move changes: every window inside the interval adds 1 (L1 and squared L2), the two
        partial ones at its ends their share (squared for L2) — one division each, no sums of
        rounded fractions."""
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        power = 1 if norm == "l1" else 2
        lo, hi, _ = self._intervals(u, v)
        empty = hi < lo
        lo, hi = np.where(empty, 0, lo), np.where(empty, 0, hi)
        first, last = self._overlaps(lo, hi)
        count = np.where(empty, 0, np.maximum(last - first + 1, 0))
        out = count.astype(np.float64)
        for index, valid in ((first, count > 0), (last, count > 1)):
            share = self._share(np.clip(index, 0, max(self.num_queries - 1, 0)), lo, hi)
            out -= np.where(valid, 1.0 - share**power, 0.0)
        return out

    def _share(self, i, lo, hi) -> np.ndarray:
        if self.num_queries == 0:
            return np.zeros(np.shape(lo))
        overlap = np.minimum(hi, self.ends[i]) - np.maximum(lo, self.starts[i]) + 1
        return np.maximum(overlap, 0) / self.widths[i]

    def times_incidence(self, child: np.ndarray, parent: np.ndarray) -> sp.csr_array:
        """W·P directly: column e holds ±|window i ∩ [lo_e, hi_e]|/w_i on the windows it meets."""
        child, parent = self._check_pairs(child, parent)
        lo, hi, sign = self._intervals(child, parent)
        first, last = self._overlaps(lo, hi)
        count = np.where(hi >= lo, np.maximum(last - first + 1, 0), 0)
        columns = np.repeat(np.arange(child.size), count)
        offsets = np.arange(columns.size) - np.repeat(np.cumsum(count) - count, count)
        rows = np.repeat(first, count) + offsets
        values = np.repeat(sign, count) * self._share(rows, lo[columns], hi[columns])
        return sp.csr_array((values, (rows, columns)), shape=(self.num_queries, child.size))

    def tosparse(self) -> sp.csr_array:
        """W itself (rows of up to K entries: fine for checks and small domains)."""
        k = self.size
        return self.times_incidence(np.arange(k), np.full(k, k))
