"""Grid histograms for 2-D data: UGrid and AGrid (Qardaji, Yang, Li, ICDE 2013), and the Hilbert
curve that orders a grid for 1-D partitioning (DAWA in 2-D: Li, Hay, Miklau, Wang, PVLDB 2014).

Both grids pick their resolution from the record total N. DPComp reads N from the data for free,
which is not private under unbounded DP (N moves by one between neighbours). Here N is either
given as public (``total=``) or measured with a share of ε, and the release's ``choice`` says which.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_real
from ..noise import add_laplace
from ..workloads import Workload
from .base import Mechanism, RecordTotal


def hilbert_order(shape) -> np.ndarray:
    """Flat indices of the cells of a 2-D grid in Hilbert-curve order (the curve on the enclosing
    2^n × 2^n square, cells outside the grid skipped), so consecutive cells are close in space."""
    rows, cols = (int(s) for s in shape)
    side = 1 << max(0, (max(rows, cols) - 1).bit_length())
    d = np.arange(side * side, dtype=np.int64)
    x = np.zeros_like(d)
    y = np.zeros_like(d)
    t = d.copy()
    s = 1
    while s < side:  # the classic d → (x, y) walk, one quadrant level per step, vectorised
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x += s * rx
        y += s * ry
        t //= 4
        s *= 2
    inside = (x < rows) & (y < cols)
    return x[inside] * cols + y[inside]


def _cuts(side: int, parts: int) -> np.ndarray:
    """Boundaries 0 = b_0 < ... < b_parts = side of ``parts`` near-equal intervals, b_j = round(j·side/parts)."""
    parts = max(1, min(int(parts), side))
    return np.round(np.arange(parts + 1) * side / parts).astype(np.int64)


def _part_of(position: np.ndarray, side: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """For each (position, side, parts), elementwise: the interval of :func:`_cuts` (side, parts)
    holding the position, the j with b_j <= position < b_{j+1}."""
    def cut(j):
        return np.round(j * side / parts).astype(np.int64)

    j = position * parts // side  # within one of the answer: b_j rounds j·side/parts
    j = np.where(cut(j) > position, j - 1, j)
    return np.where(cut(j + 1) <= position, j + 1, j)


def _block_labels(shape, row_cuts: np.ndarray, col_cuts: np.ndarray) -> np.ndarray:
    """Label of every cell (flat) for the grid of blocks given by the cut points on each axis."""
    rows = np.searchsorted(row_cuts, np.arange(shape[0]), side="right") - 1
    cols = np.searchsorted(col_cuts, np.arange(shape[1]), side="right") - 1
    return (rows[:, None] * (col_cuts.size - 1) + cols[None, :]).ravel()


class _GridMechanism(RecordTotal, Mechanism, register=False):
    """Shared parts: 2-D input and the record total (public or bought)."""

    models_records = True
    needs_grid = True

    def __init__(self, c: float = 10.0, total: float | None = None, total_share: float = 0.05):
        self.c = check_real(c, "c", 0, exclusive=True)
        self._init_total(total, total_share)

    def _grid_input(self, workload, x, epsilon, rng):
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        if len(workload.domain) != 2:
            raise ValueError(
                f"{self.name} partitions a 2-D grid of counts, got domain {workload.domain}; it runs under unbounded DP "
                "on the grid itself (other policies' transforms give counts over tree edges, which are not a grid)"
            )
        return workload, x, epsilon, gen


def _spread(labels: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Each block's total spread evenly over its cells."""
    return totals[labels] / np.bincount(labels, minlength=totals.size)[labels]


class UGrid(_GridMechanism):
    """Uniform grid: m × m blocks, m = √(N ε / c) (c = 10), block totals with Laplace(1/ε), spread
    evenly over their cells; answers W x̂.

    Privacy (unit changes): the blocks partition the grid, so one record moves one block total by
    one (L1 sensitivity 1); with the record total bought at ρε (sensitivity 1), sequential
    composition gives ρε + (1 - ρ)ε = ε. The grid size depends on the data only through that
    noisy total (post-processing).
    """

    name = "ugrid"

    def run(self, workload: Workload, x, epsilon: float, rng=None) -> np.ndarray:
        workload, x, epsilon, gen = self._grid_input(workload, x, epsilon, rng)
        total, epsilon = self._record_total(x, epsilon, gen)
        side = max(1, math.ceil(math.sqrt(total * epsilon / self.c)))
        labels = _block_labels(workload.domain, _cuts(workload.domain[0], side), _cuts(workload.domain[1], side))
        counts = np.bincount(labels, weights=x)
        noisy = add_laplace(counts, 1.0 / epsilon, gen, sensitivity=1.0, integer=True)
        return np.asarray(workload.matvec(_spread(labels, noisy)), dtype=np.float64)


