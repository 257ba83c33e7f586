"""Strategies optimised for the workload they answer (HDMM: McKenna, Miklau, Hay,
Machanavajjhala, PVLDB 2018), and for the policy's own sensitivity in the exact route."""

from __future__ import annotations

import numpy as np

from .._cache import IdentityCache
from .._validation import check_int
from ..policies import Policy
from ..sensitivity import sensitivity
from ..strategies import IdentityStrategy, optimize_pidentity
from ..strategies.kronecker import kronecker_rows, optimize_kronecker
from ..strategies.pidentity import PIdentityStrategy, default_rows
from ..workloads import Boxes, Workload
from .base import LinearMechanism

#: Seconds per (cell × row × (row + 32)) and per (edge × row) of one L-BFGS iteration, measured on
#: the 2-core reference machine (K = 4096, p = 64: 16-19 s for 150 iterations): the cost model of
#: :meth:`Optimized.predicted_seconds`, which depends on sizes only, never on data or the clock.
SECONDS_PER_CELL_ROW = 8e-9
SECONDS_PER_EDGE_ROW = 1e-7
#: Most (policy edges × strategy rows) the policy-aware objective handles per evaluation; beyond
#: it (e.g. bounded DP's K²/2 pairs) the exact route uses the unit-change strategy.
MAX_EDGE_ENTRIES = 2**24


def axis_edges(policy: Policy) -> list[tuple[np.ndarray, np.ndarray]]:
    """The policy's edges seen along each axis: the distinct pairs (u_a, v_a), u_a != v_a, of the
    coordinates of its edges, and (u_a, k_a) (⊥) for each ⊥ edge."""
    edges = policy.edges
    k = policy.size
    bottom = edges[:, 1] == k
    cu = np.unravel_index(edges[~bottom, 0], policy.shape)
    cv = np.unravel_index(edges[~bottom, 1], policy.shape)
    cb = np.unravel_index(edges[bottom, 0], policy.shape)
    out = []
    for axis, side in enumerate(policy.shape):
        lo, hi = np.minimum(cu[axis], cv[axis]), np.maximum(cu[axis], cv[axis])
        keep = lo != hi
        pairs = np.concatenate([np.stack([lo[keep], hi[keep]], 1), np.stack([cb[axis], np.full(cb[axis].size, side)], 1)])
        pairs = np.unique(pairs, axis=0)
        out.append((pairs[:, 0], pairs[:, 1]))
    return out


