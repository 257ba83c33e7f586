"""Pluggable mechanisms: the contract (:class:`Mechanism`, see :mod:`.base`), linear
data-independent mechanisms (:class:`LinearMechanism`) and the built-in ones, registered by name in
:data:`MECHANISMS` as they are defined — every library mechanism when this package is imported,
plug-ins through :data:`ENTRY_POINT_GROUP`. Mechanisms that plan routes of other mechanisms
(partition-then-transform, adaptive) use :mod:`blowfish_te.routes`, which sits below this package."""

from __future__ import annotations

from .adaptive import Adaptive
from .auto import Auto
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
from .datadependent import AHP, DAWA, MWEM
from .hierarchical import (
    H2,
    HB,
    GreedyH,
    Privelet,
    QuadTree,
    qardaji_branching,
    qardaji_branching_2d,
)
from .laplace import DirectLaplace, Identity
from .matrix import MatrixMechanism, NonNegative
from .optimized import Optimized
from .ordered import Ordered, OrderedHierarchical, TunedOrderedHierarchical
from .partition_then_transform import PartitionThenTransform
from .privtree import PrivTree
from .spatial import AGrid, UGrid, hilbert_order
from .uniform import Uniform

__all__ = [
    "Mechanism",
    "LinearMechanism",
    "Identity",
    "DirectLaplace",
    "H2",
    "HB",
    "QuadTree",
    "GreedyH",
    "Privelet",
    "Uniform",
    "MatrixMechanism",
    "NonNegative",
    "Optimized",
    "Auto",
    "NativeMechanism",
    "Adaptive",
    "PartitionThenTransform",
    "Ordered",
    "OrderedHierarchical",
    "TunedOrderedHierarchical",
    "DAWA",
    "MWEM",
    "AHP",
    "UGrid",
    "AGrid",
    "PrivTree",
    "hilbert_order",
    "qardaji_branching",
    "qardaji_branching_2d",
    "MECHANISMS",
    "ENTRY_POINT_GROUP",
    "get_mechanism",
    "mechanism_class",
    "load_plugins",
]
