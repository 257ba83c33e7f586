"""The plain release a data-dependent mechanism is measured against and falls back to: the linear
strategy of lowest analytic error for the workload, chosen without looking at the data."""

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


def lowest_error(workload: Workload, candidates) -> LinearMechanism:
    """A fresh instance of the candidate class with the lowest analytic error on a probe of
    ``workload`` (GreedyH only up to :data:`MAX_GREEDY_BUCKETS` cells)."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    options = [cls() for cls in candidates if not (cls is GreedyH and workload.size > MAX_GREEDY_BUCKETS)]
    errors = [probe_error(m, workload, probe) for m in options]
    return options[int(np.argmin(errors))]


def plain_strategy(mechanism, workload: Workload) -> LinearMechanism:
    """The plain release ``mechanism`` falls back to for ``workload``: the candidate of
    :data:`STAGE_TWO` with the lowest analytic error on it (cached by the mechanism)."""
    return mechanism._cache("plain strategy").get(workload, lambda: lowest_error(workload, STAGE_TWO))
