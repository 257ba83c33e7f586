"""Datasets. For now: a built-in synthetic histogram, so that examples, the demo and the tests run
without external data."""

from __future__ import annotations

import numpy as np

from ._validation import check_int
from .noise import RNGLike, check_rng

__all__ = ["synthetic"]


def synthetic(k: int = 100, n: int = 10_000, rng: RNGLike = 0) -> np.ndarray:
    """A smooth two-peaked histogram of ``n`` records over ``k`` ordered cells (e.g. ages 0..k-1).

    Records are drawn i.i.d. from a fixed shape — 60% around 0.35 k, 40% around 0.7 k, with a 5%
    uniform floor — so the same ``rng`` seed gives the same histogram.
    """
    k = check_int(k, "k", minimum=1)
    n = check_int(n, "n", minimum=0)
    cells = np.arange(k) + 0.5
    shape = (
        0.6 * np.exp(-0.5 * ((cells - 0.35 * k) / (0.12 * k)) ** 2)
        + 0.4 * np.exp(-0.5 * ((cells - 0.7 * k) / (0.08 * k)) ** 2)
    )
    p = 0.95 * shape / shape.sum() + 0.05 / k
    return check_rng(rng).multinomial(n, p / p.sum()).astype(np.int64)
