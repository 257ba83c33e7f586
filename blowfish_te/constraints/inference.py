"""A release under public count constraints: Laplace noise at the constrained sensitivity, then
constrained inference (post-processing, so it costs no privacy).

Privacy (He, Machanavajjhala, Ding, SIGMOD 2014, Thm 5.1 with the sensitivity of §8): neighbours
under the policy P = (T, G, I_Q) move at most L = max{α, ξ} records (:mod:`.graph`), so the
strategy's answers A x change by at most S = L · Δ_moves(A) in L1 and A x + Lap(S/ε)^m is
(ε, P)-Blowfish private. The estimate x̂ = argmin ‖A x̂ − ỹ‖² subject to Q x̂ = c and x̂ ≥ 0 uses
only the noisy answers and the public counts c (Hay et al., PVLDB 2010, use the same kind of
consistency step for hierarchies), so it keeps the guarantee.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import ConstraintError
from ..noise import RandomSource, add_laplace
from ..policies import Policy
from ..routes import Candidate, Outcome, Plan
from ..strategies.base import integer_entries
from ..workloads import MarginalCounts, Workload
from .graph import MAX_SEARCH_STEPS, ConstrainedSensitivity, strategy_sensitivity
from .queries import Constraints

if TYPE_CHECKING:
    from ..mechanisms import Mechanism

__all__ = ["ConstrainedLeastSquares", "ConstrainedRoute", "plan_constrained"]


class ConstrainedLeastSquares:
    """x̂ = argmin ‖A x − y‖₂² subject to Q x = c (and x ≥ 0), solved with cvxpy.

    The problem is compiled once with y and c as parameters, so repeated solves (many releases of
    one plan, audits) skip cvxpy's canonicalisation. Each solve starts cold and holds a lock while
    it sets the parameters: the estimate depends on (y, c) alone, never on earlier or concurrent
    solves, so a seed reproduces a release. The feasible set is never empty for counts of real data
    (the true histogram is in it); Q x̂ = c holds to the solver's tolerance.
    """

    def __init__(self, strategy, constraints: Constraints, nonnegative: bool = True):
        import cvxpy as cp

        matrix = strategy.tosparse() if isinstance(strategy, Workload) else sp.csr_array(strategy)
        self._x = cp.Variable(matrix.shape[1])
        self._y = cp.Parameter(matrix.shape[0])
        self._c = cp.Parameter(constraints.num_queries)
        rules = [constraints.matrix @ self._x == self._c]
        if nonnegative:
            rules.append(self._x >= 0)
        self._problem = cp.Problem(cp.Minimize(cp.sum_squares(matrix @ self._x - self._y)), rules)
        self.nonnegative = nonnegative
        self._lock = threading.Lock()

    def solve(self, y: ArrayLike, counts: ArrayLike) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        scale = max(1.0, float(np.abs(y).max(initial=0.0)))  # keep the solver's tolerances relative
        with self._lock:
            self._y.value = y / scale
            self._c.value = np.asarray(counts, dtype=np.float64) / scale
            self._problem.solve(warm_start=False)
            status, value = self._problem.status, self._x.value
        if status not in ("optimal", "optimal_inaccurate") or value is None:
            raise ConstraintError(f"constrained inference failed: the solver returned status {status!r}")
        estimate = np.asarray(value, dtype=np.float64) * scale
        return np.maximum(estimate, 0.0) if self.nonnegative else estimate


@dataclass(frozen=True)
class ConstrainedRoute(Candidate):
    """The route of a release under public constraints (route ``"constrained"``): the linear
    mechanism's strategy measured on x with Laplace noise at the constrained sensitivity, then
    constrained inference. Planned by :func:`plan_constrained`, without reading x."""

    route: str = "constrained"
    strategy: Workload | None = field(default=None, compare=False, repr=False)
    sensitivity: float = 0.0
    analysis: ConstrainedSensitivity | None = field(default=None, compare=False, repr=False)
    known: Constraints | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def _solver(self) -> ConstrainedLeastSquares:
        return ConstrainedLeastSquares(self.strategy, self.known)

    def _public(self, x: np.ndarray) -> np.ndarray:
        return self.known.public_counts(x) if self.known is not None else np.zeros(0, dtype=np.int64)

    def check(self, x: np.ndarray) -> None:
        """Refuse x outside the constraints' public counts (a release on it would claim a
        guarantee the policy does not give)."""
        self._public(x)

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        mech, strategy, workload, delta = self.mechanism, self.strategy, self.workload, self.sensitivity
        public = self._public(x)
        scale = delta / self.epsilon
        noisy = add_laplace(np.asarray(strategy.matvec(x), dtype=np.float64), scale, gen, sensitivity=delta,
                            integer=integer_entries(strategy))
        unconstrained = np.asarray(mech.reconstruct(workload, strategy, noisy), dtype=np.float64)
        if self.known is not None:
            answers = np.asarray(workload.matvec(self._solver.solve(noisy, public)), dtype=np.float64)
        else:
            answers = unconstrained.copy()
        names = () if self.known is None else self.known.names
        return Outcome(answers, {}, delta, scale, public_counts=dict(zip(names, public.tolist())),
                       unconstrained_answers=unconstrained)


def plan_constrained(
    workload: Workload, policy: Policy, epsilon: float, constraints: Constraints, mechanism: Mechanism, moves: str = "any",
    max_steps: int = MAX_SEARCH_STEPS, records: ArrayLike | None = None,
) -> Plan:
    """The plan of a release under ``constraints`` (see the module docstring) for validated
    ``workload``, ``epsilon`` and a mechanism instance: its sensitivity, computed without reading
    the data. The sensitivity comes from all the constraints; the inference uses those whose
    answer x determines (:meth:`Constraints.applicable`; ``records``: x holds only these record
    ids' records), after the release checks x against their public counts."""
    if not isinstance(constraints, Constraints):
        raise TypeError(f"constraints must be a blowfish_te.constraints.Constraints, got {type(constraints).__name__}")
    if "exact" not in mechanism.tags.routes:
        raise ValueError(
            f"mechanism {mechanism.name!r} is not linear: under constraints only linear mechanisms have a known sensitivity "
            "(L moves times the strategy's largest change per move); use 'identity', 'hb', 'privelet', ..."
        )
    rows = constraints.applicable(records)
    known = constraints.subset(rows) if rows.size else None
    strategy = mechanism.strategy(workload)
    delta, analysis = strategy_sensitivity(strategy, constraints, policy, moves, max_steps)
    if not np.isfinite(delta / epsilon):
        raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale {delta}/{epsilon} overflows")
    total = mechanism.expected_error(workload, epsilon, sensitivity=delta)
    route = ConstrainedRoute(expected_mse=None if total is None else total / workload.num_queries, mechanism=mechanism,
                             workload=workload, policy=policy, epsilon=epsilon, strategy=strategy, sensitivity=delta,
                             analysis=analysis, known=known)
    names = () if known is None else known.names
    reason = (f"constrained: {analysis}; each move changes the strategy's answers by at most "
              f"{delta / max(analysis.records, 1):g} in L1, so S = {delta:g}; then least squares subject to the "
              f"{len(names)} public counts that x determines and x >= 0")
    return Plan(route, (route,), reason, workload, policy, epsilon, mechanism)
