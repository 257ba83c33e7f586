"""Optimised p-Identity strategies (McKenna, Miklau, Hay, Machanavajjhala, HDMM, PVLDB 2018).

The template A(Θ) = [I; Θ] S⁻¹, Θ ∈ R_+^{p×K}, S = diag(1 + 1ᵀΘ), has every column of L1 norm 1
(sensitivity 1). With C = S WᵀW S and R = (I_p + ΘΘᵀ)⁻¹, Woodbury gives

    L(Θ) = ‖W A⁺‖_F² = tr(C) - tr(R Θ C Θᵀ),
    ∇L = -2 R (ΘC - (ΘCΘᵀ) R Θ) + 1_p (2 diag(C - CΘᵀRΘ) ⊘ s)ᵀ.

All products with WᵀW go through the workload's implicit Gram operator on p columns
(B = ΘS, U = WᵀW Bᵀ), so an evaluation costs one Gram product plus O(K p² + p³) — no K × K
matrix. Least squares is Woodbury as well, in its dual form A⁺y = S (y₁ + Θᵀλ), (I + ΘΘᵀ) λ =
y₂ - Θy₁, which keeps full precision when Θ has huge entries.

Against a policy G the noise scale is Δ_G(A) = max over edges (u, v) of ‖A(e_u - e_v)‖₁, so the
error is 2 Δ_G(A)² L(Θ)/ε² and columns of L1 norm 1 no longer fix it. With n_j = θ_j / s_j, an edge
costs Δ_uv = 1/s_u + 1/s_v + ‖n_u - n_v‖₁ (a ⊥ edge costs 1), and the policy-aware optimiser
minimises L(Θ)·Δ̃^power, Δ̃ = (Σ_e Δ_uv^q)^{1/q} a smooth upper bound on the maximum (q set so that
Δ̃ <= 1.03 max): neighbouring columns that look alike are cheap, which is how a policy pays off.

Column scales are bounded, s_u <= S = :data:`MAX_COLUMN_SCALE` = 2¹⁷. Left alone, the policy-aware
search drives s to 10⁷-10⁸ under partition policies (a near-1 row for the public block totals next
to identity rows of 1/s): Δ_G ≈ 2/s is then a difference of entries near 1, each rounded to
u = 2⁻⁵³, and loses nine of its sixteen digits. With s_u <= S every edge costs at least
1/s_u + 1/s_v >= 2/S (a ⊥ edge 1), and entries of at most 1 put Δ_G within (4/Δ_G + p + 2) u
<= 2¹⁶·4u + (p + 2) u ≈ 3·10⁻¹¹ of its value. The search runs on the box 0 <= θ <= (S - 2)/p,
and :func:`cap_scales` brings other columns to s_u = S - 1, moving less than 1/(S - 1) of the
column's L1 weight from Θ to its identity entry; the error is always that of the strategy kept.
"""


from __future__ import annotations

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from .._validation import check_int, check_real, check_real_array
from ..noise import RNGLike, check_rng
from ..workloads import Workload, as_workload
from ..workloads.base import as_block, check_norm
from .base import LeastSquares
from .lbfgs import minimize_nonnegative

#: Largest column scale s_u = 1 + Σ_i θ_iu of a p-Identity strategy (see the module docstring).
MAX_COLUMN_SCALE = 2.0**17


def cap_scales(theta: np.ndarray) -> np.ndarray:
    """Θ with every column whose scale s_u = 1 + Σ_i θ_iu exceeds :data:`MAX_COLUMN_SCALE` = S
    multiplied by (S - 2)/(s_u - 1), so that s_u = S - 1 (rounding cannot lift it past S); the
    other columns as they are."""
    theta = check_real_array(theta, "theta", ndim=2, minimum=0)
    sums = theta.sum(axis=0)
    factor = np.divide(MAX_COLUMN_SCALE - 2.0, sums, out=np.ones_like(sums), where=sums + 1.0 > MAX_COLUMN_SCALE)
    return theta * factor


