"""Policy-specific L1 sensitivity of a linear workload (He et al. Def. 5.1).

For a policy G, Δ_G(W) = max over edges (u, v) of ‖W e_u - W e_v‖₁ (for an edge (u, ⊥):
‖W e_u‖₁), the largest column L1 norm of W P_G. It is computed from the policy's edges, block by
block: offset blocks and explicit pairs through ``W.difference_norms``, cliques (complete and
partition policies) through ``W.column_diameter``. Workloads answer both exactly, with closed forms
or prefix-sum tables where their structure allows; the tests compare every path with brute force.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .policies import Policy
from .workloads import Workload, as_workload

__all__ = ["sensitivity", "check_compatible"]


def check_compatible(workload: Workload, policy: Policy) -> None:
    """Raise unless the workload's columns are the policy's cells."""
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a blowfish_te Policy, got {type(policy).__name__}")
    if workload.size != policy.size:
        raise ValueError(
            f"workload {workload.name} has {workload.size} cells but policy {policy.name} has {policy.size}"
        )
    if len(workload.domain) > 1 and len(policy.shape) > 1 and workload.domain != policy.shape:
        raise ValueError(f"workload domain {workload.domain} does not match policy shape {policy.shape}")


def sensitivity(workload: Workload | ArrayLike, policy: Policy) -> float:
    """Exact L1 policy-specific sensitivity Δ_G(W): Laplace(Δ_G(W)/ε) noise on W x is
    (ε, G)-Blowfish private (He et al. Thm 5.1). A policy without edges has sensitivity 0."""
    workload = as_workload(workload)
    check_compatible(workload, policy)
    best = 0.0
    for cells in policy.cliques():  # every pair of a clique: the diameter of its columns, never listed
        best = max(best, workload.column_diameter(cells))
    for u, v in policy.edge_pairs():
        best = max(best, float(np.max(workload.difference_norms(u, v))))
    return best
