"""Partition-then-transform: a mechanism that plans and executes routes of other mechanisms
itself (:func:`blowfish_te.routes.plan_routes`).

Partition-then-transform (Anuarbek, data-dependent Blowfish histograms) is a data-dependent Blowfish
histogram algorithm that works under any policy, cyclic ones included."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._cache import IdentityCache
from .._validation import check_real
from ..partitions import (
    dawa_partition,
    matching_partition,
    noisy_pairing_partition,
    price_factor,
    quotient_policy,
)
from ..policies import Policy
from ..routes import Candidate, Outcome, plan_routes
from ..selection import Decision, ErrorModel, Features, decide, error_model, measure, refine_total
from ..smoothing import MAX_SMOOTHING, CellNoise, monotone_running_sums, smooth
from ..workloads import BucketWorkload, Workload, evenly_spaced_queries, identity
from .base import LinearMechanism, Mechanism, NativeMechanism, get_mechanism
from .consistency import consistent
from .datadependent import SMOOTHING_COST
from .hierarchical import HB, Privelet
from .laplace import Identity
from .plain import aggregation_gain, best_plan_under, workload_class
from .spatial import hilbert_order

if TYPE_CHECKING:
    from ..noise import RandomSource

PARTITIONS = ("dawa", "matching", "noisy_pairing")
#: Linear strategies for the bucket totals, compared by analytic error under the quotient policy.
BUCKET_STRATEGIES: tuple[type[LinearMechanism], ...] = (Identity, HB, Privelet)
#: Strategies are compared on at most this many of the reduced workload's queries, evenly spaced.
PROBE_QUERIES = 256
#: Per-bucket price of the DAWA partition, in units of 1/ε₂: under a tree transform a bucket total
#: is the difference of two Laplace(1/ε₂) cumulative counts, of standard deviation 2/ε₂. (Their mean
#: absolute value, 1.5/ε₂, let more spurious single cells through at ε = 0.001 on Anuarbek's Fig. 4.)
BUCKET_PRICE = 2.0
#: The partition is used (with this share of ε) only when merging the cells in blocks of
#: ``LUMPING_BLOCK`` would cut the workload's analytic error under the policy ``MIN_LUMPING_GAIN`` times.
DEFAULT_SPLIT, LUMPING_BLOCK, MIN_LUMPING_GAIN = 0.25, 2, 2.0


class PartitionThenTransform(NativeMechanism):
    """Private partition (ε₁ = ``epsilon_split``·ε), the workload reduced to the bucket totals
    (W·E, E spreading a total evenly over its bucket, as DAWA's second step) answered under the
    quotient policy G' at ε₂ = ε - ε₁, uniform expansion.

    Partitions (each with its privacy argument):

    - ``"dawa"``: :func:`blowfish_te.partitions.dawa_partition` at ε₁/2 for unit changes; a move
      along a policy edge is a removal plus an addition, so it is (ε₁, G)-Blowfish for every G;
    - ``"matching"``: Anuarbek's noisy max-weight matching at ε₁/2, same argument (K <= 1024);
    - ``"noisy_pairing"``: counts with Laplace(Δ_G(I)/ε₁), Δ_G(I) from the policy's edges, then the
      optimal pairing of the noisy counts — post-processing.

    Bucket totals: the bucket totals of two G-neighbours are equal or G'-neighbours (Anuarbek
    Lemma 4.1), so any (ε₂, G')-Blowfish release of them is (ε₂, G)-Blowfish on x. They answer
    the reduced workload through :func:`blowfish_te.answer` with ``estimator``, by default the
    strategy of :data:`BUCKET_STRATEGIES` and the route with the lowest analytic error under G'
    (on :data:`PROBE_QUERIES` evenly spaced queries) — a choice that depends on the workload, the
    released partition and ε only. Sequential composition gives ε.

    The check (``select``, where the split partitions): :func:`blowfish_te.selection.measure`
    first spends a few % of ε on Laplace features — the record total unless the policy discloses
    it, and DAWA's two costs — each of sensitivity 1 for a record added or removed (the
    neighbours of unbounded DP) and 2 for a record moved along an edge (any other policy), and the
    fitted model decides from them whether to partition; either branch runs at the rest of ε (a
    smoothed plain release first buys a second record total where the check's reads the data
    nearly empty, :func:`blowfish_te.selection.refine_total`: Laplace at the same sensitivity, its
    purchase decided by the first noisy total, ε and K). Sequential composition gives ε.
    Answers to a 1-D prefix workload are then made nondecreasing from 0, up to the record total
    where the policy discloses it (:mod:`~blowfish_te.mechanisms.consistency`: post-processing).

    ``epsilon_split`` (ε₁/ε) defaults to a rule of the workload and the policy (never the data):

    - 0.25 when buckets can pay: :func:`lumping_gain` >= :data:`MIN_LUMPING_GAIN`, i.e. merging
      the cells in pairs would at least halve the analytic error (histograms: a pair's total spread
      over its two cells has a quarter of the noise). 0.25 gives the partition DAWA(ε/2)'s budget
      (ε/8 per unit change and the same bucket price), so from one generator state both release
      the same buckets, while the transform measures each bucket total with half DAWA(ε/2)'s
      variance; on dense data the split costs at most 1/0.75² before buckets win some of it
      back. On Anuarbek's Fig. 4 suite (``anuarbek_fig4``, 20 paired trials per cell) 0.25 is
      below DAWA(ε/2) in 21 of 21 cells and below identity through the transform in 20 (the
      21st, HEPTH at ε = 0.1, at 1.26 times); Anuarbek's 0.5 is below DAWA(ε/2) in 14;
    - 0 otherwise: no partition, all of ε for the bucket stage (then the policy itself). Prefix
      and range queries gain at most 1.8 times from pairs under line, threshold and unbounded
      policies (their transformed queries touch few counts, or a hierarchy already averages), so
      a partition would cost budget and add the bias of uniform expansion.
    """

    name = "partition_then_transform"
    predicts_error = True

    def __init__(self, partition: str = "dawa", epsilon_split: float | None = None, estimator: LinearMechanism | None = None,
                 select: bool = True):
        if partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {PARTITIONS}, got {partition!r}")
        self.partition = partition
        self.epsilon_split = None if epsilon_split is None else check_real(epsilon_split, "epsilon_split", 0, 1, exclusive=True)
        if estimator is not None and not (isinstance(estimator, Mechanism) and estimator.tags.linear):
            raise TypeError(f"estimator must be a LinearMechanism or None, got {type(estimator).__name__}")
        self.estimator = estimator
        if not isinstance(select, (bool, np.bool_)):
            raise TypeError(f"select must be True or False (choose privately whether to partition), got {select!r}")
        self.select = bool(select)

    def split(self, workload: Workload, policy: Policy) -> float:
        """ε₁/ε for ``workload`` under ``policy``: the given share, else the rule above."""
        if self.epsilon_split is not None:
            return self.epsilon_split
        gain = self._cache("lumping gain").get(workload, IdentityCache).get(policy, lambda: lumping_gain(workload, policy))
        return DEFAULT_SPLIT if gain >= MIN_LUMPING_GAIN else 0.0

    def _labels(self, x: np.ndarray, policy: Policy, eps1: float, eps2: float, gen, factor: float = 1.0) -> np.ndarray:
        if self.partition == "dawa":
            return dawa_partition(x, eps1 / 2, eps2, gen, penalty=BUCKET_PRICE * factor, max_length=None if factor == 1 else x.size)
        if self.partition == "matching":
            return matching_partition(x, eps1 / 2, eps2, gen)
        return noisy_pairing_partition(x, policy, eps1, eps2, gen)

    def selects(self, workload: Workload, policy: Policy) -> bool:
        """Whether a release first checks privately that the partition pays: ``select`` is on,
        the split is the default rule's and it partitions."""
        return self.select and self.epsilon_split is None and self.split(workload, policy) > 0

    def smooths(self, workload: Workload) -> bool:
        """Whether the plain release may have its cells smoothed: only for histogram-like workloads
        (:func:`~blowfish_te.mechanisms.plain.workload_class` ``"cells"``), whose error is the cells' error that smoothing minimises; a
        prefix or range sums the smoothing's bias over every cell it covers (measured: prefixes
        under ``threshold:4`` at 10⁷ records, 200 times Identity's error when smoothed)."""
        return workload_class(workload, self._gain(workload)) == "cells"

    def _gain(self, workload: Workload) -> float:
        return self._cache("aggregation gain").get(workload, lambda: aggregation_gain(workload))

    def model(self, workload: Workload, calibrated: bool = False) -> ErrorModel:
        """Partition-then-transform's fitted error model: the one of histograms over a line (fitted
        under the line policy; the partition reads the cells in their flat order on any domain,
        and only histogram-like workloads are partitioned by the default split). Under unbounded
        DP its features are read at half the noise (a record is added or removed, not moved); on
        DPBench's 1-D shapes the line model then decides as well as one fitted under unbounded DP
        (``benchmarks/train_selection.py``: largest mean cost of the picks 3.46 both, at 10³
        records and ε = 0.01, where no feature separates the shapes)."""
        return error_model(self.name, 1, "cells", calibrated=calibrated)

    def check(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy) -> Decision | None:
        """The private check of a release (validated arguments; the first draws from ``gen``):
        :func:`~blowfish_te.selection.measure` — the record total unless the policy discloses it,
        each feature's sensitivity a unit change under unbounded DP and a move (2) under any other
        policy — and :func:`~blowfish_te.selection.decide` with :meth:`model`; None when the
        release does not check (:meth:`selects`)."""
        if not self.selects(workload, policy):
            return None
        features = measure(x, epsilon, gen, total=public_total(policy, x), record_moves=1 if policy.is_unbounded_dp else 2)
        return decide(features, self.model(workload))

    def layout(self, domain: tuple[int, ...]) -> np.ndarray:
        """The cells in their flat order: the partition reads them so on any domain."""
        return np.arange(int(np.prod(domain)))

    def partition_share(self, workload: Workload, policy: Policy) -> float:
        """The partition's share of ε (the :class:`~blowfish_te.mechanisms.partitioner.Partitioner`
        protocol): :meth:`split`."""
        return self.split(workload, policy)

    def release_partitioned(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy,
                            decision: Decision, notes: str) -> Outcome:
        """The partition branch at ``epsilon``, its DAWA buckets priced by the decision's noisy
        N·ε/K for histogram-like workloads."""
        scale = decision.features.scale if self.smooths(workload) else None
        return self.partitioned(workload, x, policy, epsilon, self.split(workload, policy) * epsilon, gen, notes, scale=scale)

    def serves(self, workload: Workload, policy: Policy) -> bool:
        """A given estimator must serve the policy itself (the bucket policy of a coarse partition
        can look like DP when the policy is not), so its refusals are checked here."""
        if self.estimator is not None:
            plan_routes(workload, policy, 1.0, self.estimator)
        return True

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome:
        policy = self.needs_policy(policy)
        return consistent(self._release(workload, x, epsilon, gen, policy), workload, public_total(policy, x))

    def _release(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource, policy: Policy) -> Outcome:
        eps1 = self.split(workload, policy) * epsilon
        decision = self.check(workload, x, epsilon, gen, policy)
        if decision is not None:
            features = decision.features
            notes = f"{self.name}: {features.describe()}; {decision.reason}"
            if decision.route != "partition":
                return self.release_plain(workload, x, policy, epsilon, gen, decision, notes)
            rest = epsilon - decision.spent  # both steps keep their shares of the rest
            scale = features.scale if self.smooths(workload) else None  # histogram-like workloads only
            return self.partitioned(workload, x, policy, rest, eps1 * rest / epsilon, gen, notes, scale=scale)
        return self.partitioned(workload, x, policy, epsilon, eps1, gen, "")

    def release_plain(self, workload: Workload, x: np.ndarray, policy: Policy, epsilon: float, gen: RandomSource,
                      decision: Decision, notes: str) -> Outcome:
        """The plain route a check's ``decision`` leads to (validated arguments): the plain plan
        (``auto``'s choice, or the given estimator's best route) at ``epsilon`` less the features'
        spend, its cells smoothed where the workload is histogram-like and the noisy cost is below
        :data:`~blowfish_te.mechanisms.datadependent.SMOOTHING_COST` (:func:`plain_release`)."""
        estimator, chosen = self._plain_plan(workload, policy)
        smoothed = decision.features.cost < SMOOTHING_COST and self.smooths(workload)
        return plain_release(workload, x, policy, epsilon - decision.spent, gen, estimator, chosen, smoothed, notes,
                             decision.features)

    def _plain_plan(self, workload: Workload, policy: Policy):
        if self.estimator is not None:
            return self.estimator, plan_routes(workload, policy, 1.0, self.estimator).chosen
        # auto's choice: depends on (W, G) only, planned once
        return self._cache("plan").get(workload, IdentityCache).get(policy, lambda: best_plan_under(workload, policy))

    def partitioned(self, workload: Workload, x: np.ndarray, policy: Policy, epsilon: float, eps1: float, gen: RandomSource,
                    notes: str, scale: float | None = None) -> Outcome:
        """The partition at ``eps1`` (none when 0; DAWA's buckets priced up by
        :func:`~blowfish_te.partitions.price_factor` of the noisy ``scale`` N·ε/K, when given) and
        the bucket totals at ``epsilon`` - ``eps1``, on validated arguments; ``notes`` join the
        release's choice."""
        eps2 = epsilon - eps1
        if eps1 > 0:
            labels = self._labels(x, policy, eps1, eps2, gen, price_factor(scale))
            reduced, quotient = BucketWorkload(workload, labels), quotient_policy(policy, labels)
            totals = np.bincount(labels, weights=x).astype(np.int64)
            estimator, chosen = (self.estimator, None) if self.estimator is not None else best_plan(reduced, quotient)
        elif self.estimator is None:  # no partition: auto's plain release (its running sums made consistent)
            estimator, chosen = self._plain_plan(workload, policy)
            return plain_release(workload, x, policy, epsilon, gen, estimator, chosen, False, notes)
        else:  # no partition, the given estimator: every cell its own bucket
            labels, reduced, quotient, totals = np.arange(x.size), workload, policy, x
            estimator, chosen = self.estimator, None
        if chosen is None:
            inner = plan_routes(reduced, quotient, eps2, estimator).execute(totals, gen)
        else:
            inner = plan_routes(reduced, quotient, eps2, estimator, *_route_of(chosen, quotient)).execute(totals, gen)
        last_cell = np.zeros(quotient.size, dtype=np.int64)
        np.maximum.at(last_cell, labels, np.arange(labels.size))
        disclosed = {int(last_cell[b]): total for b, total in inner.component_totals.items()}
        return Outcome(inner.answers, disclosed, inner.sensitivity, inner.noise_scale, notes)


