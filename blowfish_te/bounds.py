"""Lower bounds on the error of matrix mechanisms (SPEC §5)."""

from __future__ import annotations

import numpy as np

from ._validation import check_epsilon
from .workloads import Workload, as_workload

#: Largest side of the dense Gram matrix whose eigenvalues the bound needs.
MAX_BOUND_SIDE = 8192


def lower_bound(workload, epsilon: float) -> float:
    """The SVD bound (Li & Miklau, ICDT 2013) on the expected total squared error of any ε-DP
    matrix mechanism with Laplace noise for W (m × K): (2/ε²) (Σ σ_i(W))² / K.

    For a strategy A with W in its row space, ‖A‖₁ >= ‖A‖_{1→2} >= √(tr(AᵀA)/K) and
    ‖W A⁺‖_F² tr(AᵀA) >= (Σ σ_i(W))², so 2‖A‖₁²‖W A⁺‖_F²/ε² is at least the bound. Applied to
    W_G of a policy transform it bounds every Blowfish matrix mechanism through that transform.
    """
    workload = as_workload(workload)
    epsilon = check_epsilon(epsilon)
    m, k = workload.shape
    side = min(m, k)
    if side > MAX_BOUND_SIDE:
        raise ValueError(f"the SVD bound needs a dense {side} × {side} Gram matrix (limit {MAX_BOUND_SIDE})")
    if k <= m:
        gram = workload.gram_matrix(max_entries=k * k)
    else:  # W Wᵀ has the same non-zero eigenvalues
        gram = np.asarray(workload.matmat(np.asarray(workload.rmatmat(np.eye(m)))), dtype=np.float64)
    eigenvalues = np.linalg.eigvalsh((gram + gram.T) / 2)
    trace_norm = float(np.sqrt(np.clip(eigenvalues, 0, None)).sum())
    return 2.0 / epsilon**2 * trace_norm**2 / k
