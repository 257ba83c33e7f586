"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a private hierarchical decomposition whose split
decisions cost a constant amount of ε, however deep the tree grows, on a domain of any dimension
(1-D intervals halved, 2-D quadrants, d-D orthants)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._validation import check_real
from ..noise import RandomSource
from ..policies import Policy
from ..routes import Outcome
from ..selection import Decision, ErrorModel, decide, error_model, measure
from ..workloads import Boxes, BucketWorkload, Workload
from ..workloads.boxes import coverage
from .base import LinearMechanism, Mechanism
from .consistency import consistent
from .plain import STAGE_TWO, aggregation_gain, lowest_error, plain_strategy, workload_class
from .spatial import hilbert_order


def privtree_scales(epsilon: float, fanout: int) -> tuple[float, float]:
    """(λ, δ) for a tree stage that is ε-DP: λ = (2β - 1) / ((β - 1) ε), δ = λ ln β, β the fanout
    (PrivTree, Theorem 1)."""
    lam = (2 * fanout - 1) / ((fanout - 1) * epsilon)
    return lam, lam * math.log(fanout)


def _split(biased: np.ndarray, scale: float, threshold: float, gen) -> np.ndarray:
    """The split decisions: biased count + Laplace(scale) > threshold, one draw per node."""
    return biased + gen.laplace(0.0, scale, biased.size) > threshold


