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
at any start, D the number of buckets and σ² the mean cell variance: the penalty of Birgé and
Massart (JEMS 2001) for choosing among many segmentations, found along a path of per-bucket
prices. Two safeguards come from measurement on DPBench shapes (``benchmarks/datadependent_report.py``):
a minimum over many tilings favours the ones whose noise happens to fit, so merges are credited
only κ = 0.8 of the noise they remove; and the estimate is clipped at 0 (counts are non-negative,
so clipping never increases any cell's error).

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

from ._validation import check_int, check_real, check_real_array
from .partitions import _best_tiling

__all__ = ["CellNoise", "segment", "smooth", "CREDIT", "PENALTY_BASE", "PENALTY_SLOPE", "MAX_SMOOTHING"]

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


def segment(y, noise: CellNoise) -> np.ndarray:
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
    risks = _bucket_risks(y, noise)
    best = None
    for price in _PATH:
        tiling, _ = _best_tiling({n: r + price * unit for n, r in risks.items()})
        buckets = len(tiling)
        risk = sum(risks[stop - start][start] for _, start, stop in tiling)
        criterion = risk + unit * buckets * (PENALTY_BASE + PENALTY_SLOPE * np.log(k / buckets))
        if best is None or criterion < best[0]:
            best = (criterion, tiling)
    labels = np.empty(k, dtype=np.int64)
    for bucket, (_, start, stop) in enumerate(best[1]):
        labels[start:stop] = bucket
    return labels


def smooth(y, noise: CellNoise) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, labels): the mean of ``y`` over each bucket of :func:`segment`, clipped at 0."""
    y = check_real_array(y, "y", ndim=1)
    labels = segment(y, noise)
    means = np.bincount(labels, weights=y) / np.bincount(labels)
    return np.maximum(means[labels], 0.0), labels


def _bucket_risks(y: np.ndarray, noise: CellNoise) -> dict[int, np.ndarray]:
    """{n: risk of the bucket [a, a + n) for every start a} for dyadic n (module docstring)."""
    k = y.size
    first = np.concatenate([[0.0], np.cumsum(y)])
    second = np.concatenate([[0.0], np.cumsum(y * y)])
    trace = np.concatenate([[0.0], np.cumsum(noise.cell_variances())])
    out = {}
    for j in range(k.bit_length()):
        n = 1 << j
        a = np.arange(k - n + 1)
        b = a + n
        mean_noise = noise.sum_variances(a, b) / n
        spread = second[b] - second[a] - (first[b] - first[a]) ** 2 / n
        out[n] = spread - CREDIT * (trace[b] - trace[a] - mean_noise) + mean_noise
    return out
