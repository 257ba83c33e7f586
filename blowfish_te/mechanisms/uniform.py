"""The Uniform mechanism (DPBench's baseline)."""

from __future__ import annotations

import numpy as np

from .._validation import check_epsilon, check_histogram
from ..noise import RNGLike, check_rng, laplace
from ..workloads import Workload, as_workload
from .base import Mechanism


class Uniform(Mechanism):
    """Measure the total with Laplace(1/ε) and spread it evenly over the cells; answers W x̂.

    Privacy: one count of L1 sensitivity 1 under unit changes, so ε-DP; on x_G of a tree transform
    (ε, G)-Blowfish. There the total of x_G is not public (it moves by ±1 between neighbours), so it
    is always measured, never read. The estimate is biased by the data's shape, so there is no
    data-independent expected error.
    """

    name = "uniform"

    def run(self, workload: Workload, x, epsilon: float, rng: RNGLike = None) -> np.ndarray:
        workload = as_workload(workload)
        x = check_histogram(x, workload.domain)
        epsilon = check_epsilon(epsilon)
        total = float(x.sum()) + laplace(1.0 / epsilon, 1, check_rng(rng))[0]
        return np.asarray(workload.matvec(np.full(workload.size, total / workload.size)), dtype=np.float64)
