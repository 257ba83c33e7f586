"""Grid histograms for 2-D data: UGrid and AGrid (Qardaji, Yang, Li, ICDE 2013), and the Hilbert
curve that orders a grid for 1-D partitioning (DAWA in 2-D: Li, Hay, Miklau, Wang, PVLDB 2014).

Both grids pick their resolution from the record total N. DPComp reads N from the data for free,
which is not private under unbounded DP (N moves by one between neighbours). Here N is either
given as public (``total=``) or measured with a share of ε, and the release's ``choice`` says which.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .._validation import check_real
from ..noise import RandomSource, add_laplace
from ..policies import Policy
from ..routes import Outcome
from ..selection import Decision, ErrorModel, decide, error_model, measure
from ..workloads import Workload
from ..workloads.base import CHUNK_ENTRIES
from .base import Mechanism, RecordTotal
from .plain import aggregation_gain, plain_strategy, workload_class


def hilbert_order(shape: Sequence[int]) -> np.ndarray:
    """Flat indices of the cells of a 2-D grid in Hilbert-curve order (the curve on the enclosing
    2^n × 2^n square, cells outside the grid skipped), so consecutive cells are close in space.
    Computed once per shape (a read-only array)."""
    rows, cols = (int(s) for s in shape)
    return _hilbert_order(rows, cols)


@functools.lru_cache(maxsize=16)
def _hilbert_order(rows: int, cols: int) -> np.ndarray:
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
    order = x[inside] * cols + y[inside]
    order.flags.writeable = False
    return order


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
    """Shared parts: 2-D input, the record total (public or bought) and the private check."""

    models_records = True
    needs_grid = True
    predicts_error = True

    def __init__(self, c: float = 10.0, total: float | None = None, total_share: float = 0.02, select: bool = True):
        self.c = check_real(c, "c", 0, exclusive=True)
        self._init_total(total, total_share)
        if not isinstance(select, (bool, np.bool_)):
            raise TypeError(f"select must be True or False (check privately whether the grid pays), got {select!r}")
        self.select = bool(select)

    def _check_grid(self, workload: Workload) -> None:
        if len(workload.domain) != 2:
            raise ValueError(
                f"{self.name} partitions a 2-D grid of counts, got domain {workload.domain}; it runs under unbounded DP "
                "on the grid itself (other policies' transforms give counts over tree edges, which are not a grid)"
            )

    def model(self, workload: Workload, calibrated: bool = False) -> ErrorModel:
        """The mechanism's fitted error model for ``workload`` (its workload class on a grid;
        ``calibrated``: see :func:`~blowfish_te.selection.error_model`)."""
        gain = self._cache("aggregation gain").get(workload, lambda: aggregation_gain(workload))
        return error_model(self.name, 2, workload_class(workload, gain), calibrated=calibrated)

    def check(self, workload: Workload, x: np.ndarray, epsilon: float, gen) -> Decision:
        """The record total and, with ``select``, the private check (validated arguments; the
        first draws from ``gen``): :func:`blowfish_te.selection.measure` — the total public, or
        bought at ``total_share``·ε, and DAWA's cost of the data along the Hilbert curve — and
        :func:`~blowfish_te.selection.decide` with :meth:`model` (without ``select``: always the
        blocks, nothing predicted)."""
        order = hilbert_order(workload.domain)
        features = measure(x[order], epsilon, gen, total=self.total, total_budget=self.total_share * epsilon,
                           cost=self.select)
        if not self.select:
            return Decision("partition", f"{self.name} without a check", None, features)
        return decide(features, self.model(workload))

    def _checked_blocks(self, workload: Workload, x: np.ndarray, epsilon: float, gen) -> tuple[float, float, bool]:
        """(N at least 1, ε left, whether to build the blocks) from :meth:`check`."""
        decision = self.check(workload, x, epsilon, gen)
        return max(decision.features.total, 1.0), epsilon - decision.spent, decision.route == "partition"


def _spread(labels: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Each block's total spread evenly over its cells."""
    return totals[labels] / np.bincount(labels, minlength=totals.size)[labels]


