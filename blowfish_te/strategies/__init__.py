"""Measurement strategies with exact least squares, for the linear mechanisms (the matrix
mechanism: Li et al., PODS 2010). Each module loads on first use of one of its names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

#: The modules of this package by the names they export.
_EXPORTS = {
    "blowfish_te.strategies.base": ("LeastSquares",),
    "blowfish_te.strategies.general": ("GeneralStrategy", "IdentityStrategy"),
    "blowfish_te.strategies.greedy": ("greedy_hierarchy",),
    "blowfish_te.strategies.haar": ("HaarStrategy",),
    "blowfish_te.strategies.hierarchy": ("Hierarchy", "TreeStrategy", "hierarchical"),
    "blowfish_te.strategies.marginals": ("MarginalStrategy", "optimize_weights", "own_marginals"),
    "blowfish_te.strategies.pidentity": ("PIdentityStrategy", "cap_scales", "optimize_pidentity"),
    "blowfish_te.strategies.store": ("StrategyStore",),
}

__all__ = [
    "LeastSquares",
    "GeneralStrategy",
    "IdentityStrategy",
    "MarginalStrategy",
    "HaarStrategy",
    "Hierarchy",
    "PIdentityStrategy",
    "StrategyStore",
    "TreeStrategy",
    "cap_scales",
    "greedy_hierarchy",
    "hierarchical",
    "optimize_pidentity",
    "optimize_weights",
    "own_marginals",
]


__getattr__, __dir__, _ = lazy_names(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from .base import LeastSquares
    from .general import GeneralStrategy, IdentityStrategy
    from .greedy import greedy_hierarchy
    from .haar import HaarStrategy
    from .hierarchy import Hierarchy, TreeStrategy, hierarchical
    from .marginals import MarginalStrategy, optimize_weights, own_marginals
    from .pidentity import PIdentityStrategy, cap_scales, optimize_pidentity
    from .store import StrategyStore