class Optimized(LinearMechanism):
    """An optimised strategy (HDMM's templates): p-Identity on 1-D and other workloads, a
    Kronecker product of p-Identity factors (OPT⊗) on boxes of a multi-dimensional domain.

    Unit changes (DP, and x_G of a transform): columns of L1 norm 1, so Δ = 1; error
    2 (Δ/ε)² ‖W A⁺‖_F², least squares by Woodbury. In the exact route under a policy G, the
    strategy is optimised against G's own sensitivity: ‖W A⁺‖_F² · Δ̃_G² with Δ̃_G a smooth
    bound on max over edges ‖A(e_u - e_v)‖₁ (per axis for Kronecker factors; on 1-D from the
    unit-change strategy); the better of it
    and the unit-change strategy, by the exact Δ_G computed from the edges, is measured, and the
    noise is Laplace(Δ_G/ε) for that exact Δ_G. Placed after a policy transform the workload is
    W_G, so the strategy is optimised for the transformed workload. The better of the optimised
    strategy and the identity (Θ = 0) is kept, as OPT₀ keeps the best of its templates. Restarts
    are seeded by ``seed``; strategies depend on the workload and policy only, never on the data.
    """

    name = "optimized"

    def __init__(self, p: int | None = None, restarts: int = 1, maxiter: int = 150, seed: int = 0):
        self.p = None if p is None else check_int(p, "p", minimum=1)
        self.restarts = check_int(restarts, "restarts", minimum=1)
        self.maxiter = check_int(maxiter, "maxiter", minimum=1)
        self.seed = check_int(seed, "seed", minimum=0)

    def predicted_seconds(self, workload: Workload, policy: Policy | None = None) -> float:
        """The optimiser's predicted run time for the strategy of ``workload`` (with ``policy``:
        the exact route's, policy-aware where it applies), from sizes alone (see
        :data:`SECONDS_PER_CELL_ROW`): data-independent and the same on every machine."""
        boxes = isinstance(workload, Boxes) and len(workload.domain) > 1
        sides = workload.domain if boxes else (workload.size,)
        seconds = sum(self._seconds(side, boxes) for side in sides)
        if policy is not None and self._policy_aware(policy):
            edges = sum(e[0].size for e in axis_edges(policy)) if boxes else policy.num_edges
            rows = self.p or (kronecker_rows if boxes else default_rows)(max(sides))
            starts = (3 * self.restarts + 2) if boxes else self.restarts
            seconds = 2 * seconds + starts * self.maxiter * SECONDS_PER_EDGE_ROW * edges * rows
        return seconds

    def predicted_transform_seconds(self, cells: int) -> float:
        """Predicted run time for the strategy of a transformed workload W_T over ``cells`` edges
        (a 1-D p-Identity optimisation)."""
        return self._seconds(cells, False)

    def _seconds(self, side: int, kronecker: bool) -> float:
        rows = self.p or (kronecker_rows if kronecker else default_rows)(side)
        starts = (3 * self.restarts + 2) if kronecker else self.restarts  # 3 rounds, warm starts after the first
        return starts * self.maxiter * SECONDS_PER_CELL_ROW * side * rows * (rows + 32)

    def _policy_aware(self, policy: Policy) -> bool:
        """Whether the exact route optimises against the policy (else it measures the unit-change
        strategy): not for unbounded DP, where Δ = 1 already, nor beyond MAX_EDGE_ENTRIES."""
        rows = self.p or default_rows(max(policy.shape))
        only_bottom = policy.is_unbounded_dp
        return not only_bottom and 0 < policy.num_edges * rows <= MAX_EDGE_ENTRIES

    def strategy(self, workload: Workload):
        return self._cache("strategy").get(workload, lambda: self._optimize(workload, None))

    def policy_strategy(self, workload: Workload, policy: Policy):
        per_workload = self._cache("policy strategy").get(workload, IdentityCache)
        return per_workload.get(policy, lambda: self._for_policy(workload, policy))

    def _for_policy(self, workload: Workload, policy: Policy):
        unit = self.strategy(workload)
        if not self._policy_aware(policy):
            return unit
        aware = self._optimize(workload, policy, unit)

        def error(strategy) -> float:
            return sensitivity(strategy, policy) ** 2 * self._frobenius(workload, strategy)

        return aware if error(aware) < error(unit) else unit

    def _optimize(self, workload: Workload, policy: Policy | None, unit=None):
        """The strategy for unit changes (``policy`` None) or against ``policy``'s edges; a 1-D
        policy-aware search starts from the unit-change p-Identity ``unit`` when there is one (at
        K = 1024 under line and threshold policies, random starts ended 4-16× above the unit-change
        strategy's error, this start 0.2-0.6×)."""
        if isinstance(workload, Boxes) and len(workload.domain) > 1:
            edges = None if policy is None else axis_edges(policy)
            optimized = optimize_kronecker(workload, self.p, restarts=self.restarts, rng=self.seed,
                                           maxiter=self.maxiter, axis_edges=edges)
        else:
            edges = None if policy is None else tuple(policy.edges.T)
            start = unit.theta if isinstance(unit, PIdentityStrategy) else None
            optimized = optimize_pidentity(workload, self.p, self.restarts, self.seed, self.maxiter, edges=edges, start=start)
        if policy is None and workload.frobenius_sq() < optimized.lstsq_frobenius_sq(workload):
            return IdentityStrategy(workload.domain)
        return optimized
