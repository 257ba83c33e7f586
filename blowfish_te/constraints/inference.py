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
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validation import check_epsilon, check_histogram
from ..errors import ConstraintError
from ..mechanisms import LinearMechanism, get_mechanism
from ..mechanisms.base import integer_entries
from ..noise import RNGLike, add_laplace, check_rng
from ..policies import Policy
from ..secure import SecureRandom
from ..sensitivity import check_compatible
from ..workloads import Workload, as_workload
from .graph import MAX_SEARCH_STEPS, ConstrainedSensitivity, strategy_sensitivity
from .queries import Constraints

__all__ = ["ConstrainedLeastSquares", "ConstrainedRelease", "prepare", "release_constrained"]


class ConstrainedLeastSquares:
    """x̂ = argmin ‖A x − y‖₂² subject to Q x = c (and x ≥ 0), solved with cvxpy.

    The problem is compiled once with y and c as parameters, so repeated solves (many releases of
    one plan, audits) skip cvxpy's canonicalisation. The feasible set is never empty for counts
    of real data (the true histogram is in it); Q x̂ = c holds to the solver's tolerance.
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

    def solve(self, y, counts) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        scale = max(1.0, float(np.abs(y).max(initial=0.0)))  # keep the solver's tolerances relative
        self._y.value = y / scale
        self._c.value = np.asarray(counts, dtype=np.float64) / scale
        self._problem.solve()
        if self._problem.status not in ("optimal", "optimal_inaccurate") or self._x.value is None:
            raise ConstraintError(f"constrained inference failed: the solver returned status {self._problem.status!r}")
        estimate = np.asarray(self._x.value, dtype=np.float64) * scale
        return np.maximum(estimate, 0.0) if self.nonnegative else estimate


@dataclass(frozen=True)
class ConstrainedRelease:
    """A release under constraints checked and planned, not yet run (:func:`prepare`): the
    sensitivity, the public counts the inference uses and everything validated. :meth:`execute`
    draws the noise."""

    workload: Workload
    counts: np.ndarray
    policy: Policy
    epsilon: float
    mechanism: LinearMechanism
    strategy: Workload
    sensitivity: float
    analysis: ConstrainedSensitivity
    known: Constraints | None
    public: np.ndarray

    @functools.cached_property
    def _solver(self) -> ConstrainedLeastSquares:
        return ConstrainedLeastSquares(self.strategy, self.known)

    def execute(self, rng: RNGLike = None):
        from ..release import Release

        gen = check_rng(rng)
        mech, strategy, workload = self.mechanism, self.strategy, self.workload
        delta, analysis = self.sensitivity, self.analysis
        scale = delta / self.epsilon
        tally = gen.tally() if isinstance(gen, SecureRandom) else None
        noisy = add_laplace(np.asarray(strategy.matvec(self.counts), dtype=np.float64), scale, gen, sensitivity=delta,
                            integer=integer_entries(strategy))
        sampler, secure = gen.summary(tally) if tally is not None else (mech.sampler, False)
        unconstrained = np.asarray(mech.reconstruct(workload, strategy, noisy), dtype=np.float64)
        if self.known is not None:
            estimate = self._solver.solve(noisy, self.public)
            answers = np.asarray(workload.matvec(estimate), dtype=np.float64)
        else:
            answers = unconstrained.copy()
        answers.flags.writeable = False
        unconstrained.flags.writeable = False
        total = mech.expected_error(workload, self.epsilon, sensitivity=delta)
        names = () if self.known is None else self.known.names
        choice = (f"constrained: {analysis}; each move changes the strategy's answers by at most "
                  f"{delta / max(analysis.records, 1):g} in L1, so S = {delta:g}; then least squares subject to the "
                  f"{len(names)} public counts that x determines and x >= 0")
        return Release(
            answers=answers, epsilon=self.epsilon, policy=self.policy, mechanism=mech.name, route="constrained",
            tree=None, stretch=None, workload=workload.name, component_totals={}, sampler=sampler, secure=secure,
            expected_mse=None if total is None else total / workload.num_queries, sensitivity=delta,
            noise_scale=scale, choice=choice, public_counts=dict(zip(names, self.public.tolist())),
            unconstrained_answers=unconstrained,
        )


def prepare(
    workload, x, policy: Policy, epsilon: float, constraints: Constraints, mechanism="identity",
    moves: str = "any", max_steps: int = MAX_SEARCH_STEPS, records=None,
) -> ConstrainedRelease:
    """Validate a release under ``constraints`` and compute its sensitivity, drawing nothing.

    The sensitivity comes from all the constraints; the inference uses those whose answer x
    determines (:meth:`Constraints.applicable`; ``records``: x holds only these record ids'
    records), after checking x against their public counts."""
    workload = as_workload(workload)
    check_compatible(workload, policy)
    epsilon = check_epsilon(epsilon)
    if not isinstance(constraints, Constraints):
        raise TypeError(f"constraints must be a blowfish_te.constraints.Constraints, got {type(constraints).__name__}")
    mech = get_mechanism(mechanism)
    if not isinstance(mech, LinearMechanism):
        raise ValueError(
            f"mechanism {mech.name!r} is not linear: under constraints only linear mechanisms have a known sensitivity "
            "(L moves times the strategy's largest change per move); use 'identity', 'hb', 'privelet', ..."
        )
    counts = check_histogram(x, policy.shape)
    rows = constraints.applicable(records)
    known = constraints.subset(rows) if rows.size else None
    public = known.public_counts(counts) if known is not None else np.zeros(0, dtype=np.int64)
    strategy = mech.strategy(workload)
    delta, analysis = strategy_sensitivity(strategy, constraints, policy, moves, max_steps)
    if not np.isfinite(delta / epsilon):
        raise ValueError(f"epsilon={epsilon!r} is too small: the noise scale {delta}/{epsilon} overflows")
    return ConstrainedRelease(workload, counts, policy, epsilon, mech, strategy, delta, analysis, known, public)


def release_constrained(
    workload, x, policy: Policy, epsilon: float, constraints: Constraints, mechanism="identity",
    rng: RNGLike = None, moves: str = "any", max_steps: int = MAX_SEARCH_STEPS, records=None,
):
    """:func:`blowfish_te.answer` with ``constraints`` (see the module docstring): :func:`prepare`,
    then :meth:`ConstrainedRelease.execute`. Everything is validated before any noise is drawn."""
    prepared = prepare(workload, x, policy, epsilon, constraints, mechanism, moves, max_steps, records)
    return prepared.execute(rng)