def public_total(policy: Policy, x: np.ndarray) -> int | None:
    """The record total when the policy discloses it (no ⊥: every component's total is the same
    for all neighbours, so the sum is public), else None."""
    return None if policy.has_bottom else int(np.sum(x))


def cell_noise(policy: Policy, chosen: Candidate, scale: float) -> CellNoise | None:
    """The public noise of Identity's cell estimates released along ``chosen`` (a route of
    :func:`blowfish_te.plan`) with Laplace scale ``scale``: independent in the exact route and
    under unbounded DP (the transform is the identity), a path along the line policy's transform;
    None for other trees (their noise is not one of the models of :mod:`blowfish_te.smoothing`)."""
    variance = 2.0 * float(scale) ** 2
    k = policy.size
    if chosen.route == "exact":
        return CellNoise("independent", variance, k)
    tree = chosen.tree
    if tree is None or tree.ndim != 1:
        return None
    if tree.is_unbounded_dp:
        return CellNoise("independent", variance, k)
    if not tree.has_bottom and tree.num_edges == k - 1 and k > 1:
        edges = tree.edges
        if np.array_equal(edges[:, 1] - edges[:, 0], np.ones(k - 1)) and np.array_equal(np.sort(edges[:, 0]), np.arange(k - 1)):
            return CellNoise("path", variance, k)
    return None


