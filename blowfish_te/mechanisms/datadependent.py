"""Data-dependent mechanisms: DAWA, MWEM and AHP (SPEC §6).

Each is ε-DP for unit changes of the vector it runs on (one unit added to or removed from one
coordinate), so :func:`blowfish_te.answer` can run it on x_G of a tree transform for
(ε, G)-Blowfish privacy (SPEC §4). On a policy with cycles it needs an explicit spanning tree.
None of them reads a total from the data without paying for it.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_real
from ..noise import add_laplace
from ..partitions import dawa_partition
from ..workloads import BucketWorkload
from .base import Mechanism, integer_entries
from .hierarchical import GreedyH


def _share(value, name: str) -> float:
    return check_real(value, name, 0, 1, exclusive=True)


class DAWA(Mechanism):
    """DAWA (Li, Hay, Miklau, Wang, PVLDB 2014): private partition into intervals, GreedyH on the
    bucket totals for the reduced workload, uniform expansion.

    Privacy: the partition (:func:`blowfish_te.partitions.dawa_partition`) is ε₁-DP for unit
    changes, ε₁ = ``ratio``·ε; a unit change moves one bucket total by one, so GreedyH on the bucket
    totals at ε₂ = ε - ε₁ is ε₂-DP; sequential composition gives ε. Data-dependent: no analytic error.
    ``exact=True`` uses the exact O(K²)-interval partition (K <= 1024).
    """

    name = "dawa"

    def __init__(self, ratio: float = 0.25, exact: bool = False, branching: int = 2):
        self.ratio = _share(ratio, "ratio")
        self.exact = bool(exact)
        self.branching = check_int(branching, "branching", minimum=2)

    def run(self, workload, x, epsilon, rng=None):
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        eps1 = self.ratio * epsilon
        labels = dawa_partition(x, eps1, epsilon - eps1, gen, exact=self.exact)
        reduced = BucketWorkload(workload, labels)
        totals = np.bincount(labels, weights=x).astype(np.int64)
        return GreedyH(self.branching).run(reduced, totals, epsilon - eps1, gen)

    def __repr__(self) -> str:
        return f"DAWA(ratio={self.ratio}, exact={self.exact}, branching={self.branching})"


class MWEM(Mechanism):
    """MWEM (Hardt, Ligett, McSherry 2012) over the workload's own queries.

    Each of T rounds picks the worst-answered query by the exponential mechanism (score
    |q·x - q·x̂|, sensitivity max|q_i|) at ε_sel, measures it with Laplace(max|q_i|/ε_meas), and runs
    ``updates`` passes of multiplicative weights over all measurements. The total n scales the
    weights: pass it as ``total`` only if it is public; otherwise ``total_share``·ε buys a noisy
    total. Privacy: sequential composition of 2T + 1 ε-DP steps (unit changes) summing to ε.

    Sampling: with ``rng=None`` the noisy total (an integer, sensitivity 1) and the measurements
    (sensitivity max|q_i|; exact discrete Laplace for integer workloads, lattice Laplace otherwise)
    are hardened, but the exponential mechanism draws Gumbel noise in floating point
    (``Generator.gumbel``), which is not hardened against floating-point attacks: MWEM's releases
    are therefore never ``secure``, and their sampler names the Gumbel draw.
    """

    name = "mwem"

    def __init__(self, rounds: int = 10, ratio: float = 0.5, updates: int = 100, total: float | None = None,
                 total_share: float = 0.1):
        self.rounds = check_int(rounds, "rounds", minimum=1)
        self.ratio = _share(ratio, "ratio")
        self.updates = check_int(updates, "updates", minimum=1)
        self.total = None if total is None else check_real(total, "total (the public record count)", 0, exclusive=True)
        self.total_share = _share(total_share, "total_share")

    def run(self, workload, x, epsilon, rng=None):
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        k, m = workload.size, workload.num_queries
        if self.total is None:
            eps_total = self.total_share * epsilon
            noisy_total = add_laplace(np.array([float(x.sum())]), 1.0 / eps_total, gen, sensitivity=1.0, integer=True)
            total = max(1.0, noisy_total[0])
            epsilon -= eps_total
        else:
            total = float(self.total)
        rounds = min(self.rounds, m)
        eps_select = self.ratio * epsilon / rounds
        eps_measure = (1 - self.ratio) * epsilon / rounds
        delta = workload.max_abs_entry()  # L1 sensitivity of each query under unit changes
        integer = integer_entries(workload)  # then every q·x is an integer
        truth = np.asarray(workload.matvec(x), dtype=np.float64)
        log_weights = np.zeros(k)  # estimate = total · softmax(log_weights): no overflow
        estimate = np.full(k, total / k)
        chosen = np.zeros(m, dtype=bool)
        rows, measured = [], []
        for _ in range(rounds):
            score = np.abs(truth - workload.matvec(estimate))
            # exponential mechanism by the Gumbel-max trick: floating point, not hardened (see above)
            utility = eps_select * score / (2 * delta) + gen.gumbel(size=m)
            utility[chosen] = -np.inf
            q = int(np.argmax(utility))
            chosen[q] = True
            unit = np.zeros(m)
            unit[q] = 1.0
            rows.append(np.asarray(workload.rmatvec(unit), dtype=np.float64))
            noisy = add_laplace(truth[q : q + 1], delta / eps_measure, gen, sensitivity=delta, integer=integer)
            measured.append(noisy[0])
            for _ in range(self.updates):
                for row, value in zip(rows, measured):
                    log_weights += row * (value - row @ estimate) / (2 * total)
                    log_weights -= log_weights.max()
                    weights = np.exp(log_weights)
                    estimate = total * weights / weights.sum()
        return np.asarray(workload.matvec(estimate), dtype=np.float64)

    def __repr__(self) -> str:
        return f"MWEM(rounds={self.rounds}, ratio={self.ratio}, updates={self.updates}, total={self.total})"


class AHP(Mechanism):
    """AHP (Zhang, Chen, Xu, Meng, Xie, SDM 2014): noisy counts, thresholding, sort, cluster, re-measure.

    ε₁ = ``ratio``·ε buys x̃ = x + Lap(1/ε₁); counts at most η·ln(K)/ε₁ become 0; the sorted noisy
    counts are clustered greedily (DPBench's rule: extend a cluster while its squared error plus
    2/(ε₂²·size) grows less than closing it and starting the best cluster at the next value); each
    cluster's true total is measured once with Lap(1/ε₂) and spread evenly. Privacy: clustering is
    post-processing of x̃; clusters are disjoint, so their measurements compose in parallel (ε₂);
    ε₁ + ε₂ = ε. Both draws are on integers (counts, cluster totals; sensitivity 1), so with
    ``rng=None`` they are exact discrete Laplace and releases are hardened.
    """

    name = "ahp"

    def __init__(self, ratio: float = 0.85, eta: float = 0.35):
        self.ratio = _share(ratio, "ratio")
        self.eta = check_real(eta, "eta", minimum=0)

    def run(self, workload, x, epsilon, rng=None):
        workload, x, epsilon, gen = self._checked(workload, x, epsilon, rng)
        k = workload.size
        eps1 = self.ratio * epsilon
        eps2 = epsilon - eps1
        noisy = add_laplace(x, 1.0 / eps1, gen, sensitivity=1.0, integer=True)  # the threshold is post-processing
        noisy[noisy <= self.eta * np.log(max(k, 2)) / eps1] = 0.0
        order = np.argsort(noisy, kind="stable")
        labels = np.empty(k, dtype=np.int64)
        labels[order] = _greedy_clusters(noisy[order], eps2)
        # disjoint clusters fixed by x̃: a unit change moves one total by 1
        totals = add_laplace(np.bincount(labels, weights=x), 1.0 / eps2, gen, sensitivity=1.0, integer=True)
        estimate = totals[labels] / np.bincount(labels)[labels]
        return np.asarray(workload.matvec(estimate), dtype=np.float64)

    def __repr__(self) -> str:
        return f"AHP(ratio={self.ratio}, eta={self.eta})"


def _greedy_clusters(values: np.ndarray, epsilon: float, window: int = 4096) -> np.ndarray:
    """Cluster labels for sorted ``values`` by AHP's greedy rule (see :class:`AHP`).

    err(i..j) = squared error of the values around their mean + 2/(ε² (j-i+1)); the best cluster
    starting at j, err*(j), is searched over at most ``window`` following values.
    """
    n = values.size
    cum = np.concatenate([[0.0], np.cumsum(values)])
    cum2 = np.concatenate([[0.0], np.cumsum(values**2)])
    noise = 2.0 / epsilon**2

    def err(i: int, j: int) -> float:  # values[i..j], inclusive
        length = j - i + 1
        s = cum[j + 1] - cum[i]
        return cum2[j + 1] - cum2[i] - s * s / length + noise / length

    def best_start(j: int) -> float:
        ends = np.arange(j, min(n, j + window))
        length = ends - j + 1
        mean = (cum[ends + 1] - cum[j]) / length
        return float(np.min((values[j] - mean) ** 2 + noise / length**2))

    labels = np.zeros(n, dtype=np.int64)
    start, label = 0, 0
    for j in range(1, n):
        if err(start, j) >= err(start, j - 1) + best_start(j):
            label += 1
            start = j
        labels[j] = label
    return labels
