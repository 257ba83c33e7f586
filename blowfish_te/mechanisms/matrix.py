"""The matrix mechanism for any strategy, and a non-negative reconstruction for any linear mechanism."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..strategies import GeneralStrategy, LeastSquares
from ..workloads import Workload, as_workload
from .base import LinearMechanism, Mechanism

if TYPE_CHECKING:
    from ..policies import Policy


class MatrixMechanism(LinearMechanism, register=False):
    """The matrix mechanism (Li, Hay, Rastogi, Miklau, McGregor 2010) with a given strategy A.

    ``strategy`` is a workload or matrix (p × K), or a function of the workload returning one.
    Measures A x + Lap(Δ/ε), Δ = A's L1 sensitivity (largest column norm for unit changes, Δ_G(A)
    from the policy's edges in the exact route), and answers W A⁺ y by least squares (A must have
    full column rank). Expected total squared error 2 (Δ/ε)² ‖W A⁺‖_F².
    """

    name = "matrix"

    def __init__(self, strategy):
        is_function = callable(strategy) and not isinstance(strategy, Workload)
        self._given = strategy if is_function else as_workload(strategy, "strategy")

    def get_params(self) -> dict:
        return {"strategy": self._given}  # stored aside: ``strategy`` is the method that builds A

    def strategy(self, workload: Workload) -> Workload:
        return self._cache("strategy").get(workload, lambda: self._build(workload))

    def _build(self, workload: Workload) -> Workload:
        chosen = self._given(workload) if callable(self._given) and not isinstance(self._given, Workload) else self._given
        chosen = as_workload(chosen, "strategy")
        if chosen.size != workload.size:
            raise ValueError(f"strategy has {chosen.size} columns but the workload has {workload.size} cells")
        return chosen if isinstance(chosen, LeastSquares) else GeneralStrategy(chosen)


class NonNegative(LinearMechanism):
    """Any linear mechanism with a non-negative least-squares reconstruction: the same measurement
    (hence the same privacy), then x̂ = argmin_{x >= 0} ‖A x - y‖₂ and answers W x̂.

    Meaningful for histograms and for x_G of a tree transform (subtree counts are non-negative).
    The estimate is no longer linear in y, so there is no data-independent expected error.
    """

    def __init__(self, mechanism: LinearMechanism):
        if not (isinstance(mechanism, Mechanism) and mechanism.tags.linear):
            raise TypeError(f"NonNegative wraps a LinearMechanism, got {type(mechanism).__name__}")
        self.mechanism = mechanism
        self.name = f"nonnegative({mechanism.name})"

    def strategy(self, workload: Workload) -> Workload:
        return self.mechanism.strategy(workload)

    def policy_strategy(self, workload: Workload, policy: Policy) -> Workload:
        return self.mechanism.policy_strategy(workload, policy)

    def reconstruct(self, workload: Workload, strategy: Workload, y: np.ndarray) -> np.ndarray:
        from scipy.optimize import lsq_linear  # heavy: loaded on first use

        solution = lsq_linear(strategy.as_linear_operator(), y, bounds=(0, np.inf), lsq_solver="lsmr", lsmr_tol="auto")
        return workload.matvec(solution.x)

    def reconstruction_frobenius_sq(self, workload: Workload, strategy: Workload) -> None:
        return None
