"""Lower bounds on the error of matrix mechanisms (the SVD bound, Li and Miklau, PVLDB 2012)."""

from __future__ import annotations

import numpy as np

from ._validation import check_epsilon
from .policies import Policy
from .sensitivity import check_compatible
from .workloads import as_workload

#: Largest side of the dense Gram matrix whose eigenvalues the bound needs.
MAX_BOUND_SIDE = 8192


def lower_bound(workload, epsilon: float, policy: Policy | None = None) -> float:
    """The SVD bound (Li & Miklau, ICDT 2013) on the expected total squared error of any Laplace
    matrix mechanism for W (m × K): (2/ε²) (Σ σ_i(W))² / K.

    For a strategy A with W in its row space, ‖A‖₁ >= ‖A‖_{1→2} >= √(tr(AᵀA)/K) and
    ‖W A⁺‖_F² tr(AᵀA) >= (Σ σ_i(W))², so 2‖A‖₁²‖W A⁺‖_F²/ε² is at least the bound.

    With a ``policy`` G the bound is that of W_G = W P_G over its |E| columns: a Laplace
    release A x + Lap(b) is (ε, G)-Blowfish only if b >= Δ_G(A)/ε = ‖A P_G‖₁/ε, so its error is at
    least that of the DP matrix mechanism with strategy A P_G for W_G. The singular values come
    from W P_G P_Gᵀ Wᵀ = W L Wᵀ, L the policy's Laplacian (⊥ edges add to the degree only).
    """
    workload = as_workload(workload)
    epsilon = check_epsilon(epsilon)
    m, k = workload.shape
    if policy is None:
        columns = k
        if min(m, k) > MAX_BOUND_SIDE:
            raise ValueError(f"the SVD bound needs a dense {min(m, k)} × {min(m, k)} Gram matrix (limit {MAX_BOUND_SIDE})")
        if k <= m:
            gram = workload.gram_matrix(max_entries=k * k)
        else:  # W Wᵀ has the same non-zero eigenvalues
            gram = np.asarray(workload.matmat(np.asarray(workload.rmatmat(np.eye(m)))), dtype=np.float64)
    else:
        check_compatible(workload, policy)
        columns = policy.num_edges
        if columns == 0:
            return 0.0
        if m > MAX_BOUND_SIDE:
            raise ValueError(f"the policy SVD bound needs a dense {m} × {m} matrix (limit {MAX_BOUND_SIDE})")
        incidence = policy.incidence()
        laplacian = incidence @ incidence.T
        rows = np.asarray(workload.rmatmat(np.eye(m)), dtype=np.float64)  # Wᵀ, K × m
        gram = np.asarray(workload.matmat(laplacian @ rows), dtype=np.float64)
    eigenvalues = np.linalg.eigvalsh((gram + gram.T) / 2)
    trace_norm = float(np.sqrt(np.clip(eigenvalues, 0, None)).sum())
    return 2.0 / epsilon**2 * trace_norm**2 / columns
