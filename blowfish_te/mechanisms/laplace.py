"""The two Laplace mechanisms of the core: noise on the cells, and noise on the answers."""

from __future__ import annotations

import numpy as np

from ..policies import Policy
from ..strategies import IdentityStrategy
from ..strategies.marginals import MarginalStrategy, move_patterns
from ..transform import TransformedWorkload
from ..workloads import Boxes, Marginals, Workload
from .base import LinearMechanism


class Identity(LinearMechanism):
    """Laplace noise on every cell, answers computed from the noisy cells.

    Strategy A = I: y = x + Lap(Δ/ε)^K, ŷ = W y. Neighbours: unit changes of x (Δ = 1), or a
    policy G in the exact route (Δ_G(I) = 2 when an edge joins two cells, 1 for a ⊥ edge).
    Applied to x_G of a tree transform this is "transformed + Laplace": Laplace(1/ε) on x_G is
    (ε, G)-Blowfish, and its error is 2/ε² ‖W_G‖_F². With ``rng=None`` the noisy cells are integers
    (x or x_G plus exact discrete Laplace, two-sided geometric with α = exp(-ε/Δ)).
    """

    name = "identity"
    laplace_on_cells = True

    def strategy(self, workload: Workload) -> Workload:
        return self._cache("strategy").get(workload, lambda: IdentityStrategy(workload.domain))

    def reconstruct(self, workload: Workload, strategy: Workload, y: np.ndarray) -> np.ndarray:
        return workload.matvec(y)

    def strategy_sensitivity(self, strategy: Workload, policy: Policy | None = None) -> float:
        """Δ of I read off the policy's edge blocks (never listing the edges): ‖e_u - e_v‖₁ = 2 for
        an edge between two cells, ‖e_u‖₁ = 1 for an edge to ⊥; 1 for unit changes."""
        if policy is None:
            return 1.0
        return 2.0 if policy.joins_cells else (1.0 if policy.num_edges else 0.0)

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: Workload) -> float:
        """‖W‖_F²: from the boxes themselves or, through the line's transform, from the column
        norms (O(m + K)); from W's sparse rows when it has a cheap sparse form (boxes viewed
        through another tree's transform or a partition), else from its columns."""
        if isinstance(workload, Boxes) or (isinstance(workload, TransformedWorkload) and workload.tree.is_line):
            return workload.frobenius_sq()
        rows = workload.sparse_rows()
        return float((rows.data**2).sum()) if rows is not None else workload.frobenius_sq()


class DirectLaplace(LinearMechanism):
    """The Laplace mechanism on the workload itself: ŷ = W x + Lap(Δ(W)/ε)^m (He et al. Thm 5.1).

    Strategy A = W, answers are the noisy measurements. Neighbours: unit changes (Δ = largest
    column L1 norm of W) or a policy G (Δ_G(W) from its edges, He et al. Def. 5.1). Error 2 m (Δ/ε)².
    """

    name = "laplace"

    def strategy(self, workload: Workload) -> Workload:
        return workload

    def handles_large_domain(self, workload: Workload) -> bool:
        """Marginals: Δ from the policy's moves, never from K columns."""
        return isinstance(workload, Marginals)

    def strategy_sensitivity(self, strategy: Workload, policy: Policy | None = None) -> float:
        """Δ(W) for unit changes or Δ_G(W); for marginals read off the policy's moves (each marginal
        changes by 2 when a move changes one of its attributes, by 1 when a record is added or
        removed), so no K-sized array is built."""
        if isinstance(strategy, Marginals):
            subsets = sorted(set(tuple(sorted(s)) for s in strategy.subsets))
            repeats = [sum(tuple(sorted(s)) == t for s in strategy.subsets) for t in subsets]
            return MarginalStrategy(strategy.domain, subsets, repeats).sensitivity(move_patterns(policy))
        return super().strategy_sensitivity(strategy, policy)

    def reconstruct(self, workload: Workload, strategy: Workload, y: np.ndarray) -> np.ndarray:
        return y

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: Workload) -> float:
        return float(workload.num_queries)
