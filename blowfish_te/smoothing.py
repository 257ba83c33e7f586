"""Structure read from a noisy release: neighbouring cells whose noisy counts agree are merged and
averaged (NoiseFirst: Xu, Zhang, Xiao, Yang, Yu, VLDB J. 2013). It reads only the released vector
and the noise's public covariance, so it is post-processing and spends no budget.

The release is y = x + z over an ordered domain with zero-mean noise z of known covariance Σ.
For a bucket b of n consecutive cells replaced by the mean of its noisy counts, the expected
squared error is bias(b) + 1ᵀΣ_b1/n, with bias(b) = Σ_{i∈b} (x_i - mean_b x)², and the noisy
within-bucket sum of squares SS_b(y) has expectation bias(b) + tr Σ_b - 1ᵀΣ_b1/n. So

    risk(b) = SS_b(y) - κ (tr Σ_b - 1ᵀΣ_b1/n) + 1ᵀΣ_b1/n

estimates the bucket's error (unbiased for κ = 1; single cells score their own variance). The
segmentation minimises Σ_b risk(b) + σ²·D·(a + b·ln(K/D)) over tilings by buckets of dyadic length
at any start and by *end buckets* [0, b) or [a, K) that reach past the middle of the domain
(length ≥ ⌈K/2⌉), D the number of buckets and σ² the mean cell variance: the penalty of Birgé and
Massart (JEMS 2001) for choosing among many segmentations, found along a path of per-bucket
prices.

End buckets let a structure at an end of the domain (a spike at value 0, common in real data)
stand alone beside one bucket for the rest, where dyadic buckets need one per bit of K - 1 and
every short one keeps most of its cells' noise. They stop at the middle because two of them could
otherwise sandwich any single cell: three buckets would isolate the largest of K Laplace draws,
whose square (≈ (ln K)²·σ²/2) beats the Gaussian-calibrated penalty. As it is, isolating an
interior cell still takes a dyadic tiling on one side. Measured on the DPBench 1-D shapes at
10³, 10⁵ and 10⁷ records, ε ∈ {0.01, 0.1} (Laplace counts, 20 seeds): 0.04–0.42 times the error
of dyadic buckets alone on ADULT, INCOME, MEDCOST and NETTRACE at 10³ records, 0.79–0.94 on
several sets at 10⁵–10⁷, at most 1.06 times elsewhere; a rare seed whose largest draw falls where
few buckets isolate it costs a flat histogram at 10³ records and ε = 0.01 up to 1.6 times over 40
seeds (MSE 1.3 to 2.2, against 21,256 for the counts themselves). End buckets of any length were
4–100 times worse on flat histograms.

Three safeguards come from measurement on DPBench shapes (``benchmarks/datadependent_report.py``):
a minimum over many tilings favours the ones whose noise happens to fit, so merges are credited
only κ = 0.8 of the noise they remove; the estimate is clipped at 0 (counts are non-negative,
so clipping never increases any cell's error); and with independent noise the segmentation reads
every count below -ln(K)·σ/√2 as that value. Counts are non-negative, so such a reading is noise
whatever the cell holds: Laplace noise of scale b = σ/√2 goes below -b·ln K in about half a cell
per release, and a tiling that isolated it paid for the neighbouring buckets its dyadic lengths
forced, which kept their noise and, once the isolated cell was clipped at 0, added it (on flat
DPBench shapes at 10³ records and ε = 0.01, 2 seeds in 40 at 9 times the error of the others).
Only the segmentation reads the floored counts; the buckets average the released ones.

Under path noise the counts' running sums are the release itself (noisy cumulative counts, the
last one the exact record total), and clipping cells at 0 would break them: a large draw d_j
reads as +D at cell j and −D at cell j + 1, the segmentation isolates both (each reading is far
from its neighbours), and clipping the −D alone leaves +D at cell j. So the bucket means are
instead projected onto counts whose running sums are nondecreasing from 0 to the total (isotonic
regression of the running sums, the consistency of Hay, Rastogi, Miklau, Suciu, PVLDB 2010,
applied to the cumulative counts). The true running sums lie in that closed convex set, so the
projection never moves the running sums of the bucket means further from them — prefix queries'
squared error cannot grow — and the pair above pools back to what the cells held. Measured on the
DPBench 1-D shapes under the line policy at 10³, 10⁵ and 10⁷ records, ε ∈ {0.01, 0.1}, 20 seeds,
cells as the workload: 0.42–1.00 times the error of clipping (geometric mean 0.89); HEPTH and
SEARCHLOGS at 10³ records and ε = 0.01 had one seed in 10 at 28–37 times the others' error.

With a noisy record total T of variance τ² beside the release (:func:`smooth`'s ``total``), the
bucket sums S_b (variance n_b·σ² each, independent) are moved to their least-squares estimate
given T: S_b + n_b σ²/(K σ² + τ²)·(T - Σ S). On a long bucket this matters: a bucket of all K
cells carries the noise of K draws, where T carries one (measured on flat DPBench shapes at 10³
records and ε = 0.01 with a total at 0.1·ε: 1.3–1.5 times less error, 1.6–2 times with the floor
above; at 10⁵–10⁷ records no change).

Two noise models cover the releases the library smooths:

- ``independent``: every cell with its own draw (Laplace on the cells, under DP or through the
  exact route), 1ᵀΣ_b1 = n σ²;
- ``path``: the line policy's transform (cell i = g_i - g_{i-1} of noisy cumulative counts g, the
  last one public), whose noise telescopes: the sum over a bucket carries only the noise of its
  two end counts, so a long bucket's mean is nearly exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_int, check_real, check_real_array
from .partitions import _best_tiling

__all__ = ["CellNoise", "segment", "smooth", "nondecreasing", "monotone_running_sums", "consistent_prefix_answers", "CREDIT", "PENALTY_BASE",
           "PENALTY_SLOPE", "MAX_SMOOTHING"]

#: Share of the noise a merge is credited with removing (κ above).
CREDIT = 0.8
#: Birgé–Massart penalty σ²·D·(a + b·ln(K/D)): a and b.
PENALTY_BASE, PENALTY_SLOPE = 1.0, 2.0
#: Per-bucket prices (in units of the mean cell variance) along which the penalised criterion is minimised.
_PATH = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
#: Largest domain smoothed (one dynamic program over K·log2(K) pieces per price of the path).
MAX_SMOOTHING = 2**16


@dataclass(frozen=True)
class CellNoise:
    """The public noise of a released vector of ``size`` cell counts: ``kind`` ``"independent"``
    (one draw of ``variance`` per cell) or ``"path"`` (cell i carries d_i - d_{i-1} for
    independent draws d of ``variance``, d_{-1} = d_{K-1} = 0: the line policy's transform)."""

    kind: str
    variance: float
    size: int

    def __post_init__(self):
        if self.kind not in ("independent", "path"):
            raise ValueError(f"kind must be 'independent' or 'path', got {self.kind!r}")
        check_real(self.variance, "variance", minimum=0)
        check_int(self.size, "size", minimum=1)

    def cell_variances(self) -> np.ndarray:
        """The variance of every cell's noise."""
        if self.kind == "independent":
            return np.full(self.size, float(self.variance))
        out = np.full(self.size, 2.0 * self.variance)
        out[0] = out[-1] = self.variance
        if self.size == 1:
            out[0] = 0.0
        return out

    def sum_variances(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """The variance of the noise summed over each bucket [start, stop)."""
        if self.kind == "independent":
            return self.variance * (stops - starts).astype(np.float64)
        return self.variance * ((starts > 0).astype(np.float64) + (stops < self.size))


def segment(y: ArrayLike, noise: CellNoise) -> np.ndarray:
    """Bucket labels (0..D-1, consecutive cells) of the segmentation of the noisy counts ``y``
    described in the module docstring (of equally penalised tilings, the first found along the path of prices)."""
    y = check_real_array(y, "y", ndim=1)
    k = y.size
    if not isinstance(noise, CellNoise) or noise.size != k:
        raise ValueError(f"noise must be a CellNoise for {k} cells")
    if k > MAX_SMOOTHING:
        raise ValueError(f"smoothing handles up to {MAX_SMOOTHING} cells, got {k}")
    unit = float(noise.cell_variances().mean())
    if unit == 0:
        return np.arange(k, dtype=np.int64)
    if noise.kind == "independent":
        y = np.maximum(y, -np.log(k) * np.sqrt(noise.variance / 2.0))
    risk_of = _IntervalRisks(y, noise)
    risks = risk_of.dyadic()
    prefix, suffix = risk_of.ends()
    best = None
    for price in _PATH:
        extra = price * unit
        tiling, _ = _best_tiling({n: r + extra for n, r in risks.items()}, prefix=prefix + extra, suffix=suffix + extra)
        buckets = len(tiling)
        spans = np.array([(start, stop) for _, start, stop in tiling])
        risk = float(risk_of(spans[:, 0], spans[:, 1]).sum())
        criterion = risk + unit * buckets * (PENALTY_BASE + PENALTY_SLOPE * np.log(k / buckets))
        if best is None or criterion < best[0]:
            best = (criterion, tiling)
    labels = np.empty(k, dtype=np.int64)
    for bucket, (_, start, stop) in enumerate(best[1]):
        labels[start:stop] = bucket
    return labels


def smooth(y: ArrayLike, noise: CellNoise, total: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, labels): the mean of ``y`` over each bucket of :func:`segment`, clipped at 0
    under independent noise; under ``path`` noise, whose counts sum exactly to the record total,
    projected instead onto counts whose running sums rise from 0 to that total
    (:func:`monotone_running_sums`). With ``total`` = (T, τ²), a record total released
    independently of ``y`` with noise of variance τ² (0: exact), the bucket sums are first moved to
    their least-squares estimate given T (module docstring; independent noise only: under ``path``
    noise the sum of ``y`` is already exact)."""
    y = check_real_array(y, "y", ndim=1)
    if total is not None:
        if not isinstance(total, tuple) or len(total) != 2:
            raise TypeError(f"total must be a pair (value, variance) or None, got {total!r}")
        total = (check_real(total[0], "total"), check_real(total[1], "total variance", minimum=0))
    labels = segment(y, noise)
    sizes = np.bincount(labels)
    sums = np.bincount(labels, weights=y)
    if total is not None and noise.kind == "independent" and noise.variance * y.size + total[1] > 0:
        sums = sums + sizes * (noise.variance / (noise.variance * y.size + total[1])) * (total[0] - float(sums.sum()))
    means = sums / sizes
    if noise.kind == "path":
        return monotone_running_sums(means[labels]), labels
    return np.maximum(means[labels], 0.0), labels


def nondecreasing(values: np.ndarray, upper: float | None = None) -> np.ndarray:
    """The L2-nearest nondecreasing sequence within [0, ``upper``] (no upper bound when None) to
    ``values``: isotonic regression (pool adjacent violators), clipped — with the same bounds on
    every coordinate, the box-bounded isotonic regression is the unbounded one clipped."""
    from scipy.optimize import isotonic_regression  # scipy.optimize is slow to import; loaded on first use

    return np.clip(isotonic_regression(values).x, 0.0, np.inf if upper is None else max(float(upper), 0.0))


def monotone_running_sums(cells: ArrayLike) -> np.ndarray:
    """Cells whose running sums are the L2-nearest nondecreasing sequence from 0 up to T = Σ
    ``cells`` (kept exactly: under path noise it is the public record total) to the running sums of
    ``cells``: :func:`nondecreasing` of the first K - 1 running sums within [0, T]. Counts are
    non-negative exactly when their running sums are nondecreasing, so the projection is onto a
    closed convex set holding the true running sums and never moves them further away (module
    docstring)."""
    cells = check_real_array(cells, "cells", ndim=1)
    if cells.size == 0:
        raise ValueError("cells must hold at least one count, got an empty array")
    total = float(cells.sum())
    if cells.size == 1:
        return np.array([total])
    return np.diff(np.concatenate([[0.0], nondecreasing(np.cumsum(cells)[:-1], total), [total]]))


def consistent_prefix_answers(bounds: tuple[np.ndarray, np.ndarray] | None, answers: ArrayLike,
                              total: float | None = None) -> np.ndarray:
    """``answers`` to queries of cell bounds ``bounds`` ((lo, hi), each (m, d): a workload's
    :meth:`~blowfish_te.workloads.Workload.query_bounds`) made consistent when every query is a
    prefix of a 1-D domain (lo = 0): taken in the order of their ends, :func:`nondecreasing`
    from 0 (up to ``total``, a public record total, when given). The true prefix sums lie in that
    closed convex set, so the projection never moves the answers further from them (module
    docstring); any other workload's answers are returned as they are."""
    answers = check_real_array(answers, "answers", ndim=1)
    if bounds is None or bounds[0].shape[1] != 1 or np.any(bounds[0] != 0) or answers.size != bounds[0].shape[0]:
        return answers
    order = np.argsort(bounds[1][:, 0], kind="stable")
    out = np.empty_like(answers)
    out[order] = nondecreasing(answers[order], total)
    return out


class _IntervalRisks:
    """risk([a, b)) of the module docstring for arrays of starts and stops, O(1) each from cumulative sums."""

    def __init__(self, y: np.ndarray, noise: CellNoise):
        self.noise = noise
        self.size = y.size
        self.first = np.concatenate([[0.0], np.cumsum(y)])
        self.second = np.concatenate([[0.0], np.cumsum(y * y)])
        self.trace = np.concatenate([[0.0], np.cumsum(noise.cell_variances())])

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = (b - a).astype(np.float64)
        mean_noise = self.noise.sum_variances(a, b) / n
        spread = self.second[b] - self.second[a] - (self.first[b] - self.first[a]) ** 2 / n
        return spread - CREDIT * (self.trace[b] - self.trace[a] - mean_noise) + mean_noise

    def dyadic(self) -> dict[int, np.ndarray]:
        """{n: risk of the bucket [a, a + n) for every start a} for dyadic n."""
        k = self.size
        return {n: self(np.arange(k - n + 1), np.arange(n, k + 1)) for n in (1 << j for j in range(k.bit_length()))}

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(risk of [0, stop) at index stop - 1, risk of [start, K) at index start), infinite for
        end buckets shorter than ⌈K/2⌉."""
        k = self.size
        half = (k + 1) // 2
        prefix = np.full(k, np.inf)
        suffix = np.full(k, np.inf)
        stops = np.arange(half, k + 1)
        prefix[stops - 1] = self(np.zeros(stops.size, dtype=np.int64), stops)
        starts = np.arange(k - half + 1)
        suffix[starts] = self(starts, np.full(starts.size, k))
        return prefix, suffix
