"""k-means under Blowfish (SuLQ k-means, Blum, Dwork, McSherry, Nissim, PODS 2005; He,
Machanavajjhala, Ding, SIGMOD 2014, §6) on a histogram over a 1-D or 2-D grid of points.

Every iteration assigns each cell to its nearest public centre μ_j, then releases the cluster
sizes n_j = Σ_{c ∈ j} x_c and the per-cluster sums of the points, each with Laplace noise, and
moves μ_j to (noisy sum) / (noisy size).

Privacy. The assignment depends only on the public centres (outputs of earlier iterations), so
each release is a linear query of x and the Laplace mechanism with its policy-specific
sensitivity is (ε_t, G)-Blowfish (He et al. Thm 5.1); iterations and the two queries compose
sequentially (Thm 4.1, adaptively): T iterations at ε/T each, split ``size_share`` / 1 − share.
The sensitivity is computed from the policy's edges for the current centres (``"exact"``): a
move u → v inside cluster j changes the sums by ‖p_v − p_u‖₁; a move from cluster a to cluster
b changes the sizes by 2 and the sums by ‖p_u − μ_a‖₁ + ‖p_v − μ_b‖₁, because the released sums
are centred, Σ_{c ∈ j} x_c (p_c − μ_j) (with ⊥: adding or removing a record at u changes them by
1 and ‖p_u − μ_a‖₁). He et al. (Lemma 6.1) give the sums sensitivity 2θ under G_{L1,θ}; that is
the change of the *total* sum, and of a move inside one cluster, but a move across a boundary
changes two clusters' raw sums by ‖p_u‖₁ + ‖p_v‖₁ (101 for 50 → 51 in 1-D). ``"paper"``
reproduces that calibration on raw sums, for comparison only: it is not private.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_epsilon, check_histogram, check_int, check_real
from .noise import NUMPY_LAPLACE, RNGLike, add_laplace, check_rng
from .policies import Policy
from .secure import SecureRandom

__all__ = [
    "SENSITIVITIES", "KMeansResult", "blowfish_kmeans", "check_variant", "cluster_statistics", "initial_centres", "lloyd",
    "objective", "step_sensitivity",
]

#: How the per-iteration sensitivity is set: from the policy's edges, or as He et al. §6 state it.
SENSITIVITIES = ("exact", "paper")


def _points(shape: tuple[int, ...]) -> np.ndarray:
    """Coordinates of every cell, (K, d), row-major."""
    return np.stack(np.unravel_index(np.arange(int(np.prod(shape))), shape), axis=1).astype(np.float64)


def assign(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (L2; ties to the lowest index) for every point."""
    d2 = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d2, axis=1)


def objective(x: np.ndarray, points: np.ndarray, centres: np.ndarray) -> float:
    """Σ_c x_c min_j ‖p_c − μ_j‖₂² (He et al. Eq. 10)."""
    d2 = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2).min(axis=1)
    return float(x @ d2)


