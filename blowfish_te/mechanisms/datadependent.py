"""Data-dependent mechanisms: DAWA, MWEM and AHP.

Each is ε-DP for unit changes of the vector it runs on (one unit added to or removed from one
coordinate), so :func:`blowfish_te.answer` can run it on x_G of a tree transform for (ε, G)-Blowfish
privacy (transformational equivalence: Haney, Machanavajjhala, Ding, PVLDB 2015). On a policy with
cycles it needs an explicit spanning tree. None of them reads a total from the data without paying
for it; MWEM models records, so it runs under DP policies only (see :attr:`Mechanism.models_records`).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_int, check_real
from ..noise import RandomSource, add_laplace
from ..partitions import dawa_partition, price_factor
from ..policies import Policy
from ..routes import Outcome
from ..selection import Decision, ErrorModel, Features, decide, error_model, measure, refine_total
from ..smoothing import MAX_SMOOTHING, CellNoise, smooth
from ..workloads import BucketWorkload, Workload
from .base import LinearMechanism, Mechanism, RecordTotal, integer_entries
from .consistency import consistent
from .plain import STAGE_TWO, aggregation_gain, lowest_error, plain_strategy, workload_class
from .spatial import hilbert_order


def _share(value, name: str) -> float:
    return check_real(value, name, 0, 1, exclusive=True)


class DAWA(Mechanism):
    """DAWA (Li, Hay, Miklau, Wang, PVLDB 2014) on an ordered domain or a grid: a private partition
    into buckets whose data are nearly flat, the workload reduced to the bucket totals (W·E, E
    spreading a total evenly over its bucket) answered by a linear strategy, uniform expansion —
    or, when a small private check of the data predicts that a partition would lose, the plain
    release.

    - Partition (``partition``): ``"intervals"``, DAWA's tiling of the cells in order (the default
      in 1-D), or ``"tree"``, a quadtree grown by PrivTree's rule over DAWA's deviation
      (:func:`~blowfish_te.mechanisms.privtree.privtree_leaves` with ``score="deviation"``, the
      default on a grid): along the Hilbert curve the tiling merges heavy cells that sit inside
      empty regions, since isolating one takes several pieces, each with its own guard and noise
      (on DPBench's 2000 rectangles over 128² the tree's error is 0.65 times the tiling's in the
      median of 56 cells, lower in 52; docs/theory.md, "PrivTree over deviations").
    - Order of the intervals: a 1-D domain in its own order; a 2-D grid along ``order`` =
      ``"hilbert"`` (default: the Hilbert curve, :func:`~blowfish_te.mechanisms.spatial.hilbert_order`,
      so intervals are compact regions) or ``"rows"`` (row-major). The order is data-independent;
      the check reads the cells along it with either partition.
    - Check (``select``, default True, unless ``ratio`` is given): :func:`blowfish_te.selection.measure`
      spends a few % of ε (2.5 % at K = 4096, 0.7 % at 128²) on the noisy record total and DAWA's
      cost of the data; :func:`blowfish_te.selection.decide` partitions where DAWA's fitted error
      model (:meth:`model`, per dimension and workload class) predicts it below the plain
      release's error, else releases the plain strategy — ``auto``'s choice for the workload
      (:func:`~blowfish_te.mechanisms.plain.plain_strategy`) — at the rest of ε; a histogram's
      Laplace counts have their structure read back (:func:`blowfish_te.smoothing.smooth`,
      post-processing) when the cost shows structure to merge, fitted to the noisy record total
      (on nearly empty data at small ε first refined by a second total out of the rest:
      :func:`~blowfish_te.selection.refine_total`). When it partitions, both steps keep
      their shares of the rest, and for histogram-like workloads buckets are priced by the noisy
      total (:func:`~blowfish_te.partitions.price_factor`; a prefix or range sums a merged
      bucket's bias over every cell it covers, so there the price stays).
    - Intervals: :func:`blowfish_te.partitions.dawa_partition` at ε₁ = ``ratio``·ε, with
      per-bucket price ``penalty``/ε₂. Tree: ε₁ = ``ratio``·ε, by default :data:`TREE_SHARE`
      (PrivTree's own split; its threshold and depth bias play the price's part).
    - Bucket totals: at ε₂ = ε - ε₁ with ``estimator``, by default the candidate of
      :data:`STAGE_TWO` with the lowest analytic error ‖W E A⁺‖_F²·Δ² on this partition, evaluated
      on :data:`PROBE_QUERIES` evenly spaced queries (DAWA uses GreedyH alone; on prefix
      workloads over many buckets HB is far better, on a few uneven buckets GreedyH, and where
      the search is predicted to take at most :data:`~blowfish_te.mechanisms.plain.STAGE_TWO_SECONDS`
      a p-Identity strategy optimised for the reduced workload, up to 1,000–1,350 buckets: 0.25–0.80
      times the best of the three's error on DPBench's prefixes). The partition is ε₁-DP output,
      so choosing and optimising the strategy from it is post-processing.
    - For intervals, ``ratio`` and ``penalty`` default to a rule of the workload alone: with r = max(1,
      err(Identity)/err(HB)) the ratio of the two strategies' analytic errors on W, ratio =
      0.25/√r and penalty = r^(1/4). For a histogram r = 1, DAWA's published (0.25, 1/ε₂); for
      prefix sums over 4096 cells r ≈ 18, (0.058, 2.07): a hierarchy already averages the noise
      there, so buckets earn less and lumping has to pay over longer runs.

    Privacy (unit changes): the features are (ρε)-DP (Laplace noise on values of sensitivity 1, see
    :func:`~blowfish_te.selection.measure`); the partition is ε₁-DP for unit changes (intervals:
    report-noisy-min, see its docstring; its price depends on the data only through the noisy total;
    tree: PrivTree's Theorem 1, which holds for the deviation — it moves by at most 1 on the nodes
    holding the changed cell and never grows from a node to its child); a unit change moves one
    bucket total (or cell) by one, so the linear mechanism with Laplace(Δ/ε₂), Δ its strategy's
    largest column L1 norm, is ε₂-DP; the second total, where bought, is Laplace on a value of
    sensitivity 1, its purchase decided by the first noisy total, ε and K; smoothing reads only the
    released counts and totals. The choices of route, ratio, penalty and strategy depend only on W,
    ε and what was already released. Sequential composition gives ρε + ε₁ + ε₂ = ε when it
    partitions, ρε + (the second total) + the plain release's share = ε when it does not.
    Answers to a 1-D prefix workload are then made nondecreasing from 0
    (:mod:`~blowfish_te.mechanisms.consistency`: post-processing, never further from the truth).
    Data-dependent: no analytic error.
    """

    name = "dawa"
    predicts_error = True

    def __init__(self, ratio: float | None = None, penalty: float | None = None, estimator: LinearMechanism | None = None,
                 order: str = "hilbert", select: bool = True, partition: str | None = None):
        self.ratio = None if ratio is None else _share(ratio, "ratio")
        self.penalty = None if penalty is None else check_real(penalty, "penalty", minimum=0, exclusive=True)
        if estimator is not None and not (isinstance(estimator, Mechanism) and estimator.tags.linear):
            raise TypeError(f"estimator must be a LinearMechanism or None, got {type(estimator).__name__}")
        self.estimator = estimator
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS} (how a 2-D grid is laid out for partitioning), got {order!r}")
        self.order = order
        if not isinstance(select, (bool, np.bool_)):
            raise TypeError(f"select must be True or False (choose privately whether to partition), got {select!r}")
        self.select = bool(select)
        if partition is not None and partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {PARTITIONS} or None (intervals in 1-D, a tree on a grid), "
                             f"got {partition!r}")
        self.partition = partition

    def partition_kind(self, domain: tuple[int, ...]) -> str:
        """``"intervals"`` (DAWA's tiling along :meth:`layout`) or ``"tree"`` (the deviation
        quadtree) for ``domain``: the given ``partition``, else intervals in 1-D and a tree on a grid."""
        if self.partition is not None:
            return self.partition
        return "intervals" if len(domain) == 1 else "tree"

    def _gain(self, workload: Workload) -> float:
        return self._cache("aggregation gain").get(workload, lambda: aggregation_gain(workload))

    def split(self, workload: Workload) -> tuple[float, float]:
        """(ratio, penalty) for ``workload``: the given values, else the rule above (for a tree
        partition, ratio :data:`TREE_SHARE`; its penalty is not read)."""
        gain = 1.0 if self.ratio is not None and self.penalty is not None else self._gain(workload)
        tree = self.partition_kind(workload.domain) == "tree"
        ratio = (TREE_SHARE if tree else 0.25 / math.sqrt(gain)) if self.ratio is None else self.ratio
        return ratio, gain**0.25 if self.penalty is None else self.penalty

    def model(self, workload: Workload, calibrated: bool = False) -> ErrorModel:
        """DAWA's fitted error model for ``workload`` (its dimension and workload class;
        ``calibrated``: see :func:`~blowfish_te.selection.error_model`)."""
        return error_model(self.name, len(workload.domain), workload_class(workload, self._gain(workload)),
                           calibrated=calibrated)

    def check(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource) -> Decision | None:
        """The private check of a release (validated arguments; the first draws from ``gen``, so
        the same seed gives the decision :meth:`run` takes): :func:`~blowfish_te.selection.measure`
        along :meth:`layout` and :func:`~blowfish_te.selection.decide` with :meth:`model`; None
        when the release does not check (``select`` off, or ``ratio`` given)."""
        if not self.select or self.ratio is not None:
            return None
        return decide(measure(x[self.layout(workload.domain)], epsilon, gen), self.model(workload))

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        if len(workload.domain) > 2:
            raise ValueError(f"DAWA partitions a 1-D domain or a 2-D grid laid out along a curve; got domain {workload.domain}")
        ratio = self.split(workload)[0]
        decision = self.check(workload, x, epsilon, gen)
        if decision is None:
            answers = self.partitioned(workload, x, ratio * epsilon, (1 - ratio) * epsilon, gen)
        elif decision.route != "partition":
            answers = self.release_plain(workload, x, epsilon, gen, decision)
        else:
            rest = epsilon - decision.spent  # both steps keep their shares of the rest
            answers = self.partitioned(workload, x, ratio * rest, (1 - ratio) * rest, gen, scale=self.pricing_scale(workload, decision))
        return consistent(Outcome(np.asarray(answers, dtype=np.float64)), workload)

    def release_plain(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                      decision: Decision) -> np.ndarray:
        """The plain route a check's ``decision`` leads to (validated arguments): :meth:`plain` at
        ``epsilon`` less the features' spend, smoothed along :meth:`layout` where the noisy cost is
        below :data:`SMOOTHING_COST`, with the features' record total."""
        smooth_along = self.layout(workload.domain) if decision.features.cost < SMOOTHING_COST else None
        return self.plain(workload, x, epsilon - decision.spent, gen, smooth_along, decision.features)

    def partition_share(self, workload: Workload, policy: Policy) -> float:
        """The partition's share of ε (the :class:`~blowfish_te.mechanisms.partitioner.Partitioner`
        protocol): ``ratio`` of :meth:`split`."""
        return self.split(workload)[0]

    def smooths(self, workload: Workload) -> bool:
        """DAWA's plain release smooths its Laplace counts when its check's cost says so."""
        return True

    def release_partitioned(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy,
                            decision: Decision, notes: str) -> Outcome:
        """The partition branch at ``epsilon`` (both steps keep their shares), its buckets priced
        by the decision's noisy N·ε/K (:meth:`pricing_scale`)."""
        ratio = self.split(workload)[0]
        answers = self.partitioned(workload, x, ratio * epsilon, (1 - ratio) * epsilon, gen,
                                   scale=self.pricing_scale(workload, decision))
        return Outcome(np.asarray(answers, dtype=np.float64), notes=notes)

    def pricing_scale(self, workload: Workload, decision: Decision) -> float | None:
        """The noisy N·ε/K that prices the buckets (:func:`~blowfish_te.partitions.price_factor`):
        for histogram-like workloads only (None for the others)."""
        cells = workload_class(workload, self._gain(workload)) == "cells"
        return decision.features.scale if cells else None

    def partitioned(self, workload: Workload, x: np.ndarray, eps1: float, eps2: float, gen: RandomSource,
                    scale: float | None = None) -> np.ndarray:
        """DAWA's two steps on validated arguments: the partition at ``eps1``
        (:meth:`partition_labels`), the bucket totals at ``eps2`` (ε₁ + ε₂ of the release,
        sequential composition)."""
        labels = self.partition_labels(workload, x, eps1, eps2, gen, scale)
        reduced = BucketWorkload(workload, labels)
        totals = np.bincount(labels, weights=x).astype(np.int64)
        estimator = self.estimator or lowest_error(reduced, STAGE_TWO)
        return estimator.run(reduced, totals, eps2, gen)

    def partition_labels(self, workload: Workload, x: np.ndarray, eps1: float, eps2: float, gen: RandomSource,
                         scale: float | None = None) -> np.ndarray:
        """The private partition at ``eps1`` (ε₁-DP), as a bucket label per cell: the deviation
        quadtree (:func:`~blowfish_te.mechanisms.privtree.tree_labels`), or DAWA's intervals along
        :meth:`layout` with buckets priced at ``penalty``/``eps2``, raised by
        :func:`~blowfish_te.partitions.price_factor` of the noisy ``scale`` N·ε/K when given."""
        if not eps1 > 0:
            raise ValueError(f"the partition's budget must be positive, got {eps1}")
        if self.partition_kind(workload.domain) == "tree":
            from .privtree import tree_labels  # loaded with the first tree: a lookup of "dawa" loads its module only

            return tree_labels(x.reshape(tuple(workload.domain)), eps1, gen, score="deviation")
        cells = self.layout(workload.domain)
        factor = price_factor(scale)
        labels = np.empty(workload.size, dtype=np.int64)
        labels[cells] = dawa_partition(x[cells], eps1, eps2, gen, penalty=self.split(workload)[1] * factor,
                                       max_length=None if factor == 1 else workload.size)
        return labels

    def layout(self, domain: tuple[int, ...]) -> np.ndarray:
        """The cells in the order the partition reads them (data-independent)."""
        if len(domain) == 1 or self.order == "rows":
            return np.arange(int(np.prod(domain)))
        return hilbert_order(domain)

    def plain(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, smooth_along: np.ndarray | None,
              features: Features | None = None) -> np.ndarray:
        """The release without a partition (every cell its own bucket) at ``epsilon``: the plain
        strategy on the whole workload; when that is Laplace on every cell and ``smooth_along``
        gives the cell order, the noisy counts smoothed along it (post-processing), their bucket
        sums fitted to the check's noisy record total when ``features`` give it — refined first
        where that pays (:func:`~blowfish_te.selection.refine_total`, out of ``epsilon``)."""
        estimator = self.estimator or plain_strategy(self, workload)
        if smooth_along is None or not estimator.tags.laplace_on_cells or x.size > MAX_SMOOTHING:
            return estimator.run(workload, x, epsilon, gen)
        total = None
        if features is not None:
            refined = refine_total(features, x, gen)
            epsilon -= refined.spent - features.spent
            total = refined.total_estimate()
        noisy = add_laplace(x[smooth_along], 1.0 / epsilon, gen, sensitivity=1.0, integer=True)
        estimate = np.empty(x.size)
        estimate[smooth_along] = smooth(noisy, CellNoise("independent", 2.0 / epsilon**2, x.size), total)[0]
        return np.asarray(workload.matvec(estimate), dtype=np.float64)


