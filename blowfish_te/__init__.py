"""blowfish_te: policy-aware differential privacy (Blowfish) through transformational equivalence.

Quick start::

    import blowfish_te as bt
    W = bt.workloads.prefix(1024)
    release = bt.answer(W, x, bt.policies.line(1024), epsilon=0.5, rng=0)
    release.answers, release.expected_mse
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

from ._version import __version__ as __version__

__all__ = [
    "BOTTOM",
    "BlowfishError",
    "BudgetAccountant",
    "BudgetExceededError",
    "CyclicPolicyError",
    "LinearMechanism",
    "Mechanism",
    "Plan",
    "Policy",
    "Release",
    "SpecError",
    "TransformedWorkload",
    "TreeTransform",
    "Workload",
    "answer",
    "budget",
    "constraints",
    "errors",
    "io",
    "kmeans",
    "mechanisms",
    "plan",
    "policies",
    "selection",
    "sensitivity",
    "smoothing",
    "transform",
    "trees",
    "workloads",
]

# Names load on first use (PEP 562), so ``import blowfish_te.io`` does not pay for the mechanisms,
# scipy and networkx: a records-to-histogram job starts in milliseconds.
_MODULES = {"budget", "constraints", "errors", "io", "kmeans", "mechanisms", "policies", "selection",
            "smoothing", "trees", "workloads"}
_NAMES = {
    "BudgetAccountant": "budget", "BlowfishError": "errors", "BudgetExceededError": "errors", "CyclicPolicyError": "errors",
    "SpecError": "errors", "LinearMechanism": "mechanisms", "Mechanism": "mechanisms", "BOTTOM": "policies", "Policy": "policies",
    "Plan": "release", "Release": "release", "answer": "release", "plan": "release", "sensitivity": "sensitivity",
    "TransformedWorkload": "transform", "TreeTransform": "transform", "transform": "transform", "Workload": "workloads",
}


def __getattr__(name: str):
    if name in _MODULES:
        module = importlib.import_module(f".{name}", __name__)
    elif name in _NAMES:
        module = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'blowfish_te' has no attribute {name!r}")
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps ``blowfish_te.sensitivity`` and ``blowfish_te.transform`` the functions: importing
    the submodules of those names (as the library does) must not replace them."""

    def __setattr__(self, name: str, value) -> None:
        if name in _NAMES and _NAMES[name] == name and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:
    from . import budget, constraints, errors, io, kmeans, mechanisms, policies, selection, smoothing, trees, workloads
    from .budget import BudgetAccountant
    from .errors import BlowfishError, BudgetExceededError, CyclicPolicyError, SpecError
    from .mechanisms import LinearMechanism, Mechanism
    from .policies import BOTTOM, Policy
    from .release import Plan, Release, answer, plan
    from .sensitivity import sensitivity
    from .transform import TransformedWorkload, TreeTransform, transform
    from .workloads import Workload
