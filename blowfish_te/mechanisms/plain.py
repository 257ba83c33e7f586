"""The plain release a data-dependent mechanism is measured against and falls back to: the linear
strategy of lowest analytic error for the workload — ``auto``'s choice —, chosen without looking at
the data."""

from __future__ import annotations

import math

import numpy as np

from ..workloads import Workload, evenly_spaced_queries
from .base import LinearMechanism
from .hierarchical import HB, GreedyH
from .laplace import Identity

#: Linear strategies DAWA chooses from for the bucket totals (by analytic error, never the data).
STAGE_TWO: tuple[type[LinearMechanism], ...] = (Identity, HB, GreedyH)
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
    """A fresh instance of the candidate class with the lowest analytic error on a probe of
    ``workload`` (GreedyH only up to :data:`MAX_GREEDY_BUCKETS` cells)."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    options = [cls() for cls in candidates if not (cls is GreedyH and workload.size > MAX_GREEDY_BUCKETS)]
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