class AGrid(_GridMechanism):
    """Adaptive grid: a coarse m₁ × m₁ grid, m₁ = max(10, ⌈√(N ε / c) / 4⌉), measured at αε; each
    coarse block with noisy count N' is cut into m₂ × m₂, m₂ = ⌈√(N' (1-α) ε / (c/2))⌉, measured
    at (1-α)ε. Per coarse block the two levels are combined by inverse-variance weighting and the
    fine blocks absorb the difference equally (constrained inference), then spread evenly.

    Privacy (unit changes): each level partitions the grid (sensitivity 1 per level); the fine
    grid depends on the data only through the coarse noisy counts. With the record total bought at
    ρε, sequential composition gives ρε + α(1-ρ)ε + (1-α)(1-ρ)ε = ε.
    """

    name = "agrid"

    def __init__(self, c: float = 10.0, alpha: float = 0.5, total: float | None = None, total_share: float = 0.05):
        super().__init__(c=c, total=total, total_share=total_share)
        self.alpha = check_real(alpha, "alpha", 0, exclusive=True)
        if self.alpha >= 1:
            raise ValueError(f"alpha must be in (0, 1), the share of ε for the coarse grid; got {alpha}")

    def run(self, workload: Workload, x, epsilon: float, rng=None) -> np.ndarray:
        workload, x, epsilon, gen = self._grid_input(workload, x, epsilon, rng)
        total, epsilon = self._record_total(x, epsilon, gen)
        rows, cols = workload.domain
        eps1, eps2 = self.alpha * epsilon, (1 - self.alpha) * epsilon
        side = max(10, math.ceil(math.sqrt(total * epsilon / self.c) / 4))
        row_cuts, col_cuts = _cuts(rows, side), _cuts(cols, side)
        coarse = _block_labels((rows, cols), row_cuts, col_cuts)
        coarse_noisy = add_laplace(np.bincount(coarse, weights=x), 1.0 / eps1, gen, sensitivity=1.0, integer=True)
        # fine blocks: each coarse block cut by its own noisy count (post-processing)
        parts = np.ceil(np.sqrt(np.maximum(coarse_noisy, 0.0) * eps2 / (self.c / 2)))
        parts = np.clip(parts, 1, max(rows, cols)).astype(np.int64)  # no block has more cells a side
        block_rows, block_cols = np.divmod(np.arange(coarse_noisy.size), col_cuts.size - 1)
        heights, widths = np.diff(row_cuts)[block_rows], np.diff(col_cuts)[block_cols]
        parts_rows, parts_cols = np.minimum(parts, heights), np.minimum(parts, widths)
        per_block = parts_rows * parts_cols
        offset = np.cumsum(per_block) - per_block
        grid_rows, grid_cols = np.divmod(np.arange(rows * cols), cols)
        sub_row = _part_of(grid_rows - row_cuts[block_rows[coarse]], heights[coarse], parts_rows[coarse])
        sub_col = _part_of(grid_cols - col_cuts[block_cols[coarse]], widths[coarse], parts_cols[coarse])
        fine = offset[coarse] + sub_row * parts_cols[coarse] + sub_col
        owner = np.repeat(np.arange(coarse_noisy.size), per_block)
        fine_noisy = add_laplace(np.bincount(fine, weights=x, minlength=owner.size), 1.0 / eps2, gen, sensitivity=1.0, integer=True)
        # constrained inference per coarse block: weights 1/Var, Var(Lap(b)) = 2b²
        fine_sum = np.bincount(owner, weights=fine_noisy, minlength=coarse_noisy.size)
        var_coarse, var_sum = 2.0 / eps1**2, per_block * 2.0 / eps2**2
        combined = (coarse_noisy / var_coarse + fine_sum / var_sum) / (1.0 / var_coarse + 1.0 / var_sum)
        fine_est = fine_noisy + ((combined - fine_sum) / per_block)[owner]
        return np.asarray(workload.matvec(_spread(fine, fine_est)), dtype=np.float64)