class PIdentityStrategy(LeastSquares, Workload):
    """A = [I; Θ] diag(1/s), s = 1 + column sums of Θ (non-negative), every s_u <= :data:`MAX_COLUMN_SCALE`."""

    def __init__(self, theta: np.ndarray, domain):
        theta = check_real_array(theta, "theta", ndim=2, minimum=0)
        with np.errstate(over="ignore"):  # a column summing past the largest double is refused below
            scale = 1.0 + theta.sum(axis=0)
        if scale.size and scale.max() > MAX_COLUMN_SCALE:
            u = int(np.argmax(scale))
            raise ValueError(
                f"theta's column {u} has scale s = 1 + column sum = {scale[u]:.6g} > MAX_COLUMN_SCALE = 2**17: "
                "the policy sensitivities of such a strategy lose their digits; cap_scales(theta) rescales it")
        self.theta = theta
        self.scale = scale
        super().__init__(domain, theta.shape[1] + theta.shape[0], f"p-identity(p={theta.shape[0]})")
        if self.size != theta.shape[1]:
            raise ValueError(f"theta has {theta.shape[1]} columns but the domain has {self.size} cells")
        # Cholesky factor of I + ΘΘᵀ (p × p); none without rows (older scipy refuses empty systems)
        self._factor = scipy.linalg.cho_factor(np.eye(theta.shape[0]) + theta @ theta.T) if theta.shape[0] else None

    def _matmat(self, x):
        x = as_block(x) / self.scale[:, None]
        return np.concatenate([x, self.theta @ x])

    def _rmatmat(self, y):
        y = as_block(y)
        k = self.size
        return (y[:k] + self.theta.T @ y[k:]) / self.scale[:, None]

    def _solve_rows(self, rhs: np.ndarray) -> np.ndarray:
        """(I + ΘΘᵀ)⁻¹ rhs through the Cholesky factor (p × c)."""
        return rhs if self._factor is None else scipy.linalg.cho_solve(self._factor, rhs)

    def _solve_gram(self, b: np.ndarray) -> np.ndarray:
        """(I + ΘᵀΘ)⁻¹ b by Woodbury, b - Θᵀ (I + ΘΘᵀ)⁻¹ Θ b, through a Cholesky factor and one
        step of iterative refinement (optimised Θ can have entries of 10⁴ and more, where an
        explicit inverse loses eight digits)."""
        theta = self.theta

        def woodbury(r):
            return r - theta.T @ self._solve_rows(theta @ r)

        u = woodbury(b)
        return u + woodbury(b - u - theta.T @ (theta @ u))

    def _pinv_matmat(self, y):
        """min_u ‖u - y₁‖² + ‖Θu - y₂‖² in its dual form, u = y₁ + Θᵀλ with (I + ΘΘᵀ) λ = y₂ - Θy₁:
        no difference of nearly equal terms, so the estimate keeps full precision where Θ is
        huge (columns the workload only sees through Θ); then A⁺y = S u."""
        y = np.asarray(y, dtype=np.float64)
        k = self.size
        low, high = y[:k], y[k:]
        multipliers = self._solve_rows(high - self.theta @ low)
        return self.scale[:, None] * (low + self.theta.T @ multipliers)

    def _pinv_rmatmat(self, x):
        z = self._solve_gram(self.scale[:, None] * np.asarray(x, dtype=np.float64))
        return np.concatenate([z, self.theta @ z])

    def difference_norms(self, u: ArrayLike, v: ArrayLike, norm: str = "l1") -> np.ndarray:
        """Column u is e_u/s_u over Θ_u/s_u: for u != v the difference has 1/s_u and 1/s_v on top."""
        u, v = self._check_pairs(u, v)
        check_norm(norm)
        k = self.size
        cell = v < k
        tu = self.theta[:, u] / self.scale[u]
        tv = np.where(cell, self.theta[:, np.minimum(v, k - 1)] / self.scale[np.minimum(v, k - 1)], 0.0)
        top_u = 1.0 / self.scale[u]
        top_v = np.where(cell, 1.0 / self.scale[np.minimum(v, k - 1)], 0.0)
        same = u == v
        if norm == "l1":
            out = top_u + top_v + np.abs(tu - tv).sum(axis=0)
        else:
            out = top_u**2 + top_v**2 + ((tu - tv) ** 2).sum(axis=0)
        return np.where(same, 0.0, out)


