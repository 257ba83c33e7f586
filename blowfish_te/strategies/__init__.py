"""Measurement strategies with exact least squares, for the linear mechanisms (the matrix
mechanism: Li et al., PODS 2010)."""

from .base import LeastSquares
from .general import GeneralStrategy, IdentityStrategy
from .greedy import greedy_hierarchy
from .haar import HaarStrategy
from .hierarchy import Hierarchy, TreeStrategy, hierarchical
from .pidentity import PIdentityStrategy, optimize_pidentity

__all__ = [
    "LeastSquares",
    "GeneralStrategy",
    "IdentityStrategy",
    "HaarStrategy",
    "Hierarchy",
    "PIdentityStrategy",
    "TreeStrategy",
    "greedy_hierarchy",
    "hierarchical",
    "optimize_pidentity",
]
