"""The Uniform mechanism (DPBench's baseline)."""

from __future__ import annotations

import numpy as np

from ..noise import RandomSource, add_laplace
from ..policies import Policy
from ..routes import Outcome
from ..workloads import Workload
from .base import Mechanism


class Uniform(Mechanism):
    """Measure the total with Laplace(1/ε) and spread it evenly over the cells; answers W x̂.

    Privacy: one count of L1 sensitivity 1 under unit changes, so ε-DP; on x_G of a tree transform
    (ε, G)-Blowfish. There the total of x_G is not public (it moves by ±1 between neighbours), so it
    is always measured, never read. The estimate is biased by the data's shape, so there is no
    data-independent expected error. With ``rng=None`` the noise is exact discrete Laplace
    (the total is an integer), so releases are hardened.
    """

    name = "uniform"
    models_records = True

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        # the total has L1 sensitivity 1 under unit changes and is an integer for every x
        total = add_laplace(np.array([float(x.sum())]), 1.0 / epsilon, gen, sensitivity=1.0, integer=True)[0]
        return Outcome(np.asarray(workload.matvec(np.full(workload.size, total / workload.size)), dtype=np.float64))