def _objective(flat: np.ndarray, p: int, k: int, gram, gram_diag: np.ndarray):
    """(L(Θ), ∇L) of the module docstring; (inf, 0) at a point where they overflow (the line search
    probes such points along long steps and backs off from them)."""
    theta = flat.reshape(p, k)
    with np.errstate(over="ignore", invalid="ignore"):
        s = 1.0 + theta.sum(axis=0)
        b = theta * s
        u = np.asarray(gram.matmat(b.T))  # K × p: WᵀW Bᵀ
        try:
            r = np.linalg.inv(np.eye(p) + theta @ theta.T)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(flat)
        bu = b @ u  # Θ C Θᵀ
        trace_c = float((s**2 * gram_diag).sum())
        loss = trace_c - float(np.sum(r * bu.T))
        r_theta = r @ theta
        theta_cx = r @ (u.T * s - bu.T @ r_theta)
        diag_cx = s**2 * gram_diag - s * np.einsum("ij,ji->i", u, r_theta)
        grad = -2.0 * theta_cx + (2.0 * diag_cx / s)[None, :]
    if not (np.isfinite(loss) and np.isfinite(grad).all()):
        return np.inf, np.zeros_like(flat)
    return loss, grad.reshape(-1)


def _soft_sensitivity(theta: np.ndarray, u: np.ndarray, v: np.ndarray, q: float):
    """Δ̃ = (Σ_e Δ_e^q)^{1/q} over the edges (u, v) (v = K for ⊥) and its gradient in Θ."""
    k = theta.shape[1]
    s = 1.0 + theta.sum(axis=0)
    n = theta / s
    bottom = v == k
    w = np.minimum(v, k - 1)
    diff = n[:, u] - np.where(bottom, 0.0, n[:, w])
    sign = np.sign(diff)
    cost = 1.0 / s[u] + np.where(bottom, 0.0, 1.0 / s[w]) + np.abs(diff).sum(axis=0)
    top = cost.max()
    ratio = cost / top
    total = float((ratio**q).sum())
    soft = top * total ** (1.0 / q)
    weight = ratio ** (q - 1) * total ** (1.0 / q - 1.0)  # dΔ̃/dΔ_e
    # dΔ_e/dθ_u = (g - (gᵀn_u + 1/s_u) 1)/s_u and dΔ_e/dθ_v = (-g + (gᵀn_v - 1/s_v) 1)/s_v
    grad_u = (sign - ((sign * n[:, u]).sum(axis=0) + 1.0 / s[u])) / s[u] * weight
    grad_v = (-sign + ((sign * n[:, w]).sum(axis=0) - 1.0 / s[w])) / s[w] * np.where(bottom, 0.0, weight)
    grad = np.zeros((k, theta.shape[0]))
    np.add.at(grad, u, grad_u.T)
    np.add.at(grad, w, grad_v.T)
    return soft, grad.T


def _policy_objective(flat, p, k, gram, gram_diag, u, v, q, power):
    loss, grad = _objective(flat, p, k, gram, gram_diag)
    if not np.isfinite(loss):
        return loss, grad
    soft, soft_grad = _soft_sensitivity(flat.reshape(p, k), u, v, q)
    scale = soft**power
    return loss * scale, grad * scale + loss * power * soft ** (power - 1) * soft_grad.reshape(-1)


#: Iteration limit of one p-Identity optimisation (progress usually stops it after 1,000-1,300).
PIDENTITY_MAXITER = 2000


