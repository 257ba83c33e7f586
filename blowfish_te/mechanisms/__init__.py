"""Pluggable mechanisms: the contract (:class:`Mechanism`), linear data-independent mechanisms
(:class:`LinearMechanism`) and the built-in ones, by name."""

from __future__ import annotations

from .base import LinearMechanism, Mechanism
from .datadependent import AHP, DAWA, MWEM
from .hierarchical import H2, HB, GreedyH, Privelet, QuadTree, qardaji_branching, qardaji_branching_2d
from .laplace import DirectLaplace, Identity
from .matrix import MatrixMechanism, NonNegative
from .optimized import Optimized
from .ordered import NativeMechanism, NativeRelease, Ordered, OrderedHierarchical
from .ptt import PartitionThenTransform
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
    "NativeMechanism",
    "NativeRelease",
    "Ordered",
    "OrderedHierarchical",
    "DAWA",
    "MWEM",
    "AHP",
    "PartitionThenTransform",
    "qardaji_branching",
    "qardaji_branching_2d",
    "MECHANISMS",
    "get_mechanism",
]

#: Built-in mechanisms by name.
MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls
    for cls in (
        Identity, DirectLaplace, H2, HB, QuadTree, GreedyH, Privelet, Uniform, Optimized,
        Ordered, OrderedHierarchical, DAWA, MWEM, AHP, PartitionThenTransform,
    )
}


_DEFAULTS: dict[str, Mechanism] = {}


def get_mechanism(mechanism) -> Mechanism:
    """A mechanism instance from a name in :data:`MECHANISMS` or an instance of :class:`Mechanism`.

    Names map to one shared default instance each, so strategies cached per workload (GreedyH's
    weights, optimised strategies) are reused across releases.
    """
    if isinstance(mechanism, Mechanism):
        return mechanism
    if isinstance(mechanism, str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown mechanism {mechanism!r}; known mechanisms: {', '.join(sorted(MECHANISMS))}")
        if mechanism not in _DEFAULTS:
            _DEFAULTS[mechanism] = MECHANISMS[mechanism]()
        return _DEFAULTS[mechanism]
    raise TypeError(f"mechanism must be a name or a Mechanism instance, got {type(mechanism).__name__}")
