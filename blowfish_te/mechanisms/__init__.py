"""Pluggable mechanisms: the contract (:class:`Mechanism`, see :mod:`.base`), linear
data-independent mechanisms (:class:`LinearMechanism`) and the built-in ones, registered by name in
:data:`MECHANISMS` — the library's when their module is first needed (a lookup by name, an
attribute of this package, or a listing of the registry), plug-ins through
:data:`ENTRY_POINT_GROUP`. Mechanisms that plan routes of other mechanisms (partition-then-transform,
adaptive) use :mod:`blowfish_te.routes`, which sits below this package."""

from __future__ import annotations

import importlib

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

#: Every library mechanism: its registered name → ``"module:Class"`` (a module of this package).
#: The lazy exports, the registry's loader and ``__all__`` are generated from it and from
#: :data:`_OTHER_EXPORTS`; type checkers read ``__init__.pyi`` (a test keeps the stub in step).
LIBRARY = {
    "identity": "laplace:Identity", "laplace": "laplace:DirectLaplace",
    "h2": "hierarchical:H2", "hb": "hierarchical:HB", "greedyh": "hierarchical:GreedyH",
    "privelet": "hierarchical:Privelet", "quadtree": "hierarchical:QuadTree",
    "optimized": "optimized:Optimized", "auto": "auto:Auto",
    "marginals": "marginal:WorkloadMarginals", "marginals_optimized": "marginal:OptimizedMarginals",
    "uniform": "uniform:Uniform",
    "ordered": "ordered:Ordered", "ordered_hierarchical": "ordered:OrderedHierarchical",
    "ordered_hierarchical_tuned": "ordered:TunedOrderedHierarchical",
    "dawa": "datadependent:DAWA", "mwem": "datadependent:MWEM", "ahp": "datadependent:AHP",
    "ugrid": "spatial:UGrid", "agrid": "spatial:AGrid", "privtree": "privtree:PrivTree",
    "partition_then_transform": "partition_then_transform:PartitionThenTransform", "adaptive": "adaptive:Adaptive",
}
#: The package's other public names (bases and helpers of the mechanisms' modules), by module.
_OTHER_EXPORTS = {
    "hierarchical": ("qardaji_branching", "qardaji_branching_2d"),
    "matrix": ("MatrixMechanism", "NonNegative"),
    "marginal": ("MarginalMechanism",),
    "spatial": ("hilbert_order",),
}


def _exports() -> dict[str, tuple[str, ...]]:
    """Module → the public names it defines, read off :data:`LIBRARY` and :data:`_OTHER_EXPORTS`."""
    pairs = [entry.split(":") for entry in LIBRARY.values()]
    pairs += [(module, name) for module, names in _OTHER_EXPORTS.items() for name in names]
    out: dict[str, tuple[str, ...]] = {}
    for module, name in pairs:
        out[f"blowfish_te.mechanisms.{module}"] = out.get(f"blowfish_te.mechanisms.{module}", ()) + (name,)
    return out


_EXPORTS = _exports()
#: The module that defines each registered library mechanism.
_NAMES = {name: entry.split(":")[0] for name, entry in LIBRARY.items()}


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

__all__ = ["Mechanism", "LinearMechanism", "NativeMechanism", "MECHANISMS", "ENTRY_POINT_GROUP", "LIBRARY", "get_mechanism",
           "mechanism_class", "load_plugins", *(name for names in _EXPORTS.values() for name in names)]
