"""A strategy optimised for the workload it answers: on x_G, for the policy-transformed workload."""

from __future__ import annotations

from .._validation import check_int
from ..strategies import IdentityStrategy, optimize_pidentity
from ..workloads import Workload
from .base import LinearMechanism


class Optimized(LinearMechanism):
    """HDMM's p-Identity template (OPT₀ in spirit), optimised for the given workload.

    Placed after a policy transform, the workload is W_G, so the strategy is optimised for the
    transformed workload — which no DP library does. Restarts are seeded by ``seed``; the strategy
    depends on the workload only, never on the data. The better of the optimised strategy and the
    identity (Θ = 0) is kept, as OPT₀ keeps the best of its templates. Δ = 1 (columns of L1 norm
    1); least squares by Woodbury; error 2 (Δ/ε)² ‖W A⁺‖_F².
    """

    name = "optimized"

    def __init__(self, p: int | None = None, restarts: int = 2, maxiter: int = 150, seed: int = 0):
        self.p = None if p is None else check_int(p, "p", minimum=1)
        self.restarts = check_int(restarts, "restarts", minimum=1)
        self.maxiter = check_int(maxiter, "maxiter", minimum=1)
        self.seed = check_int(seed, "seed", minimum=0)

    def strategy(self, workload: Workload):
        return self._cache("strategy").get(workload, lambda: self._optimize(workload))

    def _optimize(self, workload: Workload):
        optimized = optimize_pidentity(workload, self.p, self.restarts, self.seed, self.maxiter)
        if workload.frobenius_sq() < optimized.lstsq_frobenius_sq(workload):
            return IdentityStrategy(workload.domain)
        return optimized