#: How DAWA lays out a 2-D grid: along the Hilbert curve, or row by row.
ORDERS = ("hilbert", "rows")
#: DAWA's partitions: intervals of the ordered cells, or a quadtree of the grid.
PARTITIONS = ("intervals", "tree")
#: The share of ε (after the check) a tree partition spends on its split decisions.
TREE_SHARE = 0.5
#: The plain release's Laplace counts are smoothed when DAWA's noisy cost of the data is below
#: this share of K/ε: above it every cell differs from its neighbours by more than the noise.
SMOOTHING_COST = 1.15


class MWEM(RecordTotal, Mechanism):
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
    models_records = True

    def __init__(self, rounds: int = 10, ratio: float = 0.5, updates: int = 100, total: float | None = None,
                 total_share: float = 0.1):
        self.rounds = check_int(rounds, "rounds", minimum=1)
        self.ratio = _share(ratio, "ratio")
        self.updates = check_int(updates, "updates", minimum=1)
        self._init_total(total, total_share)

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
        k, m = workload.size, workload.num_queries
        total, epsilon = self._record_total(x, epsilon, gen)
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
            q = exponential_choice(eps_select * score / (2 * delta), chosen, gen)
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
        return Outcome(np.asarray(workload.matvec(estimate), dtype=np.float64))


