"""The plain release a data-dependent mechanism is measured against and falls back to: the linear
strategy of lowest analytic error for the workload — ``auto``'s choice —, chosen without looking at
the data."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..workloads import Workload, evenly_spaced_queries
from ..workloads.buckets import DENSE_GRAM_BUCKETS
from .base import LinearMechanism, Mechanism
from .hierarchical import HB, GreedyH
from .laplace import Identity

if TYPE_CHECKING:
    from ..policies import Policy
    from ..routes import Candidate
    from .auto import Auto
    from .optimized import Optimized

#: Iteration limits of the stage-two p-Identity search (one start), the longer where it fits: at
#: 36-435 buckets of DPBench prefixes 300 end within 1 % of 300 iterations with two starts; at
#: 552-1,436 buckets 100 iterations with 16 rows reach 0.25-0.66 times the error of Identity, HB
#: and GreedyH (300 iterations: at most 6 % lower).
STAGE_TWO_ITERATIONS = (300, 100)
#: Rows of the stage-two search below the default K/16, the most that fit being taken.
STAGE_TWO_ROWS = (16, 8)
#: Seconds the stage-two search may be predicted to take (:func:`stage_two_seconds`, from sizes
#: only, so the choice never depends on the machine): beyond it the analytic candidates alone.
STAGE_TWO_SECONDS = 0.2
#: The cost model of :func:`stage_two_seconds`, fitted on DAWA's buckets of DPBench prefixes (1-D)
#: and rectangles (128²), 139-1,436 buckets, 8-32 rows, 100-300 iterations, one core: seconds per
#: (bucket² × row × iteration) (the Gram product of every step), per (query × bucket²) (the Gram
#: matrix) and per (bucket × row × iteration) (the rest of a step); measured within 0.6-1.3 times.
STAGE_TWO_COST = (1.8e-11, 3.2e-11, 5.2e-8)


def stage_two_seconds(buckets: int, queries: int, rows: int, iterations: int) -> float:
    """The predicted seconds of the stage-two search over ``buckets`` (with its dense Gram matrix
    from ``queries`` queries): :data:`STAGE_TWO_COST` · (m²·p·T, Q·m², m·p·T)."""
    per_step, gram, rest = STAGE_TWO_COST
    m = buckets
    return per_step * m * m * rows * iterations + gram * queries * m * m + rest * m * rows * iterations


def stage_two_optimized(workload: Workload) -> Optimized | None:
    """``auto``'s optimised candidate for a workload over buckets, planned inside the release (a
    partition's buckets are never stored): p-Identity with one start and the most rows
    (K/16, else :data:`STAGE_TWO_ROWS`) and iterations (:data:`STAGE_TWO_ITERATIONS`) whose search
    :func:`stage_two_seconds` predicts within :data:`STAGE_TWO_SECONDS`, kept out of the strategy
    store; None when none does, when the workload's Gram matrix is not dense (its products
    would pass through W over the cells), or when it is diagonal (disjoint queries, as a
    histogram's: Laplace on the buckets is optimal there, Identity)."""
    if not workload.structured_gram or workload.size > DENSE_GRAM_BUCKETS or workload.disjoint_queries():
        return None
    from ..strategies.pidentity import default_rows
    from .optimized import Optimized  # loaded when bucket totals are first measured: a lookup of "dawa" loads its module only

    m = workload.size
    for rows in sorted({default_rows(m), *(r for r in STAGE_TWO_ROWS if r < default_rows(m))}, reverse=True):
        for iterations in STAGE_TWO_ITERATIONS:
            if stage_two_seconds(m, workload.num_queries, rows, iterations) <= STAGE_TWO_SECONDS:
                return Optimized(p=rows, restarts=1, maxiter=iterations, store=False)
    return None


#: Linear strategies DAWA and PrivTree choose from for the bucket totals (by analytic error, never
#: the data): ``auto``'s candidates that plan in a fraction of a second. Each entry is a class, or
#: a function of the reduced workload making a mechanism or None (:func:`stage_two_optimized`).
STAGE_TWO: tuple = (Identity, HB, GreedyH, stage_two_optimized)
#: GreedyH builds a dense Gram matrix of the buckets: it is a candidate up to this many buckets.
MAX_GREEDY_BUCKETS = 512
#: Strategies are compared on at most this many of the workload's queries, evenly spaced.
PROBE_QUERIES = 256


def probe_error(mechanism: LinearMechanism, workload: Workload, probe: Workload) -> float:
    """Δ² ‖R‖_F² of ``mechanism``'s strategy for ``workload``, reconstruction R restricted to the
    queries of ``probe`` (unit changes): its analytic error on those queries, up to 2/ε²."""
    strategy = mechanism.strategy(workload)
    frobenius = mechanism.reconstruction_frobenius_sq(probe, strategy)
    return math.inf if frobenius is None else mechanism.strategy_sensitivity(strategy) ** 2 * frobenius


def aggregation_gain(workload: Workload) -> float:
    """max(1, err(Identity) / err(HB)) on (a probe of) ``workload`` for unit changes: how much a
    hierarchy already averages per-cell noise (1 for histograms, ≈ 18 for 4096 prefix sums)."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    hierarchy = probe_error(HB(), workload, probe)
    return max(1.0, probe_error(Identity(), workload, probe) / hierarchy) if hierarchy > 0 else 1.0


#: A 1-D workload is histogram-like (workload class ``"cells"``) when a hierarchy gains less than
#: this over Laplace on the cells (histograms: 1; prefix sums over 4096 cells: about 18).
CELLS_GAIN = 2.0
#: The same on a grid (the identity: 1; 2000 DPBench rectangles over 128²: 1.56).
GRID_CELLS_GAIN = 1.05


def workload_class(workload: Workload, gain: float | None = None) -> str:
    """``"cells"`` for histogram-like workloads (:func:`aggregation_gain` below :data:`CELLS_GAIN`
    in 1-D, :data:`GRID_CELLS_GAIN` on a grid), else ``"ranges"``: which of a data-dependent
    mechanism's fitted error models (:func:`blowfish_te.selection.error_model`) applies."""
    gain = aggregation_gain(workload) if gain is None else gain
    return "cells" if gain < (CELLS_GAIN if len(workload.domain) == 1 else GRID_CELLS_GAIN) else "ranges"


def lowest_error(workload: Workload, candidates: Iterable[type[LinearMechanism] | Callable[[Workload], LinearMechanism | None]]) -> LinearMechanism:
    """A fresh mechanism from ``candidates`` (classes, or functions of ``workload`` making one or
    None) with the lowest analytic error on a probe of ``workload``, the first on a tie: GreedyH
    only up to :data:`MAX_GREEDY_BUCKETS` cells."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    made = (make() if isinstance(make, type) else make(workload) for make in candidates
            if not (make is GreedyH and workload.size > MAX_GREEDY_BUCKETS))
    options = [m for m in made if m is not None]
    errors = [probe_error(m, workload, probe) for m in options]
    return options[int(np.argmin(errors))]


def best_linear(workload: Workload) -> LinearMechanism:
    """``auto``'s choice for ``workload`` under unit changes: the registered strategy of lowest
    analytic error (the optimised strategy included where it is stored or its optimisation fits
    auto's time budget), Identity where it ties — the only plain release whose noise
    :mod:`blowfish_te.smoothing` can read structure from. Read from the plan store where the
    choice under unbounded DP is stored (the standard workloads ship theirs), so a data-dependent
    release that falls back plans in a fraction of a second; planned by
    :meth:`~blowfish_te.mechanisms.Auto.best` where a Blowfish-native mechanism wins there (it is
    not a strategy for unit changes)."""
    from ..policies import unbounded
    from .auto import Auto

    chosen, _ = best_plan_under(workload, unbounded(workload.domain))
    if chosen.tags.linear:
        return chosen  # best_plan_under has already taken Identity on a tie
    chosen = Auto().best(workload)
    if chosen.tags.laplace_on_cells:
        return chosen
    cells = Identity()
    if cells.expected_error(workload, 1.0) <= chosen.expected_error(workload, 1.0) * (1 + 1e-9):
        return cells
    return chosen


def best_plan_under(workload: Workload, policy: Policy, auto: Auto | None = None) -> tuple[Mechanism, Candidate]:
    """(mechanism, candidate): ``auto``'s choice and route for ``workload`` under ``policy`` (the
    registered ``auto`` unless another :class:`~blowfish_te.mechanisms.Auto` is given)
    (:func:`blowfish_te.routes.plan_routes`; ε does not change the order), Identity's where it
    ties — the only plain release whose noise :mod:`blowfish_te.smoothing` can read structure from."""
    from ..routes import plan_routes
    from .base import get_mechanism

    chosen = plan_routes(workload, policy, 1.0, auto or get_mechanism("auto")).chosen
    if chosen.mechanism.tags.laplace_on_cells:
        return chosen.mechanism, chosen
    cells = plan_routes(workload, policy, 1.0, get_mechanism("identity")).chosen
    if cells.expected_mse is not None and chosen.expected_mse is not None and \
            cells.expected_mse <= chosen.expected_mse * (1 + 1e-9):
        return cells.mechanism, cells
    return chosen.mechanism, chosen


def plain_strategy(mechanism: Mechanism, workload: Workload) -> LinearMechanism:
    """The plain release ``mechanism`` falls back to for ``workload``: :func:`best_linear` (cached by
    the mechanism, so a workload is planned once)."""
    return mechanism._cache("plain strategy").get(workload, lambda: best_linear(workload))