def _route_of(chosen, policy: Policy) -> tuple[str, Policy | None]:
    """(route, tree) that plan ``chosen``'s way again (for another workload or ε) under ``policy``."""
    tree = chosen.tree if chosen.route == "transform" and chosen.tree is not policy else None
    return ("auto" if chosen.route == "native" else chosen.route), tree


def plain_release(workload: Workload, x: np.ndarray, policy: Policy, epsilon: float, gen: RandomSource, estimator: Mechanism,
                  chosen: Candidate, smoothed: bool, notes: str, features: Features | None = None) -> Outcome:
    """``estimator`` along the route ``chosen`` (a candidate of :func:`blowfish_te.plan`) at
    ``epsilon``; when ``smoothed``, the estimator is Identity and its noise is one of
    :func:`cell_noise`'s models, the cells are released, smoothed (:func:`blowfish_te.smoothing.smooth`,
    along the Hilbert curve on a 2-D grid) and answer the workload — post-processing of the same
    release. With the check's ``features``, smoothed independent noise is fitted to their noisy
    record total, refined first out of ``epsilon`` where that pays
    (:func:`~blowfish_te.selection.refine_total`).

    Identity along the line policy's transform releases noisy running sums whose last one (the
    record total) is exact; smoothed or not, they are projected onto nondecreasing sums from 0 to
    the total (:func:`~blowfish_te.smoothing.monotone_running_sums`, post-processing), which never
    moves them further from the true running sums: a prefix workload's error cannot grow (docs/theory.md,
    "Consistent running sums under the line policy")."""
    route, tree = _route_of(chosen, policy)
    unit_noise = cell_noise(policy, chosen, 1.0) if estimator.tags.laplace_on_cells else None  # its variance follows the release
    running_sums = unit_noise is not None and unit_noise.kind == "path" and policy.ndim == 1
    if (smoothed and estimator.tags.laplace_on_cells and policy.size <= MAX_SMOOTHING) or running_sums:
        smooths = smoothed and unit_noise is not None and policy.size <= MAX_SMOOTHING and policy.ndim <= 2 \
            and (unit_noise.kind == "independent" or policy.ndim == 1)
        total = None
        if smooths and features is not None and unit_noise.kind == "independent":  # path noise sums exactly
            refined = refine_total(features, x, gen)
            epsilon -= refined.spent - features.spent
            total = refined.total_estimate()
        release = plan_routes(identity(policy.shape), policy, epsilon, estimator, route, tree).execute(x, gen)
        cells = np.asarray(release.answers)
        if smooths:
            noise = cell_noise(policy, chosen, release.noise_scale)
            order = hilbert_order(policy.shape) if policy.ndim == 2 and noise.kind == "independent" else np.arange(policy.size)
            cells = np.empty(policy.size)
            cells[order] = smooth(np.asarray(release.answers)[order], noise, total)[0]  # path noise: projected too
            notes = _joined(notes, "cells smoothed (post-processing)")
        elif running_sums:
            cells = monotone_running_sums(cells)
            notes = _joined(notes, "running sums made nondecreasing (post-processing)")
        answers = np.asarray(workload.matvec(cells), dtype=np.float64)
    else:
        release = plan_routes(workload, policy, epsilon, estimator, route, tree).execute(x, gen)
        answers = release.answers
    return Outcome(answers, dict(release.component_totals), release.sensitivity, release.noise_scale,
                   _joined(notes, f"ran {estimator.name} ({chosen.route})"))


