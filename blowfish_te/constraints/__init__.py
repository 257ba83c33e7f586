"""Blowfish with public count constraints (He, Machanavajjhala, Ding, SIGMOD 2014, §8): the
constraints (:mod:`.queries`), the sensitivity of histograms and linear strategies under them
(:mod:`.graph`) and the release with constrained inference (:mod:`.inference`). The corrections
to the paper are in ``docs/constraints.md``."""

from .graph import (
    MAX_SEARCH_STEPS,
    MOVES,
    ConstrainedSensitivity,
    PolicyGraph,
    check_sparse,
    critical_queries,
    histogram_sensitivity,
    longest_cycle,
    longest_path,
    policy_graph,
    scope_patterns,
    strategy_sensitivity,
)
from .queries import Constraints, count_queries, known_total, marginals, rectangles

__all__ = [
    "MAX_SEARCH_STEPS",
    "MOVES",
    "ConstrainedSensitivity",
    "Constraints",
    "PolicyGraph",
    "check_sparse",
    "critical_queries",
    "count_queries",
    "histogram_sensitivity",
    "known_total",
    "longest_cycle",
    "longest_path",
    "marginals",
    "policy_graph",
    "rectangles",
    "scope_patterns",
    "strategy_sensitivity",
]
