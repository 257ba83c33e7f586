"""Lower bounds on the error of matrix mechanisms: the SVD bound (Li and Miklau, ICDT 2013) and
its column-weighted refinement."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_epsilon
from .policies import Policy
from .sensitivity import check_compatible
from .workloads import Marginals, Workload, as_workload

#: Largest side of the dense Gram matrix whose eigenvalues the bound needs.
MAX_BOUND_SIDE = 8192
#: Most entries of the dense W P_G the weighted bound decomposes at every step.
MAX_WEIGHTED_ENTRIES = 2**23


def lower_bound(workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None) -> float:
    """The SVD bound (Li & Miklau, ICDT 2013) on the expected total squared error of any Laplace
    matrix mechanism for W (m × K): (2/ε²) (Σ σ_i(W))² / K.

    For a strategy A with W in its row space, ‖A‖₁ >= ‖A‖_{1→2} >= √(tr(AᵀA)/K) and
    ‖W A⁺‖_F² tr(AᵀA) >= (Σ σ_i(W))², so 2‖A‖₁²‖W A⁺‖_F²/ε² is at least the bound.

    With a ``policy`` G the bound is that of W_G = W P_G over its |E| columns: a Laplace
    release A x + Lap(b) is (ε, G)-Blowfish only if b >= Δ_G(A)/ε = ‖A P_G‖₁/ε, so its error is at
    least that of the DP matrix mechanism with strategy A P_G for W_G. The singular values come
    from W P_G P_Gᵀ Wᵀ = W L Wᵀ, L the policy's Laplacian (⊥ edges add to the degree only), or
    with more queries than cells from G^½ L G^½ (G = WᵀW), which has the same non-zero eigenvalues.
    """
    workload = as_workload(workload)
    epsilon = check_epsilon(epsilon)
    m, k = workload.shape
    if isinstance(workload, Marginals):
        found = marginal_lower_bound(workload, epsilon, policy)
        if found is not None:
            return found
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
        if policy.has_bottom and policy.is_differential_privacy:  # unbounded DP: L = I, the plain bound
            return lower_bound(workload, epsilon)
        columns = policy.num_edges
        if columns == 0:
            return 0.0
        # W L Wᵀ = Fᵀ L F with F = Wᵀ (K × m); with more queries than cells F = G^½ (K × K,
        # G = WᵀW) instead, whose Fᵀ L F has the same non-zero eigenvalues
        side = min(m, k)
        if side > MAX_BOUND_SIDE:
            raise ValueError(f"the policy SVD bound needs a dense {side} × {side} matrix (limit {MAX_BOUND_SIDE})")
        if k < m:
            values, vectors = np.linalg.eigh(workload.gram_matrix(max_entries=k * k))
            factor = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
            transposed_times = factor.__matmul__  # G^½ is symmetric
        else:
            factor = np.asarray(workload.rmatmat(np.eye(m)), dtype=np.float64)
            transposed_times = workload.matmat  # Fᵀ = W, applied implicitly
        if policy.is_complete:  # bounded DP: L = K I - 11ᵀ, never a list of K²/2 edges
            totals = factor.sum(axis=0)
            gram = k * np.asarray(transposed_times(factor), dtype=np.float64) - np.outer(totals, totals)
        else:
            incidence = policy.incidence()
            gram = np.asarray(transposed_times(incidence @ (incidence.T @ factor)), dtype=np.float64)
    eigenvalues = np.linalg.eigvalsh((gram + gram.T) / 2)
    trace_norm = float(np.sqrt(np.clip(eigenvalues, 0, None)).sum())
    return 2.0 / epsilon**2 * trace_norm**2 / columns


def _laplacian_eigenvalue(policy: Policy | None, shape: tuple[int, ...]):
    """For a policy whose Laplacian is diagonal in the projectors E_T of
    :mod:`blowfish_te.strategies.marginals` — unit changes and unbounded DP (L = I), bounded DP
    (L = K I - 11ᵀ) and the attribute policy (L = Σ_i n_i Q_i ⊗ I) — the eigenvalue of L on E_T
    as a function of T, and the number of edges; else None."""
    k = int(np.prod(shape))
    if policy is None or (policy.has_bottom and policy.is_differential_privacy):
        return (lambda t: 1.0), k
    if policy.is_complete:
        return (lambda t: float(k) if t else 0.0), k * (k - 1) // 2
    if policy.is_attribute:
        return (lambda t: float(sum(shape[a] for a in t))), policy.num_edges
    return None


def marginal_lower_bound(workload: Marginals, epsilon: float, policy: Policy | None = None) -> float | None:
    """The SVD bound of :func:`lower_bound` for a marginal workload, from the marginals' eigen-
    algebra instead of a dense Gram (any number of cells): WᵀW = K Σ_T μ_T E_T with μ_T =
    Σ_{R⊇T} 1/N_R and rank r_T = Π_{i∈T}(n_i - 1) (:mod:`blowfish_te.strategies.marginals`), so the
    singular values of W_G = W P_G are √(K μ_T ℓ_T), ℓ_T the Laplacian's eigenvalue on E_T, and
    the bound is (2/ε²) (Σ_T r_T √(K μ_T ℓ_T))² / |E|. None for a policy whose Laplacian is not
    diagonal in the E_T (then :func:`lower_bound` computes it densely)."""
    import itertools
    import math

    shape = workload.domain
    spectrum = _laplacian_eigenvalue(policy, shape)
    if spectrum is None:
        return None
    eigenvalue, columns = spectrum
    if columns == 0:
        return 0.0
    mu: dict[tuple[int, ...], float] = {}
    for r in workload.subsets:
        r = tuple(sorted(r))
        n_r = math.prod(shape[a] for a in r)
        for size in range(len(r) + 1):
            for t in itertools.combinations(r, size):
                mu[t] = mu.get(t, 0.0) + 1.0 / n_r
    k = math.prod(shape)
    trace_norm = sum(math.prod(shape[a] - 1 for a in t) * math.sqrt(k * value * eigenvalue(t)) for t, value in mu.items())
    return 2.0 / check_epsilon(epsilon) ** 2 * trace_norm**2 / columns


def weighted_lower_bound(workload: Workload | ArrayLike, epsilon: float, policy: Policy | None = None, steps: int = 100) -> float:
    """A lower bound on the expected total squared error of any Laplace matrix mechanism for W
    (under ``policy``: for W_G = W P_G over the policy's edges), at least :func:`lower_bound`:

        max over weights d >= 0, Σ d = 1, on the N columns of (2/ε²) ‖W_G diag(√d)‖_*²,

    ‖·‖_* the nuclear norm. Every d gives a valid bound: for a strategy B with W_G in its row
    space, ‖W_G B⁺‖_F ‖B D^½‖_F >= ‖W_G B⁺ B D^½‖_* = ‖W_G D^½‖_* (Hölder for Schatten norms)
    and ‖B D^½‖_F² = Σ_j d_j ‖b_j‖₂² <= ‖B‖₁², so 2‖B‖₁²‖W_G B⁺‖_F²/ε² is at least the bound
    (with a policy, B = A P_G as in :func:`lower_bound`). Uniform d gives the SVD bound
    (Σσ_i)²/N; ``steps`` of exponentiated-gradient ascent from it move d towards the columns that
    matter, and the best value seen is returned. The same argument bounds Gaussian (L2) matrix
    mechanisms with ‖B‖_{1→2} for ‖B‖₁, so a gap between this bound and a Laplace strategy's
    error that no d closes comes from ‖B‖₁ >= ‖B‖_{1→2}, the L1 sensitivity of Laplace noise.
    Dense: at most 2^23 entries of W_G, one SVD per step.
    """
    from ._validation import check_int

    workload = as_workload(workload)
    epsilon = check_epsilon(epsilon)
    steps = check_int(steps, "steps", minimum=0)
    m, k = workload.shape
    columns = k if policy is None else policy.num_edges
    if policy is not None:
        check_compatible(workload, policy)
        if columns == 0:
            return 0.0
    if m * columns > MAX_WEIGHTED_ENTRIES:
        raise ValueError(f"the weighted bound decomposes a dense {m} × {columns} matrix (limit {MAX_WEIGHTED_ENTRIES} entries)")
    dense = np.asarray(workload.rmatmat(np.eye(m)), dtype=np.float64).T  # W, m × K
    if policy is not None:
        dense = np.asarray((policy.incidence().T @ dense.T).T)  # W P_G, m × |E|
    weights = np.full(columns, 1.0 / columns)
    best = 0.0
    for step in range(steps + 1):
        root = np.sqrt(weights)
        u, sigma, vt = np.linalg.svd(dense * root, full_matrices=False)
        best = max(best, float(sigma.sum()) ** 2)
        if step == steps:
            break
        # d/dd_j ‖W diag(√d)‖_* = (Wᵀ U Vᵀ)_jj / (2 √d_j), on the columns still weighted
        grad = np.einsum("ij,ij->j", dense, u @ vt) / (2 * np.maximum(root, 1e-300))
        scale = np.abs(grad).max()
        if not np.isfinite(scale) or scale == 0:
            break
        weights = weights * np.exp(0.5 * grad / scale)
        weights /= weights.sum()
    return 2.0 / epsilon**2 * best