def exponential_choice(utility: np.ndarray, excluded: np.ndarray, gen: RandomSource) -> int:
    """The exponential mechanism over the queries not ``excluded``: index q with probability ∝
    exp(utility_q), by the Gumbel-max trick (McSherry, Talwar 2007; ``utility`` = ε·score/(2Δ)
    for an ε-DP choice when every score moves by at most Δ). Floating point, not hardened."""
    noisy = utility + gen.gumbel(size=utility.size)
    noisy[excluded] = -np.inf
    return int(np.argmax(noisy))


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

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        self.unit_changes(policy)
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
        return Outcome(np.asarray(workload.matvec(estimate), dtype=np.float64))


def _greedy_clusters(values: np.ndarray, epsilon: float, window: int = 4096) -> np.ndarray:
    """Cluster labels for sorted ``values`` by AHP's greedy rule (see :class:`AHP`).

    err(i..j) = squared error of the values around their mean + 2/(ε² (j-i+1)); the best cluster
    starting at j, err*(j), is searched over at most ``window`` following values. One pass over j
    with O(1) work each, after :func:`_best_starts`.
    """
    n = values.size
    cum = np.concatenate([[0.0], np.cumsum(values)])
    squares = np.concatenate([[0.0], np.cumsum(values**2)]).tolist()
    noise = 2.0 / epsilon**2
    best = _best_starts(values, cum, noise, window).tolist()
    cum = cum.tolist()
    labels = np.zeros(n, dtype=np.int64)
    start, label, previous = 0, 0, noise  # previous = err(start..j-1)
    for j in range(1, n):
        length = j - start + 1
        total = cum[j + 1] - cum[start]
        err = squares[j + 1] - squares[start] - total * total / length + noise / length
        if err >= previous + best[j]:
            label, start, previous = label + 1, j, noise
        else:
            previous = err
        labels[j] = label
    return labels


def _best_starts(values: np.ndarray, cum: np.ndarray, noise: float, window: int) -> np.ndarray:
    """err*(j) = min over 1 <= L <= window (j + L <= n) of (v_j - mean(v_j..v_{j+L-1}))² + noise/L².

    The values are sorted, so the gap d(L) = mean - v_j never decreases with L: within a run of
    values equal to v_j it is 0 (the run's full length is best there), and once d(L)² reaches the
    best value found no longer cluster can beat it. All j advance together, one L per step.
    """
    n = values.size
    j = np.arange(n)
    run = np.minimum(np.searchsorted(values, values, side="right") - j, window)
    best = noise / run.astype(np.float64) ** 2
    active = j[(run < window) & (j + run < n)]
    length = run[active] + 1
    while active.size:
        end = active + length
        gap = ((cum[end] - cum[active]) / length - values[active]) ** 2
        best[active] = np.minimum(best[active], gap + noise / length.astype(np.float64) ** 2)
        keep = (gap < best[active]) & (length < window) & (end < n)
        active, length = active[keep], length[keep] + 1
    return best
