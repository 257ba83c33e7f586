"""The plain release a data-dependent mechanism is measured against and falls back to: the linear
strategy of lowest analytic error for the workload — ``auto``'s choice —, chosen without looking at
the data."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..workloads import Workload, evenly_spaced_queries
from .base import LinearMechanism
from .hierarchical import HB, GreedyH
from .laplace import Identity

if TYPE_CHECKING:
    from .optimized import Optimized

#: Iterations of the stage-two p-Identity search (one start): at 36-435 buckets of DPBench
#: prefixes it ends within 1 % of 300 iterations with two starts.
STAGE_TWO_ITERATIONS = 300
#: Seconds the stage-two p-Identity search may be predicted to take (its cost model reads sizes
#: only, so the choice never depends on the machine): beyond it the analytic candidates alone.
#: About 300 buckets; measured at 128², the search and its Gram matrix then take up to 0.3 s,
#: so DAWA stays within twice DPComp's DAWA2D (0.27 s).
STAGE_TWO_SECONDS = 0.1


def stage_two_optimized() -> Optimized:
    """``auto``'s optimised candidate for a workload over buckets, planned inside the release (a
    partition's buckets are never stored): p-Identity with one start and
    :data:`STAGE_TWO_ITERATIONS` iterations, kept out of the strategy store."""
    from .optimized import Optimized  # loaded when bucket totals are first measured: a lookup of "dawa" loads its module only

    return Optimized(restarts=1, maxiter=STAGE_TWO_ITERATIONS, store=False)


#: Linear strategies DAWA and PrivTree choose from for the bucket totals (by analytic error, never
#: the data): ``auto``'s candidates that plan in a fraction of a second. Each entry makes a fresh
#: mechanism (a class, or :func:`stage_two_optimized`).
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


def lowest_error(workload: Workload, candidates) -> LinearMechanism:
    """A fresh mechanism from ``candidates`` (classes or functions making one) with the lowest
    analytic error on a probe of ``workload``, the first on a tie: GreedyH only up to
    :data:`MAX_GREEDY_BUCKETS` cells, a mechanism that predicts its planning time
    (``predicted_seconds``) only where it is at most :data:`STAGE_TWO_SECONDS`."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    options = [make() for make in candidates if not (make is GreedyH and workload.size > MAX_GREEDY_BUCKETS)]
    options = [m for m in options if not hasattr(m, "predicted_seconds") or m.predicted_seconds(workload) <= STAGE_TWO_SECONDS]
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
    if isinstance(chosen, LinearMechanism):
        return chosen  # best_plan_under has already taken Identity on a tie
    chosen = Auto().best(workload)
    if isinstance(chosen, Identity):
        return chosen
    cells = Identity()
    if cells.expected_error(workload, 1.0) <= chosen.expected_error(workload, 1.0) * (1 + 1e-9):
        return cells
    return chosen


def best_plan_under(workload: Workload, policy, auto=None):
    """(mechanism, candidate): ``auto``'s choice and route for ``workload`` under ``policy`` (the
    registered ``auto`` unless another :class:`~blowfish_te.mechanisms.Auto` is given)
    (:func:`blowfish_te.routes.plan_routes`; ε does not change the order), Identity's where it
    ties — the only plain release whose noise :mod:`blowfish_te.smoothing` can read structure from."""
    from ..routes import plan_routes
    from .base import get_mechanism

    chosen = plan_routes(workload, policy, 1.0, auto or get_mechanism("auto")).chosen
    if isinstance(chosen.mechanism, Identity):
        return chosen.mechanism, chosen
    cells = plan_routes(workload, policy, 1.0, get_mechanism("identity")).chosen
    if cells.expected_mse is not None and chosen.expected_mse is not None and \
            cells.expected_mse <= chosen.expected_mse * (1 + 1e-9):
        return cells.mechanism, cells
    return chosen.mechanism, chosen


def plain_strategy(mechanism, workload: Workload) -> LinearMechanism:
    """The plain release ``mechanism`` falls back to for ``workload``: :func:`best_linear` (cached by
    the mechanism, so a workload is planned once)."""
    return mechanism._cache("plain strategy").get(workload, lambda: best_linear(workload))