def default_rows(k: int) -> int:
    """p = min(K // 16, 128), at least 1: HDMM's OPT₀ takes K // 16; at K = 4096, 128 rows reach
    6.57× the SVD bound on prefixes where 64 stop near 7.2×, and beyond 128 each iteration's
    O(K p²) products dominate."""
    return max(1, min(k // 16, 128))


def default_restarts(k: int, p: int) -> int:
    """Restarts where they pay: up to 4 when one optimisation is cheap (K·p·(p + 32) <= 2²¹,
    e.g. K = 256, p = 16), else 1. At K = 256 four seeded starts ranged over 4.40-4.51× the SVD
    bound on prefixes; at K = 1024 one start already reaches HDMM's optimum."""
    return max(1, min(4, 2**21 // (k * p * (p + 32))))


def optimize_pidentity(
    workload: Workload, p: int | None = None, restarts: int | None = None, rng: RNGLike = 0, maxiter: int = PIDENTITY_MAXITER,
    edges: tuple[np.ndarray, np.ndarray] | None = None, power: float = 2.0, start: np.ndarray | None = None,
    tol: float = 1e-4,
) -> PIdentityStrategy:
    """Minimise ‖W A(Θ)⁺‖_F² over Θ >= 0 by projected L-BFGS (:mod:`.lbfgs`) from ``restarts``
    seeded random starts (uniform on [0, 1)); returns the best. Each run stops after ``maxiter``
    iterations or once its loss fell by less than ``tol`` (relative) over 50 iterations. ``p``
    defaults to :func:`default_rows`, ``restarts`` to :func:`default_restarts`.

    With ``edges = (u, v)`` of a policy (v = K for ⊥) the objective is ‖W A⁺‖_F² · Δ̃_G^power (see
    the module docstring; power 2 is the error of A itself, 2/d for one factor of a d-dimensional
    Kronecker product). ``start`` (p × K) replaces the first random start. The strategy depends on
    the workload and policy only (never on data), so optimising it costs no privacy; whatever the
    optimiser believed, callers calibrate noise to Δ_G computed exactly from the edges.

    Column scales stay within :data:`MAX_COLUMN_SCALE`: against a policy the search runs on
    0 <= θ <= (S - 2)/p; for unit changes (Δ = 1 whatever the scales) :func:`cap_scales` bounds
    the result.
    """
    workload = as_workload(workload)
    k = workload.size
    p = default_rows(k) if p is None else check_int(p, "p", minimum=1)
    restarts = default_restarts(k, p) if restarts is None else check_int(restarts, "restarts", minimum=1)
    maxiter = check_int(maxiter, "maxiter", minimum=1)
    tol = check_real(tol, "tol", 0)
    gen = check_rng(rng)
    gram = workload.gram()
    gram_diag = np.asarray(workload.column_norms("l2sq"), dtype=np.float64)
    objective, args, upper = _objective, (p, k, gram, gram_diag), np.inf
    if edges is not None:
        u, v = (np.asarray(e, dtype=np.int64) for e in edges)
        q = max(8.0, float(np.log(max(u.size, 2)) / np.log(1.03)))
        objective, args = _policy_objective, args + (u, v, q, float(power))
        upper = (MAX_COLUMN_SCALE - 2.0) / p
    if start is not None:
        start = check_real_array(start, "start", ndim=2, minimum=0)
        if start.shape != (p, k):
            raise ValueError(f"start must have shape ({p}, {k}) (p × K), got {start.shape}")

    best = None
    for attempt in range(restarts):
        initial = start.reshape(-1) if attempt == 0 and start is not None else gen.random(p * k)
        found = minimize_nonnegative(objective, initial, args, maxiter=maxiter, tol=tol, upper=upper)
        if best is None or found.fun < best.fun:
            best = found
    return PIdentityStrategy(cap_scales(best.x.reshape(p, k)), workload.domain)
