"""Measurement strategies with exact least squares, for the linear mechanisms (the matrix
mechanism: Li et al., PODS 2010). Each module loads on first use of one of its names."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: The modules of this package by the names they export.
_EXPORTS = {
    "blowfish_te.strategies.base": ("LeastSquares",),
    "blowfish_te.strategies.general": ("GeneralStrategy", "IdentityStrategy"),
    "blowfish_te.strategies.greedy": ("greedy_hierarchy",),
    "blowfish_te.strategies.haar": ("HaarStrategy",),
    "blowfish_te.strategies.hierarchy": ("Hierarchy", "TreeStrategy", "hierarchical"),
    "blowfish_te.strategies.pidentity": ("PIdentityStrategy", "optimize_pidentity"),
}
_WHERE = {export: module for module, exports in _EXPORTS.items() for export in exports}

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


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'blowfish_te.strategies' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .base import LeastSquares
    from .general import GeneralStrategy, IdentityStrategy
    from .greedy import greedy_hierarchy
    from .haar import HaarStrategy
    from .hierarchy import Hierarchy, TreeStrategy, hierarchical
    from .pidentity import PIdentityStrategy, optimize_pidentity