def cluster_statistics(x: np.ndarray, points: np.ndarray, centres: np.ndarray, centred: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Sizes n_j and sums Σ_{c ∈ j} x_c (p_c − μ_j) (raw Σ x_c p_c with ``centred=False``)."""
    labels = assign(points, centres)
    k = centres.shape[0]
    sizes = np.bincount(labels, weights=x, minlength=k)
    offsets = points - centres[labels] if centred else points
    sums = np.stack([np.bincount(labels, weights=x * offsets[:, i], minlength=k) for i in range(points.shape[1])], axis=1)
    return sizes, sums


def _clique_sensitivity(cells: np.ndarray, labels: np.ndarray, dist: np.ndarray, points: np.ndarray) -> tuple[float, float]:
    """Largest size and sum change over all pairs of ``cells``: across clusters a ≠ b the two
    largest distances to the own centre, inside a cluster its L1 diameter."""
    lab = labels[cells]
    size, best = 0.0, 0.0
    reach = np.full(labels.max() + 1, -np.inf)
    np.maximum.at(reach, lab, dist[cells])
    present = np.isfinite(reach)
    if present.sum() >= 2:
        top = np.sort(reach[present])[-2:]
        size, best = 2.0, float(top.sum())
    d = points.shape[1]
    for signs in np.array(np.meshgrid(*[[1.0, -1.0]] * d)).reshape(d, -1).T:
        proj = points[cells] @ signs
        hi = np.full(reach.size, -np.inf)
        lo = np.full(reach.size, np.inf)
        np.maximum.at(hi, lab, proj)
        np.minimum.at(lo, lab, proj)
        best = max(best, float((hi - lo)[present].max()))
    return size, best


def step_sensitivity(policy: Policy, centres: np.ndarray, how: str = "exact") -> tuple[float, float]:
    """L1 sensitivities (sizes, sums) of one iteration under ``policy`` for the public ``centres``
    (see the module docstring); ``"paper"`` gives He et al.'s (2, 2θ), θ the longest edge in L1."""
    if how not in SENSITIVITIES:
        raise ValueError(f"how must be one of {SENSITIVITIES}, got {how!r}")
    points = _points(policy.shape)
    labels = assign(points, centres)
    dist = np.abs(points - centres[labels]).sum(axis=1)
    size, total = 0.0, 0.0
    longest = 0.0
    for clique in policy.cliques():
        s, t = _clique_sensitivity(clique, labels, dist, points)
        size, total = max(size, s), max(total, t)
        cells = points[clique]
        longest = max(longest, float((cells.max(axis=0) - cells.min(axis=0)).sum()))
    for u, v in policy.edge_pairs():
        bottom = v == policy.size
        if bottom.any():
            size = max(size, 1.0)
            total = max(total, float(dist[u[bottom]].max()))
        u, v = u[~bottom], v[~bottom]
        if u.size == 0:
            continue
        step = np.abs(points[v] - points[u]).sum(axis=1)
        longest = max(longest, float(step.max()))
        cross = labels[u] != labels[v]
        if cross.any():
            size = max(size, 2.0)
        change = np.where(cross, dist[u] + dist[v], step)
        total = max(total, float(change.max()))
    if how == "paper":
        return 2.0, 2.0 * longest
    return size, total


@dataclass(frozen=True)
class KMeansResult:
    """Final centres, the objective after every iteration, the (size, sum) sensitivities used, and
    the noise samplers drawn from: ``secure`` is True only when every draw went through a hardened
    sampler (``rng=None``: exact discrete Laplace for the cluster sizes, lattice Laplace for the
    sums), False with a numpy Generator or seed (floating-point Laplace) and for the baseline.

    Only ``centres`` (and the public ``sensitivities``) are the private release. ``objectives`` are
    computed from the true histogram, without noise, to evaluate the run: given the centres each
    one is an exact linear query of x, so publishing them is not private."""

    centres: np.ndarray
    objectives: tuple[float, ...]
    sensitivities: tuple[tuple[float, float], ...]
    sampler: str = "none"
    secure: bool = False

    @property
    def objective(self) -> float:
        return self.objectives[-1]


def initial_centres(shape: tuple[int, ...], k: int, rng: RNGLike = None) -> np.ndarray:
    """k data-independent (public) starting centres drawn uniformly in the domain's box, (k, d)."""
    gen = check_rng(rng)
    return gen.uniform(0, 1, size=(k, len(shape))) * (np.array(shape, dtype=np.float64) - 1)


def check_variant(sensitivity: str = "exact", size_share: float = 0.5) -> tuple[str, float]:
    """Validate the options of :func:`blowfish_kmeans` that choose its variant."""
    if sensitivity not in SENSITIVITIES:
        raise ValueError(f"sensitivity must be one of {SENSITIVITIES}, got {sensitivity!r}")
    return sensitivity, check_real(size_share, "size_share", 0, 1, exclusive=True)


def lloyd(x: ArrayLike, shape: Sequence[int], k: int = 4, iterations: int = 10, rng: RNGLike = None,
          centres: ArrayLike | None = None) -> KMeansResult:
    """Non-private Lloyd iterations on the histogram from the same kind of start (the baseline)."""
    shape = tuple(shape)
    x = check_histogram(x, shape).astype(np.float64)
    gen = check_rng(rng)
    mu = initial_centres(shape, k, gen) if centres is None else np.array(centres, dtype=np.float64)
    points = _points(shape)
    history = []
    for _ in range(iterations):
        sizes, sums = cluster_statistics(x, points, mu, centred=False)
        full = sizes > 0
        mu = np.where(full[:, None], sums / np.maximum(sizes, 1)[:, None], mu)
        history.append(objective(x, points, mu))
    return KMeansResult(mu, tuple(history), ())


def blowfish_kmeans(
    x: ArrayLike, policy: Policy, epsilon: float, k: int = 4, iterations: int = 10, rng: RNGLike = None, *,
    sensitivity: str = "exact", size_share: float = 0.5, centres: ArrayLike | None = None,
) -> KMeansResult:
    """SuLQ k-means, (ε, policy)-Blowfish private with ``sensitivity="exact"`` (module docstring).

    Parameters
    ----------
    x : histogram over ``policy.shape`` (1-D or 2-D)
    policy : e.g. ``policies.grid(shape, θ)`` (G_{L1,θ}), ``threshold(k, θ)``, ``complete`` (DP)
    epsilon : total budget, ε/T per iteration, split ``size_share`` : 1 − share between sizes and sums
    k, iterations : clusters and iterations
    sensitivity : ``"exact"`` (private) or ``"paper"`` (He et al.'s 2θ on raw sums: not private,
        for comparison)
    centres : starting centres (public); default k uniform draws in the domain's box
    """
    sensitivity, size_share = check_variant(sensitivity, size_share)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
    if policy.ndim > 2:
        raise ValueError(f"k-means runs on 1-D or 2-D domains, got the {policy.ndim}-D shape {policy.shape}")
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=1)
    iterations = check_int(iterations, "iterations", minimum=1)
    x = check_histogram(x, policy.shape).astype(np.float64)
    gen = check_rng(rng)
    mu = initial_centres(policy.shape, k, gen) if centres is None else np.array(centres, dtype=np.float64)
    tally = gen.tally() if isinstance(gen, SecureRandom) else None  # the starting centres are public, not noise
    if mu.shape != (k, policy.ndim):
        raise ValueError(f"centres must have shape ({k}, {policy.ndim}), got {mu.shape}")
    points = _points(policy.shape)
    upper = np.array(policy.shape, dtype=np.float64) - 1
    eps_size, eps_sum = epsilon / iterations * size_share, epsilon / iterations * (1 - size_share)
    centred = sensitivity == "exact"
    history, used = [], []
    for _ in range(iterations):
        d_size, d_sum = step_sensitivity(policy, mu, sensitivity)
        sizes, sums = cluster_statistics(x, points, mu, centred)
        # sizes count records (integers for every x); the sums are real: lattice Laplace when secure
        noisy_sizes = add_laplace(sizes, d_size / eps_size, gen, sensitivity=d_size, integer=True)
        noisy_sums = add_laplace(sums.reshape(-1), d_sum / eps_sum, gen, sensitivity=d_sum, integer=False).reshape(sums.shape)
        means = noisy_sums / np.maximum(noisy_sizes, 1.0)[:, None]
        moved = (mu + means) if centred else means
        mu = np.clip(np.where((noisy_sizes >= 1.0)[:, None], moved, mu), 0, upper)
        history.append(objective(x, points, mu))
        used.append((d_size, d_sum))
    sampler, secure = gen.summary(tally) if tally is not None else (NUMPY_LAPLACE, False)
    return KMeansResult(mu, tuple(history), tuple(used), sampler, secure)
