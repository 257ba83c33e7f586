"""Hierarchical and wavelet mechanisms: H2, HB, QuadTree, GreedyH and Privelet.

Each is a :class:`~blowfish_te.mechanisms.LinearMechanism`: it measures a strategy A with Laplace
noise of scale Δ/ε, Δ the largest column L1 norm of A (unit changes; applied to x_G of a tree
transform this is (ε, G)-Blowfish) or Δ_G(A) from the policy's edges in the exact route,
then answers W A⁺ y by exact least squares. Their expected total squared error is
2 (Δ/ε)² ‖W A⁺‖_F².
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._grid import ceil_log
from .._validation import check_int
from ..strategies import HaarStrategy, TreeStrategy, greedy_hierarchy, hierarchical
from ..workloads import Workload
from .base import LinearMechanism


def qardaji_branching(n: int) -> int:
    """Branching factor of HB for n cells: the b minimising Qardaji, Yang and Li's (VLDB 2013)
    average range-query variance V(b) = (b - 1) h³ - 2 (b + 1) h² / 3, h = ⌈log_b n⌉ (first minimiser).

    For b >= ⌈√n⌉ the height is 2 (V grows with b) until b = n (height 1), so only those
    candidates are evaluated.
    """
    n = check_int(n, "n", minimum=1)
    if n <= 2:
        return 2
    top = math.isqrt(n - 1) + 1  # smallest b with b² >= n
    best, best_b = math.inf, 2
    for b in list(range(2, top + 1)) + [n]:
        h = ceil_log(n, b)
        value = (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
        if value < best:
            best, best_b = value, b
    return best_b


def qardaji_branching_2d(side: int) -> int:
    """Per-axis branching of 2-D HB: the b minimising b·h², h = ⌈log_b side⌉ (the 2-D variance
    analysis of Qardaji et al., as used by DPBench's HB2D; b = 7 for a 256-cell side)."""
    side = check_int(side, "side", minimum=1)
    if side <= 2:
        return 2
    return min(range(2, side + 1), key=lambda b: (b * ceil_log(side, b) ** 2, b))


@functools.lru_cache(maxsize=16)
def _cached_hierarchical(domain: tuple[int, ...], branching: int, root: bool, weights: tuple | None) -> TreeStrategy:
    return hierarchical(domain, branching, root=root, level_weights=None if weights is None else np.array(weights))


class H2(LinearMechanism):
    """Binary hierarchy with the root and a uniform budget (Hay, Rastogi, Miklau, Suciu 2010).

    Strategy: every node of a binary tree of ranges down to single cells, weight 1; Δ = tree
    height. Reconstruction: exact least squares (constrained inference).
    """

    name = "h2"

    def strategy(self, workload: Workload) -> TreeStrategy:
        return _cached_hierarchical(workload.domain, 2, True, None)


class HB(LinearMechanism):
    """Hierarchy with the branching factor of Qardaji, Yang and Li (VLDB 2013), uniform budget.

    ``branching=None`` takes b from :func:`qardaji_branching` (1-D; b = 16 at 4096 cells) or
    :func:`qardaji_branching_2d` per axis (2-D and higher). ``root=False`` (default) does not
    measure the total, as in Ektelo's HB; ``root=True`` does, as in DPBench's.
    Δ = number of measured levels on the deepest path.
    """

    name = "hb"

    def __init__(self, branching: int | None = None, root: bool = False):
        self.branching = None if branching is None else check_int(branching, "branching", minimum=2)
        self.root = bool(root)

    def branching_for(self, domain: tuple[int, ...]) -> int:
        if self.branching is not None:
            return self.branching
        return qardaji_branching(domain[0]) if len(domain) == 1 else qardaji_branching_2d(max(domain))

    def strategy(self, workload: Workload) -> TreeStrategy:
        root = self.root or workload.size == 1  # a one-cell domain has nothing but the root
        return _cached_hierarchical(workload.domain, self.branching_for(workload.domain), root, None)


class QuadTree(LinearMechanism):
    """Quadtree (Cormode, Procopiuc, Srivastava, Shen, Yu 2012): halve every axis down to single
    cells (4 children in 2-D), the root included.

    ``budget="geometric"`` gives level l (root 0) a weight ∝ 2^{l/3}, Cormode et al.'s geometric
    allocation (more budget near the leaves); ``"uniform"`` gives every level the same. Weights are
    scaled so that the deepest path sums to 1, so Δ = 1.
    """

    name = "quadtree"

    def __init__(self, budget: str = "geometric"):
        if budget not in ("geometric", "uniform"):
            raise ValueError(f"budget must be 'geometric' or 'uniform', got {budget!r}")
        self.budget = budget

    def strategy(self, workload: Workload) -> TreeStrategy:
        height = max(ceil_log(k, 2) for k in workload.domain) + 1
        raw = 2.0 ** (np.arange(height) / 3) if self.budget == "geometric" else np.ones(height)
        return _cached_hierarchical(workload.domain, 2, True, tuple(raw / raw.sum()))


class GreedyH(LinearMechanism):
    """GreedyH (Li, Hay, Miklau, Wang 2014): hierarchy weights chosen greedily for the workload
    (see :func:`blowfish_te.strategies.greedy_hierarchy`); Δ = 1. The weights depend on W only,
    never on the data, so choosing them costs no privacy."""

    name = "greedyh"

    def __init__(self, branching: int = 2, grid: int = 100, rule: str = "dawa"):
        self.branching = check_int(branching, "branching", minimum=2)
        self.grid = check_int(grid, "grid", minimum=2)
        if rule not in ("dawa", "exact"):
            raise ValueError(f"rule must be 'dawa' or 'exact', got {rule!r}")
        self.rule = rule

    def strategy(self, workload: Workload) -> TreeStrategy:
        return self._cache("strategy").get(workload, lambda: greedy_hierarchy(workload, self.branching, self.grid, self.rule))


@functools.lru_cache(maxsize=16)
def _cached_haar(domain: tuple[int, ...]) -> HaarStrategy:
    return HaarStrategy(domain)


class Privelet(LinearMechanism):
    """Privelet (Xiao, Wang, Gehrke 2010): Haar wavelet coefficients with uniform Laplace noise
    of scale ∏(m_i + 1)/ε (its generalised sensitivity), inverted exactly; the Kronecker
    (standard) decomposition in more than one dimension."""

    name = "privelet"

    def strategy(self, workload: Workload) -> HaarStrategy:
        return _cached_haar(workload.domain)