def _halve(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Children of boxes: every side longer than one cell cut at its middle."""
    for axis in range(lo.shape[1]):
        length = hi[:, axis] - lo[:, axis]
        cut = length > 1
        mid = lo[:, axis] + length // 2
        copies = 1 + cut
        first = np.cumsum(copies) - copies
        lo, hi = np.repeat(lo, copies, axis=0), np.repeat(hi, copies, axis=0)
        hi[first[cut], axis] = mid[cut]
        lo[first[cut] + 1, axis] = mid[cut]
    return lo, hi


def box_deviations(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """dev(v) = min_c Σ_{i∈v} |x_i - c| = Σ |x_i - median| of every box v = [lo, hi) of the grid
    ``x``: DAWA's deviation (Li, Hay, Miklau, Wang, PVLDB 2014, with the median), the L1 error of
    spreading the box's total evenly. O(cells covered), boxes of one shape at a time."""
    out = np.empty(lo.shape[0])
    sizes = hi - lo
    shapes, group = np.unique(sizes, axis=0, return_inverse=True)
    group = group.reshape(-1)
    flat = x.reshape(-1)
    for g, size in enumerate(shapes):
        rows = np.flatnonzero(group == g)
        offsets = np.indices(tuple(size)).reshape(len(size), -1)
        coords = lo[rows][:, :, None] + offsets[None]  # (boxes, axes, cells of a box)
        values = flat[np.ravel_multi_index(tuple(coords.transpose(1, 0, 2)), x.shape)]
        out[rows] = np.abs(values - np.median(values, axis=1, keepdims=True)).sum(axis=1)
    return out


#: What a PrivTree node's split decision reads: its record count (PrivTree) or its deviation
#: (:func:`box_deviations`: split where the data are uneven, not merely dense).
SCORES = ("count", "deviation")


def privtree_leaves(x: np.ndarray, epsilon: float, gen: RandomSource, threshold: float = 0.0,
                    score: str = "count") -> tuple[np.ndarray, np.ndarray]:
    """The leaves (lo, hi), boxes [lo, hi) of the grid ``x`` (any number of axes), of PrivTree's
    decomposition, which is ε-DP for unit changes of x ≥ 0.

    Breadth first from the whole grid: a node v at depth d(v) with score c(v) — its count, or with
    ``score="deviation"`` its deviation :func:`box_deviations` — has biased score
    b(v) = max(c(v) - d(v) δ, θ - δ) and splits when b(v) + Laplace(λ) > θ (cells never split),
    with (λ, δ) from :func:`privtree_scales` for the fanout 2^axes.

    PrivTree's proof (Theorem 1) reads two properties of the score, both held by the deviation
    (docs/theory.md, "PrivTree over deviations"): a unit change moves it by at most 1 on the
    nodes holding the changed cell and not elsewhere (dev moves by at most 1), and it never grows
    down a path (a child's deviation is at most its parent's: the parent's minimum over c sums
    more terms).
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES} (what a node's split decision reads), got {score!r}")
    fanout = 2**x.ndim
    scale, bias = privtree_scales(epsilon, fanout)
    lo = np.zeros((1, x.ndim), dtype=np.int64)
    hi = np.array([x.shape], dtype=np.int64)
    leaves_lo, leaves_hi, depth = [], [], 0
    while lo.shape[0]:
        splittable = np.flatnonzero((hi - lo > 1).any(axis=1))
        if not splittable.size:
            counts = np.zeros(0)
        elif score == "count":
            counts = Boxes(x.shape, lo[splittable], hi[splittable] - 1).matvec(x.ravel())
        else:
            counts = box_deviations(x, lo[splittable], hi[splittable])
        biased = np.maximum(counts - depth * bias, threshold - bias)
        grow = np.zeros(lo.shape[0], dtype=bool)
        grow[splittable[_split(biased, scale, threshold, gen)]] = True
        leaves_lo.append(lo[~grow])
        leaves_hi.append(hi[~grow])
        lo, hi = _halve(lo[grow], hi[grow])
        depth += 1
    return np.concatenate(leaves_lo), np.concatenate(leaves_hi)


def tree_labels(x: np.ndarray, epsilon: float, gen: RandomSource, threshold: float = 0.0, score: str = "count") -> np.ndarray:
    """The leaves of :func:`privtree_leaves` as bucket labels of the cells (flat), numbered along
    the grid's curve (:func:`leaf_order`); ε-DP as the leaves are (the rest is post-processing)."""
    lo, hi = privtree_leaves(x, epsilon, gen, threshold=threshold, score=score)
    return leaf_order(x.shape, box_labels(x.shape, lo, hi))


def box_labels(shape: Sequence[int], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Label (row of ``lo``/``hi``) of every cell, flat, for disjoint boxes [lo, hi) covering the
    grid: each cell is covered once, so painting box r with weight r leaves r on its cells."""
    return np.rint(coverage(tuple(shape), lo, hi - 1, np.arange(lo.shape[0], dtype=np.float64))).astype(np.int64)


def leaf_order(shape: Sequence[int], labels: np.ndarray) -> np.ndarray:
    """Labels renumbered so that leaves follow the grid's curve: leaf r becomes the rank of its
    first cell along the Hilbert curve on a 2-D grid, along the flat (row-major) order otherwise.
    Data-independent given the leaves, so a hierarchy over the leaves sees neighbours as
    neighbours."""
    shape = tuple(shape)
    rank = np.arange(labels.size)
    if len(shape) == 2:
        rank[hilbert_order(shape)] = np.arange(labels.size)
    first = np.full(int(labels.max()) + 1, labels.size)
    np.minimum.at(first, labels, rank)
    renumbered = np.empty(first.size, dtype=np.int64)
    renumbered[np.argsort(first, kind="stable")] = np.arange(first.size)
    return renumbered[labels]


class PrivTree(Mechanism):
    """PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a hierarchical decomposition of the domain (1-D
    halving, 2-D quadtree) grown by noisy biased counts (:func:`privtree_leaves`, at ε₁ =
    ``tree_share``·ε, threshold θ = ``threshold``), the leaves' totals measured at ε₂ = ε - ε₁
    and spread evenly over their cells; answers W x̂.

    The leaves' totals are measured by ``estimator``, by default — as DAWA's bucket totals — the
    candidate of :data:`~blowfish_te.mechanisms.plain.STAGE_TWO` (Identity, HB, GreedyH, and an
    optimised p-Identity where its search is predicted to be quick) of lowest
    analytic error on the workload reduced to the leaves, laid out along the grid's curve
    (:func:`leaf_order`). PrivTree's paper measures every leaf with Laplace(1/ε₂) (``estimator``
    = Identity()); on DPBench's 2000 rectangles over 128² the hierarchy over hundreds to
    thousands of leaves answers the large rectangles with 0.6–0.8 times that error
    (``benchmarks/datadependent_report.py``). With ``select`` (the default;
    1-D or a 2-D grid), a small private check first (:func:`blowfish_te.selection.measure`: the
    noisy record total and DAWA's cost of the data, along the Hilbert curve on a grid) and
    PrivTree's fitted error model fall back to the plain release — ``auto``'s choice for the
    workload (:func:`~blowfish_te.mechanisms.plain.plain_strategy`) — where the tree is predicted
    to lose: dense data split to single cells measured at ε₂ = ε/2.

    Privacy (unit changes of x ≥ 0: one record added to or removed from one cell): one change
    moves by one the counts of the nodes on one root-to-leaf path, and counts never grow down a
    path, so the biased counts of the unclamped nodes on it fall by at least δ per level. The
    privacy loss of the split decisions along the path is then a geometric series bounded by
    (1/λ)(1 + 1/(1 - e^{-δ/λ})) = (2β - 1)/((β - 1) λ) = ε₁ (PrivTree, Theorem 1); nodes off the
    path see the same counts. The leaves partition the domain, so a unit change moves one leaf
    total by one, and the estimator's Laplace(Δ/ε₂), Δ its strategy's largest column L1 norm, is
    ε₂-DP; its choice reads only the released leaves, W and ε₂. The check's features are ρε-DP
    (sensitivity 1 each, see its docstring) and the plain release is a Laplace mechanism at the
    rest. Sequential composition gives ε. No record total is read: the mechanism runs on x_G of
    any tree transform too (x_G ≥ 0 counts records below edges). Answers to a 1-D prefix workload
    are then made nondecreasing from 0 (:mod:`~blowfish_te.mechanisms.consistency`:
    post-processing, never further from the truth).

    Sampling: the split decisions compare real numbers with a threshold and draw Laplace noise in
    floating point (``Generator.laplace``), which is not hardened; the leaf totals are measured
    by the estimator's hardened samplers with ``rng=None``. Releases are therefore never ``secure``.
    """

    name = "privtree"
    predicts_error = True

    def __init__(self, tree_share: float = 0.5, threshold: float = 0.0, select: bool = True,
                 estimator: LinearMechanism | None = None):
        self.tree_share = check_real(tree_share, "tree_share", 0, 1, exclusive=True)
        if estimator is not None and not (isinstance(estimator, Mechanism) and estimator.tags.linear):
            raise TypeError(f"estimator must be a LinearMechanism or None, got {type(estimator).__name__}")
        self.estimator = estimator
        self.threshold = check_real(threshold, "threshold")
        if not isinstance(select, (bool, np.bool_)):
            raise TypeError(f"select must be True or False (check privately on a grid whether to partition), got {select!r}")
        self.select = bool(select)

    def model(self, workload: Workload, calibrated: bool = False) -> ErrorModel:
        """PrivTree's fitted error model for ``workload`` (its dimension and workload class;
        ``calibrated``: see :func:`~blowfish_te.selection.error_model`)."""
        gain = self._cache("aggregation gain").get(workload, lambda: aggregation_gain(workload))
        return error_model(self.name, len(workload.domain), workload_class(workload, gain), calibrated=calibrated)

    def check(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource) -> Decision | None:
        """The private check of a release (validated arguments; the first draws from ``gen``):
        :func:`~blowfish_te.selection.measure` (along the Hilbert curve on a grid) and
        :func:`~blowfish_te.selection.decide` with :meth:`model`; None without ``select`` or on
        more than two axes."""
        shape = tuple(workload.domain)
        if not self.select or len(shape) > 2:
            return None
        order = hilbert_order(shape) if len(shape) == 2 else np.arange(x.size)
        return decide(measure(x[order], epsilon, gen), self.model(workload))

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        shape = tuple(workload.domain)
        decision = self.check(workload, x, epsilon, gen)
        if decision is not None:
            epsilon -= decision.spent  # the tree and the leaves keep their shares of the rest
            if decision.route != "partition":
                return consistent(Outcome(np.asarray(plain_strategy(self, workload).run(workload, x, epsilon, gen),
                                                     dtype=np.float64)), workload)
        eps_tree = self.tree_share * epsilon
        labels = tree_labels(x.reshape(shape), eps_tree, gen, self.threshold)
        reduced = BucketWorkload(workload, labels)
        totals = np.bincount(labels, weights=x).astype(np.int64)
        estimator = self.estimator or lowest_error(reduced, STAGE_TWO)
        return consistent(Outcome(np.asarray(estimator.run(reduced, totals, epsilon - eps_tree, gen), dtype=np.float64)), workload)
