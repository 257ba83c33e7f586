"""Pluggable mechanisms: the contract (:class:`Mechanism`), linear data-independent mechanisms
(:class:`LinearMechanism`) and the built-in ones, by name."""

from __future__ import annotations

from .base import LinearMechanism, Mechanism
from .laplace import DirectLaplace, Identity

__all__ = ["Mechanism", "LinearMechanism", "Identity", "DirectLaplace", "MECHANISMS", "get_mechanism"]

#: Built-in mechanisms by name.
MECHANISMS: dict[str, type[Mechanism]] = {"identity": Identity, "laplace": DirectLaplace}


def get_mechanism(mechanism) -> Mechanism:
    """A mechanism instance from a name in :data:`MECHANISMS` or an instance of :class:`Mechanism`."""
    if isinstance(mechanism, Mechanism):
        return mechanism
    if isinstance(mechanism, str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown mechanism {mechanism!r}; known mechanisms: {', '.join(sorted(MECHANISMS))}")
        return MECHANISMS[mechanism]()
    raise TypeError(f"mechanism must be a name or a Mechanism instance, got {type(mechanism).__name__}")
