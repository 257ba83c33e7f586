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
from ..selection import choose_for_ranges, feature_stream
from ..workloads import BucketWorkload, Workload
from .base import Mechanism, RecordTotal
from .plain import plain_strategy

#: Share of ε UGrid spends on its blocks' bias before measuring them (when blocks have more than one cell).
PROBE_SHARE = 0.05
#: AGrid runs when DAWA's unguarded cost of the data (along the Hilbert curve) is below this share
#: of K/ε (measured on the DPBench 2-D shapes), else the plain release.
AGRID_FIT = 0.15


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


def _square_cuts(side: int, block: int) -> np.ndarray:
    """Boundaries 0, b, 2b, ..., side of blocks of ``block`` cells (the last one cut short)."""
    return np.append(np.arange(0, side, block), side)


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

    def __init__(self, c: float = 10.0, total: float | None = None, total_share: float = 0.05, select: bool = True):
        self.c = check_real(c, "c", 0, exclusive=True)
        self._init_total(total, total_share)
        if not isinstance(select, (bool, np.bool_)):
            raise TypeError(f"select must be True or False (check privately whether the grid pays), got {select!r}")
        self.select = bool(select)

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
    """Uniform grid: square blocks of ⌊√(K/M)⌋ cells a side (the last ones cut by the grid's
    edge), M = N ε / c blocks wanted (c = 10), block totals with Laplace(1/ε), spread evenly over
    their cells; answers W x̂.

    The side is a whole number of cells, as in DPComp's implementation of Qardaji et al.'s rule:
    m = √M parts per axis of near-equal width would give blocks of 1 and 2 cells once M nears
    K, and a few heavy cells spread over 2-cell blocks cost more than the noise they save; with
    integral sides every cell is its own block (Identity) as soon as M >= K/4.

    With ``select`` (the default) and blocks of several cells, the blocks' bias for the workload
    is checked first (:meth:`_blocks_pay`, :data:`PROBE_SHARE` of ε): b = ‖W(E x - x)‖₂, E the
    block averages, is a seminorm of x with sensitivity at most L = 2 maxᵢ‖W eᵢ‖₂, released with
    Laplace(L/σε); UGrid falls back to the plain release (the workload's linear strategy of lowest
    analytic error) when b² plus the blocks' noise exceeds the plain release's analytic error
    (measured: heavy cells spread over blocks cost up to 70 times Identity's error on rectangles).

    Privacy (unit changes): the blocks partition the grid, so one record moves one block total by
    one (L1 sensitivity 1); with the record total bought at ρε (sensitivity 1) and the bias at σε
    (sensitivity L), sequential composition gives ρε + σε + (1 - ρ - σ)ε = ε. The grid size
    depends on the data only through the noisy total, the choice only through the noisy bias
    (post-processing).
    """

    name = "ugrid"

    def run(self, workload: Workload, x, epsilon: float, rng=None) -> np.ndarray:
        workload, x, epsilon, gen = self._grid_input(workload, x, epsilon, rng)
        full = epsilon
        total, epsilon = self._record_total(x, epsilon, gen)
        rows, cols = workload.domain
        wanted = total * epsilon / self.c
        block = max(1, math.isqrt(int(rows * cols / wanted))) if wanted > 0 else max(rows, cols)
        labels = _block_labels(workload.domain, _square_cuts(rows, block), _square_cuts(cols, block))
        if self.select and block > 1:
            spent = PROBE_SHARE * full
            epsilon -= spent
            if not self._blocks_pay(workload, x, labels, epsilon, spent, gen):
                return plain_strategy(self, workload).run(workload, x, epsilon, gen)
        counts = np.bincount(labels, weights=x)
        noisy = add_laplace(counts, 1.0 / epsilon, gen, sensitivity=1.0, integer=True)
        return np.asarray(workload.matvec(_spread(labels, noisy)), dtype=np.float64)


    def _blocks_pay(self, workload: Workload, x: np.ndarray, labels: np.ndarray, epsilon: float, spent: float, gen) -> bool:
        """Whether the blocks' bias plus their noise at ``epsilon`` is predicted below the plain
        release's error: b = ‖W(E x - x)‖₂, E the block averages, is released with Laplace(L/spent),
        L = 2 max_i ‖W e_i‖₂ >= max_i ‖W(E - I) e_i‖₂ its sensitivity (E e_i averages columns)."""
        blocks = BucketWorkload(workload, labels)
        totals = np.bincount(labels, weights=x)
        bias = float(np.linalg.norm(np.asarray(blocks.matvec(totals)) - np.asarray(workload.matvec(x))))
        reach = 2.0 * float(np.sqrt(workload.column_norms("l2sq").max()))
        noisy = add_laplace(np.array([bias]), reach / spent, feature_stream(gen), sensitivity=reach, integer=False)[0]
        m = workload.num_queries
        predicted = max(noisy, 0.0) ** 2 / m + 2.0 / epsilon**2 * blocks.frobenius_sq() / m
        plain = plain_strategy(self, workload).expected_error(workload, epsilon) / m
        return predicted < plain


class AGrid(_GridMechanism):
    """Adaptive grid: a coarse m₁ × m₁ grid, m₁ = max(10, ⌈√(N ε / c) / 4⌉), measured at αε; each
    coarse block with noisy count N' is cut into m₂ × m₂, m₂ = ⌈√(N' (1-α) ε / (c/2))⌉, measured
    at (1-α)ε. Per coarse block the two levels are combined by inverse-variance weighting and the
    fine blocks absorb the difference equally (constrained inference), then spread evenly.

    With ``select`` (the default) a private check first (:func:`blowfish_te.selection.choose_for_ranges`
    with :data:`AGRID_FIT`, on the noisy total already bought and DAWA's cost of the data along the
    Hilbert curve for a share σ of ε) falls back to the plain release — the workload's linear
    strategy of lowest analytic error — where the data are dense and uneven at the noise's scale
    (measured: 1.17 times Identity on a DPComp 2-D set at 10⁶ records, ε = 0.01); otherwise both
    levels keep their shares of the rest.

    Privacy (unit changes): each level partitions the grid (sensitivity 1 per level); the fine
    grid depends on the data only through the coarse noisy counts; the check's cost feature has
    sensitivity 1. With the record total bought at ρε, sequential composition gives
    ρε + σε + α(1-ρ-σ)ε + (1-α)(1-ρ-σ)ε = ε (or the plain release at (1-ρ-σ)ε).
    """

    name = "agrid"

    def __init__(self, c: float = 10.0, alpha: float = 0.5, total: float | None = None, total_share: float = 0.05,
                 select: bool = True):
        super().__init__(c=c, total=total, total_share=total_share, select=select)
        self.alpha = check_real(alpha, "alpha", 0, exclusive=True)
        if self.alpha >= 1:
            raise ValueError(f"alpha must be in (0, 1), the share of ε for the coarse grid; got {alpha}")

    def run(self, workload: Workload, x, epsilon: float, rng=None) -> np.ndarray:
        workload, x, epsilon, gen = self._grid_input(workload, x, epsilon, rng)
        full = epsilon
        total, epsilon = self._record_total(x, epsilon, gen)
        if self.select:
            decision = choose_for_ranges(x[hilbert_order(workload.domain)], full, gen, fit_max=AGRID_FIT, total=total)
            epsilon -= decision.spent  # both levels keep their shares of the rest
            if decision.route != "partition":
                return plain_strategy(self, workload).run(workload, x, epsilon, gen)
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
