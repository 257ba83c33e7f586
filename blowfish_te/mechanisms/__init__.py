"""Pluggable mechanisms: the contract (:class:`Mechanism`, see :mod:`.base`), linear
data-independent mechanisms (:class:`LinearMechanism`) and the built-in ones, registered by name in
:data:`MECHANISMS` — the library's when their module is first needed (a lookup by name, an
attribute of this package, or a listing of the registry), plug-ins through
:data:`ENTRY_POINT_GROUP`. Mechanisms that plan routes of other mechanisms (partition-then-transform,
adaptive) use :mod:`blowfish_te.routes`, which sits below this package."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._lazy import lazy_names
from .base import (
    ENTRY_POINT_GROUP,
    MECHANISMS,
    LinearMechanism,
    Mechanism,
    NativeMechanism,
    get_mechanism,
    load_plugins,
    mechanism_class,
)

#: The modules of this package that define the library's mechanisms and helpers, by the names
#: they export: imported on first use, so a release loads only what it runs.
_EXPORTS = {
    "blowfish_te.mechanisms.laplace": ("DirectLaplace", "Identity"),
    "blowfish_te.mechanisms.hierarchical": ("H2", "HB", "GreedyH", "Privelet", "QuadTree", "qardaji_branching",
                                            "qardaji_branching_2d"),
    "blowfish_te.mechanisms.matrix": ("MatrixMechanism", "NonNegative"),
    "blowfish_te.mechanisms.optimized": ("Optimized",),
    "blowfish_te.mechanisms.marginal": ("MarginalMechanism", "WorkloadMarginals", "OptimizedMarginals"),
    "blowfish_te.mechanisms.auto": ("Auto",),
    "blowfish_te.mechanisms.uniform": ("Uniform",),
    "blowfish_te.mechanisms.ordered": ("Ordered", "OrderedHierarchical", "TunedOrderedHierarchical"),
    "blowfish_te.mechanisms.datadependent": ("AHP", "DAWA", "MWEM"),
    "blowfish_te.mechanisms.spatial": ("AGrid", "UGrid", "hilbert_order"),
    "blowfish_te.mechanisms.privtree": ("PrivTree",),
    "blowfish_te.mechanisms.partition_then_transform": ("PartitionThenTransform",),
    "blowfish_te.mechanisms.adaptive": ("Adaptive",),
}
#: The registered name of every library mechanism, and the module that defines it.
_NAMES = {
    "identity": "laplace", "laplace": "laplace", "h2": "hierarchical", "hb": "hierarchical", "quadtree": "hierarchical",
    "greedyh": "hierarchical", "privelet": "hierarchical", "optimized": "optimized", "auto": "auto",
    "marginals": "marginal", "marginals_optimized": "marginal",
    "uniform": "uniform", "ordered": "ordered", "ordered_hierarchical": "ordered", "ordered_hierarchical_tuned": "ordered",
    "dawa": "datadependent", "mwem": "datadependent", "ahp": "datadependent", "ugrid": "spatial", "agrid": "spatial",
    "privtree": "privtree", "partition_then_transform": "partition_then_transform", "adaptive": "adaptive",
}


def _load_library(name: str | None = None) -> None:
    """Import the module defining the library mechanism ``name`` (every one for None)."""
    if name is None:
        for module in _EXPORTS:
            importlib.import_module(module)
    elif name in _NAMES:
        importlib.import_module(f"blowfish_te.mechanisms.{_NAMES[name]}")


MECHANISMS.loader = _load_library
_load_library("identity")  # the default mechanism (and the Laplace mechanism) load with the package


__getattr__, __dir__, _WHERE = lazy_names(__name__, _EXPORTS, globals())

__all__ = [
    "Mechanism",
    "LinearMechanism",
    "NativeMechanism",
    "MECHANISMS",
    "ENTRY_POINT_GROUP",
    "get_mechanism",
    "mechanism_class",
    "load_plugins",
    "DirectLaplace",
    "Identity",
    "H2",
    "HB",
    "GreedyH",
    "Privelet",
    "QuadTree",
    "qardaji_branching",
    "qardaji_branching_2d",
    "MatrixMechanism",
    "NonNegative",
    "Optimized",
    "MarginalMechanism",
    "WorkloadMarginals",
    "OptimizedMarginals",
    "Auto",
    "Uniform",
    "Ordered",
    "OrderedHierarchical",
    "TunedOrderedHierarchical",
    "AHP",
    "DAWA",
    "MWEM",
    "AGrid",
    "UGrid",
    "hilbert_order",
    "PrivTree",
    "PartitionThenTransform",
    "Adaptive",
]

if TYPE_CHECKING:
    from .adaptive import Adaptive
    from .auto import Auto
    from .datadependent import AHP, DAWA, MWEM
    from .hierarchical import H2, HB, GreedyH, Privelet, QuadTree, qardaji_branching, qardaji_branching_2d
    from .laplace import DirectLaplace, Identity
    from .marginal import MarginalMechanism, OptimizedMarginals, WorkloadMarginals
    from .matrix import MatrixMechanism, NonNegative
    from .optimized import Optimized
    from .ordered import Ordered, OrderedHierarchical, TunedOrderedHierarchical
    from .partition_then_transform import PartitionThenTransform
    from .privtree import PrivTree
    from .spatial import AGrid, UGrid, hilbert_order
    from .uniform import Uniform
