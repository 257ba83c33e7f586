"""Error metrics (per-query MSE; DPBench, Hay et al., SIGMOD 2016: scaled L2 error)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["per_query_mse", "scaled_l2_error"]


def _residual(truth, estimate) -> np.ndarray:
    truth, estimate = np.asarray(truth, dtype=np.float64), np.asarray(estimate, dtype=np.float64)
    if truth.shape != estimate.shape or truth.ndim != 1 or truth.size == 0:
        raise ValueError(f"truth and estimate must be non-empty vectors of one shape, got {truth.shape} and {estimate.shape}")
    return truth - estimate


def per_query_mse(truth: ArrayLike, estimate: ArrayLike) -> float:
    """‖W x − ŷ‖² / m: the mean squared error per query."""
    r = _residual(truth, estimate)
    return float(r @ r / r.size)


def scaled_l2_error(truth: ArrayLike, estimate: ArrayLike, scale: float) -> float:
    """DPBench's scaled L2 error ‖W x − ŷ‖₂ / (m · s) (Hay et al. 2016): divided by the number of
    queries m, not its square root, so it is not an RMSE; s is the number of records."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0 (the number of records), got {scale!r}")
    r = _residual(truth, estimate)
    return float(np.linalg.norm(r) / (r.size * scale))
