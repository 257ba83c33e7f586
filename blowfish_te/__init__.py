"""blowfish_te: policy-aware differential privacy (Blowfish) through transformational equivalence.

Quick start::

    import blowfish_te as bt
    W = bt.workloads.prefix(1024)
    release = bt.answer(W, x, bt.policies.line(1024), epsilon=0.5, rng=0)
    release.answers, release.expected_mse
"""

from . import budget, composites, constraints, errors, kmeans, mechanisms, policies, trees, workloads
from .budget import BudgetAccountant
from .errors import BlowfishError, BudgetExceededError, CyclicPolicyError, SpecError
from .mechanisms import LinearMechanism, Mechanism
from .policies import BOTTOM, Policy
from .release import Plan, Release, answer, plan
from .sensitivity import sensitivity
from .transform import TransformedWorkload, TreeTransform, transform
from .workloads import Workload

__version__ = "0.1.0"

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
    "composites",
    "constraints",
    "errors",
    "kmeans",
    "mechanisms",
    "plan",
    "policies",
    "sensitivity",
    "transform",
    "trees",
    "workloads",
]