def _joined(notes: str, text: str) -> str:
    return f"{notes}; {text}" if notes else text


def best_plan(workload: Workload, policy: Policy) -> tuple[Mechanism, Candidate]:
    """(mechanism, candidate): the strategy of :data:`BUCKET_STRATEGIES` and the route with the
    lowest analytic error for ``workload`` under ``policy``, judged on at most
    :data:`PROBE_QUERIES` evenly spaced queries (ε does not change the order)."""
    probe = evenly_spaced_queries(workload, PROBE_QUERIES)
    mechanisms = [get_mechanism(cls.name) for cls in BUCKET_STRATEGIES]  # shared: their caches persist
    options = [(mechanism, plan_routes(probe, policy, 1.0, mechanism).chosen) for mechanism in mechanisms]
    return min(options, key=lambda option: np.inf if option[1].expected_mse is None else option[1].expected_mse)


def lumping_gain(workload: Workload, policy: Policy) -> float:
    """Analytic error of ``workload`` under ``policy`` over that of the same queries on blocks of
    :data:`LUMPING_BLOCK` consecutive cells spread evenly (under the quotient policy), each with the
    best of :data:`BUCKET_STRATEGIES`: how much noise buckets could remove, bias aside."""
    labels = np.arange(policy.size) // LUMPING_BLOCK
    full = best_plan(workload, policy)[1].expected_mse
    lumped = best_plan(BucketWorkload(workload, labels), quotient_policy(policy, labels))[1].expected_mse
    if full is None or lumped is None:
        return 1.0
    return np.inf if lumped == 0 else full / lumped