def _fine_parts(length: np.ndarray, side: np.ndarray, apart: np.ndarray, offset: np.ndarray,
                block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Along one axis of AGrid's coarse blocks (``length`` cells each, cut into fine parts of
    ``side`` cells): the number of parts per block and, for each cell at ``offset`` within its
    ``block``, its part. Where ``apart``, the block's first cell is a part of its own and the rest
    is cut from the next cell on."""
    parts = np.where(apart, 1 + -(-(length - 1) // side), -(-length // side))
    cell_side, cell_apart = side[block], apart[block]
    return parts, np.where(cell_apart, np.where(offset == 0, 0, 1 + (offset - 1) // cell_side), offset // cell_side)


def _overlaps(lo: np.ndarray, hi: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """(m, B) lengths of [lo, hi] (inclusive) inside each interval [cuts[b], cuts[b + 1])."""
    return np.maximum(0, np.minimum(hi[:, None] + 1, cuts[None, 1:]) - np.maximum(lo[:, None], cuts[None, :-1]))


def block_spread_terms(lo: np.ndarray, hi: np.ndarray, shape: Sequence[int], row_cuts: np.ndarray, col_cuts: np.ndarray
                       ) -> tuple[np.ndarray, float]:
    """For m rectangles [lo_q, hi_q] (inclusive) of a grid and the blocks cut by ``row_cuts`` ×
    ``col_cuts``, with U the operator spreading each block's total evenly over its cells and
    a_q(b) = |q ∩ b| / |b|:

    - the squared column norms ‖W(I − U)e_j‖² = Σ_q (1[j ∈ q] − a_q(b(j)))², one per cell (flat);
    - Σ_q Σ_b a_q(b)²: the answers' noise, up to the variance of one block total.

    Every term factors along the axes (|q ∩ b| is a product of interval overlaps), so both come
    from products of m × side arrays, O(m·(rows + cols) + rows·cols) memory per chunk of queries,
    without W's sparse form (8·10⁶ non-zeros for DPBench's 2000 rectangles over 128²)."""
    rows, cols = (int(v) for v in shape)
    block_row = np.searchsorted(row_cuts, np.arange(rows), side="right") - 1
    block_col = np.searchsorted(col_cuts, np.arange(cols), side="right") - 1
    sizes = np.outer(np.diff(row_cuts), np.diff(col_cuts)).astype(np.float64)
    a2 = np.zeros_like(sizes)
    cover = np.zeros((rows, cols))
    cross = np.zeros((rows, cols))
    step = max(1, CHUNK_ENTRIES // (2 * (rows + cols)))
    for start in range(0, lo.shape[0], step):
        l, h = lo[start:start + step], hi[start:start + step]
        over_rows = _overlaps(l[:, 0], h[:, 0], row_cuts).astype(np.float64)
        over_cols = _overlaps(l[:, 1], h[:, 1], col_cuts).astype(np.float64)
        a2 += (over_rows**2).T @ over_cols**2
        in_rows = ((np.arange(rows) >= l[:, :1]) & (np.arange(rows) <= h[:, :1])).astype(np.float64)
        in_cols = ((np.arange(cols) >= l[:, 1:2]) & (np.arange(cols) <= h[:, 1:2])).astype(np.float64)
        cover += in_rows.T @ in_cols
        cross += (in_rows * over_rows[:, block_row]).T @ (in_cols * over_cols[:, block_col])
    a2 /= sizes**2
    per_cell = np.ix_(block_row, block_col)
    columns = a2[per_cell] + cover - 2.0 * cross / sizes[per_cell]
    return np.maximum(columns, 0.0).reshape(-1), float(a2.sum())


#: How many standard deviations of its noise UGrid's bias probe must clear before it vetoes the
#: blocks (a wrong veto costs the blocks' advantage, up to hundreds of times at small N·ε/K).
PROBE_CONFIDENCE = 3.0


class UGrid(_GridMechanism):
    """Uniform grid: square blocks of ⌊√(K/M)⌋ cells a side (the last ones cut by the grid's
    edge), M = N ε / c blocks wanted (c = 10), block totals with Laplace(1/ε), spread evenly over
    their cells; answers W x̂.

    The side is a whole number of cells, as in DPComp's implementation of Qardaji et al.'s rule:
    m = √M parts per axis of near-equal width would give blocks of 1 and 2 cells once M nears
    K, and a few heavy cells spread over 2-cell blocks cost more than the noise they save; with
    integral sides every cell is its own block (Identity) as soon as M >= K/4.

    With ``select`` (the default) a private check first (:meth:`check`: DAWA's cost of the data
    along the Hilbert curve and UGrid's fitted error model, then — for rectangle workloads, when
    the model picks the blocks — the blocks' own error: exact for single cells, by a
    probe of their bias for blocks of several cells) falls back to the plain release —
    ``auto``'s choice for the workload — where the blocks are predicted to lose (measured before:
    heavy cells spread over blocks cost up to 70 times Identity's error on rectangles).

    The bias probe: with U the block spreading (fixed by the noisy total), the blocks' squared
    error is exactly b² + 2/ε²·Σ_q Σ_blocks a_q(B)², b = ‖W(I − U)x‖₂, a_q(B) = |q ∩ B|/|B|
    (:func:`block_spread_terms`). b is released with Laplace(L/(πε)), L = max_j ‖W(I − U)e_j‖₂
    computed exactly, and the blocks are vetoed when even b̂ less :data:`PROBE_CONFIDENCE`
    standard deviations of its noise gives more error than the plain release's analytic error.
    On DPBench's rectangles over 128² the model alone released blocks at 3.4 times the plain
    release's RMSE in some seeds on data with a few heavy cells (SF-CABS-E at 10⁴ records,
    ε = 0.1; 10–14 times its squared error on ADULT and SF-CABS at 10⁴–10⁵ records).

    Privacy (unit changes): the blocks partition the grid, so one record moves one block total by
    one (L1 sensitivity 1); b is a seminorm of x, so it moves by at most ‖W(I − U)e_j‖₂ ≤ L when
    x moves by e_j. With the record total bought at ρε (sensitivity 1), the check's costs at σε
    and the probe at πε (only on the blocks' path), sequential composition gives
    ρε + σε + πε + (1 - ρ - σ - π)ε = ε. The grid size depends on the data only through the
    noisy total, the choice only through the noisy features (post-processing).
    """

    name = "ugrid"

    def __init__(self, c: float = 10.0, total: float | None = None, total_share: float = 0.02, select: bool = True,
                 probe_share: float = 0.02):
        super().__init__(c=c, total=total, total_share=total_share, select=select)
        self.probe_share = check_real(probe_share, "probe_share", 0, 1, exclusive=True)
        if self.total_share + self.probe_share >= 0.9:  # the check's costs take at most 3 % more
            raise ValueError(f"total_share + probe_share must leave ε for the check and the release (below 0.9), got "
                             f"{self.total_share} + {self.probe_share}")

    def _block_side(self, shape, total: float, epsilon: float) -> int:
        rows, cols = shape
        wanted = total * epsilon / self.c
        return max(1, math.isqrt(int(rows * cols / wanted))) if wanted > 0 else max(rows, cols)

    def check(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource) -> Decision:
        """The grids' check (:meth:`_GridMechanism.check`); then, for rectangle workloads where the
        model picks the blocks, the blocks judged on their own error: exactly when they carry no
        bias for the queries (single cells, or queries made of whole blocks: their noise against
        the plain release's), else by the bias probe (class docstring) at ``probe_share``·ε, whose
        cost the returned decision's features include."""
        decision = super().check(workload, x, epsilon, gen)
        bounds = workload.query_bounds()
        if not self.select or bounds is None or decision.route != "partition":
            return decision
        spent = self.probe_share * epsilon
        total, rest = max(decision.features.total, 1.0), epsilon - decision.spent - spent
        block = self._block_side(workload.domain, total, rest)
        rows, cols = workload.domain
        row_cuts, col_cuts = _square_cuts(rows, block), _square_cuts(cols, block)
        columns, noise_terms = block_spread_terms(*bounds, workload.domain, row_cuts, col_cuts)
        reach = math.sqrt(float(columns.max()))
        if reach == 0.0:  # W(I − U) = 0 (single cells, or queries of whole blocks): no bias, the error is known
            rest = epsilon - decision.spent
            noise, plain_error = 2.0 / rest**2 * noise_terms, plain_strategy(self, workload).expected_error(workload, rest)
            route = "partition" if noise < plain_error else "plain"
            return Decision(route, f"{route}: the {block}×{block} blocks carry no bias for these queries, their noise is "
                            f"{noise / plain_error:.3g} × the plain release's error", decision.predicted, decision.features)
        labels = _block_labels(workload.domain, row_cuts, col_cuts)
        spread = _spread(labels, np.bincount(labels, weights=x))
        bias = float(np.linalg.norm(np.asarray(workload.matvec(x), dtype=np.float64) - workload.matvec(spread)))
        noisy = add_laplace(np.array([bias]), reach / spent, gen, sensitivity=reach, integer=False)[0]
        low = max(noisy - PROBE_CONFIDENCE * math.sqrt(2.0) * reach / spent, 0.0)
        blocks_error = low**2 + 2.0 / rest**2 * noise_terms
        plain_error = plain_strategy(self, workload).expected_error(workload, rest)
        features = replace(decision.features, spent=decision.features.spent + spent)
        if blocks_error > plain_error:
            return Decision("plain", f"plain release: UGrid's bias probe puts its {block}×{block} blocks at ≥ "
                            f"{blocks_error / plain_error:.3g} × its error", decision.predicted, features)
        return Decision("partition", f"{decision.reason}; the bias probe does not rule the {block}×{block} blocks out",
                        decision.predicted, features)

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        self._check_grid(workload)
        total, epsilon, blocks = self._checked_blocks(workload, x, epsilon, gen)
        if not blocks:
            return Outcome(np.asarray(plain_strategy(self, workload).run(workload, x, epsilon, gen), dtype=np.float64))
        rows, cols = workload.domain
        block = self._block_side(workload.domain, total, epsilon)
        labels = _block_labels(workload.domain, _square_cuts(rows, block), _square_cuts(cols, block))
        counts = np.bincount(labels, weights=x)
        noisy = add_laplace(counts, 1.0 / epsilon, gen, sensitivity=1.0, integer=True)
        return Outcome(np.asarray(workload.matvec(_spread(labels, noisy)), dtype=np.float64))


class AGrid(_GridMechanism):
    """Adaptive grid: a coarse m₁ × m₁ grid, m₁ = max(10, ⌈√(N ε / c) / 4⌉), measured at αε; each
    coarse block with noisy count N' is cut into m₂ × m₂, m₂ = ⌈√(N' (1-α) ε / (c/2))⌉, measured
    at (1-α)ε. Per coarse block the two levels are combined by inverse-variance weighting and the
    fine blocks absorb the difference equally (constrained inference), then spread evenly.

    α = 1/4 by default, where Qardaji et al. and DPComp use 1/2: the coarse totals only have to
    say roughly where the records are, and the fine totals carry the answers. On DPBench's 2000
    rectangles over 128² (seven shapes, 10⁴–10⁷ records, ε ∈ {0.01, 0.1}, 8–10 seeds) α = 1/4 had
    the lower error in 41 of 48 cells: 0.69–1.15 times α = 1/2's, 0.89 at the median.

    With ``first_apart`` (the default) the coarse blocks along the grid's first row that the fine
    level cuts keep that row as a fine row of its own, and likewise the first column: an attribute
    with many zeros puts them there (on ADULT-2D most records lie along row 0 and column 0), and a
    fine block reaching across into row 1 spreads them over cells that rectangles starting at row 1
    read. On DPBench's 2000 rectangles over 128² (seven shapes, 10⁴ and 10⁶ records, ε ∈ {0.01,
    0.1}, 40 seeds, without the check) AGrid's error on ADULT-2D fell to 0.24–0.89 times; on the
    six others it was 0.95–1.01 times. Splitting blocks the fine level leaves whole, too, cost up
    to 1.3 times on clustered data away from the edges. Which blocks keep a row or column apart
    depends only on the grid and on the coarse noisy counts, so the privacy argument below is
    unchanged.

    With ``select`` (the default) a private check first (:meth:`_checked_blocks`: DAWA's cost of
    the data along the Hilbert curve for a share σ of ε, and AGrid's fitted error model) falls
    back to the plain release — ``auto``'s choice for the workload — where the grid is predicted
    to lose; otherwise both levels keep their shares of the rest.

    Privacy (unit changes): each level partitions the grid (sensitivity 1 per level); the fine
    grid depends on the data only through the coarse noisy counts; the check's cost feature has
    sensitivity 1. With the record total bought at ρε, sequential composition gives
    ρε + σε + α(1-ρ-σ)ε + (1-α)(1-ρ-σ)ε = ε (or the plain release at (1-ρ-σ)ε).
    """

    name = "agrid"

    def __init__(self, c: float = 10.0, alpha: float = 0.25, total: float | None = None, total_share: float = 0.02,
                 select: bool = True, first_apart: bool = True):
        super().__init__(c=c, total=total, total_share=total_share, select=select)
        self.alpha = check_real(alpha, "alpha", 0, exclusive=True)
        if self.alpha >= 1:
            raise ValueError(f"alpha must be in (0, 1), the share of ε for the coarse grid; got {alpha}")
        if not isinstance(first_apart, (bool, np.bool_)):
            raise TypeError(f"first_apart must be True or False (keep the grid's first row and column as fine rows and "
                            f"columns of their own), got {first_apart!r}")
        self.first_apart = bool(first_apart)

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        self._check_grid(workload)
        total, epsilon, blocks = self._checked_blocks(workload, x, epsilon, gen)
        if not blocks:
            return Outcome(np.asarray(plain_strategy(self, workload).run(workload, x, epsilon, gen), dtype=np.float64))
        rows, cols = workload.domain
        eps1, eps2 = self.alpha * epsilon, (1 - self.alpha) * epsilon
        wanted = max(10, math.floor(math.sqrt(max(total, 0.0) * epsilon / self.c) / 4))  # m₁ blocks a side
        side = max(1, math.floor(math.sqrt(rows * cols) / wanted))
        row_cuts, col_cuts = _square_cuts(rows, side), _square_cuts(cols, side)
        coarse = _block_labels((rows, cols), row_cuts, col_cuts)
        coarse_noisy = add_laplace(np.bincount(coarse, weights=x), 1.0 / eps1, gen, sensitivity=1.0, integer=True)
        # fine blocks: each coarse block cut by its own noisy count into m₂ × m₂ (post-processing)
        block_rows, block_cols = np.divmod(np.arange(coarse_noisy.size), col_cuts.size - 1)
        heights, widths = np.diff(row_cuts)[block_rows], np.diff(col_cuts)[block_cols]
        parts = np.maximum(np.floor(np.sqrt(np.maximum(coarse_noisy, 0.0) * eps2 / (self.c / 2))), 1.0)
        fine_side = np.maximum(np.floor(np.sqrt(heights * widths) / parts), 1).astype(np.int64)  # whole cells a side
        grid_rows, grid_cols = np.divmod(np.arange(rows * cols), cols)
        # with first_apart, the blocks along the first row (column) that are cut keep it as a fine row (column) of its own
        cut = (fine_side > 1) & (parts > 1) & self.first_apart
        row_apart, col_apart = cut & (block_rows == 0), cut & (block_cols == 0)
        parts_rows, sub_row = _fine_parts(heights, fine_side, row_apart, grid_rows - row_cuts[block_rows[coarse]], coarse)
        parts_cols, sub_col = _fine_parts(widths, fine_side, col_apart, grid_cols - col_cuts[block_cols[coarse]], coarse)
        per_block = parts_rows * parts_cols
        offset = np.cumsum(per_block) - per_block
        fine = offset[coarse] + sub_row * parts_cols[coarse] + sub_col
        owner = np.repeat(np.arange(coarse_noisy.size), per_block)
        fine_noisy = add_laplace(np.bincount(fine, weights=x, minlength=owner.size), 1.0 / eps2, gen, sensitivity=1.0, integer=True)
        # constrained inference per coarse block: weights 1/Var, Var(Lap(b)) = 2b²
        fine_sum = np.bincount(owner, weights=fine_noisy, minlength=coarse_noisy.size)
        var_coarse, var_sum = 2.0 / eps1**2, per_block * 2.0 / eps2**2
        combined = (coarse_noisy / var_coarse + fine_sum / var_sum) / (1.0 / var_coarse + 1.0 / var_sum)
        fine_est = fine_noisy + ((combined - fine_sum) / per_block)[owner]
        return Outcome(np.asarray(workload.matvec(_spread(fine, fine_est)), dtype=np.float64))
