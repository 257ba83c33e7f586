"""Empirical lower bounds on the privacy loss of a mechanism, one neighbour pair at a time.

For a pair (x, y) and an event S, an (ε', G)-Blowfish mechanism M satisfies
P[M(x) ∈ S] <= e^{ε'·d_G(u, v)} P[M(y) ∈ S]. The audit treats this as a hypothesis test
(Ding et al., "Detecting violations of differential privacy", CCS 2018; Jagielski et al. 2020 and
Nasr et al. 2021 audit DP training the same way):

1. selection: run M n_select times on x and on y; over threshold events {s > t} and {s <= t} of a
   few scalar statistics s = w·M(·) (the true answer difference W(x - y), the empirical mean
   difference, its variance-weighted version, single answers), pick the event and direction with
   the largest Clopper–Pearson bound below;
2. detection: on n_detect fresh runs per side, with counts c_num, c_den of the chosen event,
   ε_lower = log( CP_lower(c_num) / CP_upper(c_den) ), exact binomial (Clopper–Pearson 1934)
   one-sided bounds at level α / (2 · #pairs) each (Bonferroni over pairs and the two bounds).

With probability >= ``confidence`` every reported ε_lower is at most the true privacy loss of its
pair, so a pair FAILS — a statistically significant violation — when ε_lower > ε·d_G(u, v).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import beta

from .._validation import check_epsilon, check_int
from ..mechanisms import Mechanism, get_mechanism
from ..noise import RNGLike, check_rng
from ..policies import Policy
from ..release import answer, plan
from ..secure import SecureRandom
from ..sensitivity import check_compatible
from ..workloads import Workload, as_workload
from .pairs import KINDS, NeighbourPair, make_pair, neighbour_pairs

__all__ = ["AuditReport", "Batched", "Event", "HistogramAudit", "PairResult", "audit", "audit_histograms", "clopper_pearson"]

#: Thresholds tried per statistic on the selection sample (pooled quantiles beyond this many values).
MAX_THRESHOLDS = 512
#: Single answers tried as statistics: those with the largest standardised mean difference.
TOP_ANSWERS = 4


@dataclass(frozen=True)
class Batched:
    """A mechanism given as a vectorised sampler: ``sample(x, n, rng)`` returns an (n, m) array of
    n independent releases on histogram x. Much faster to audit than one call per release."""

    sample: Callable[[np.ndarray, int, np.random.Generator], np.ndarray]
    name: str = "batched"


def clopper_pearson(count: ArrayLike, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided exact binomial bounds (Clopper–Pearson): P[p >= lower] >= 1 - α and
    P[p <= upper] >= 1 - α, with lower = Beta⁻¹(α; c, n - c + 1), upper = Beta⁻¹(1 - α; c + 1, n - c)."""
    c = np.asarray(count, dtype=np.float64)
    lower = np.where(c > 0, beta.ppf(alpha, np.maximum(c, 1), n - c + 1), 0.0)
    upper = np.where(c < n, beta.ppf(1 - alpha, c + 1, np.maximum(n - c, 1)), 1.0)
    return lower, upper


def _log_bounds(n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """log CP_lower(c) and log CP_upper(c) for every count c = 0..n (-inf where the lower bound is 0);
    then log(CP_lower(num) / CP_upper(den)) = lower[num] - upper[den]."""
    lower, upper = clopper_pearson(np.arange(n + 1), n, alpha)
    with np.errstate(divide="ignore"):
        return np.log(lower), np.log(upper)


@dataclass(frozen=True)
class Event:
    """{w·M(·) > t} (``above``) or {w·M(·) <= t}; the bound is P[event | numerator side] over
    P[event | the other side]."""

    statistic: str
    weights: np.ndarray = field(repr=False)
    threshold: float
    above: bool
    numerator: str

    def occurs(self, samples: np.ndarray) -> np.ndarray:
        s = samples @ self.weights
        return s > self.threshold if self.above else s <= self.threshold

    def __str__(self) -> str:
        other = "x'" if self.numerator == "x" else "x"
        op = ">" if self.above else "≤"
        return f"P[{self.statistic} {op} {self.threshold:.4g} | {self.numerator}] / P[· | {other}]"


@dataclass(frozen=True)
class HistogramAudit:
    """The audit of one pair of histograms: the claimed bound, the lower bound on the privacy loss
    and its event. :func:`audit_histograms` returns it for pairs the generators do not cover (e.g.
    neighbours under public constraints, which move several records)."""

    claimed: float
    epsilon_lower: float
    event: Event
    p_numerator: float
    p_denominator: float

    @property
    def passed(self) -> bool:
        return self.epsilon_lower <= self.claimed


@dataclass(frozen=True)
class PairResult(HistogramAudit):
    """The audit of one generated pair: the claimed bound ε·d_G (or ε), the lower bound and its event."""

    pair: NeighbourPair = field(repr=False, default=None)

    @property
    def ratio(self) -> float:
        """ε_lower / claimed (0 when nothing is claimed to be hidden, i.e. an infinite claim)."""
        return self.epsilon_lower / self.claimed if math.isfinite(self.claimed) else 0.0


@dataclass(frozen=True)
class AuditReport:
    """Results of :func:`audit`: one :class:`PairResult` per pair; ``passed`` when none FAILS.
    ``sampler`` is what a release of the audited path reports drawing its noise from."""

    mechanism: str
    route: str
    sampler: str
    policy: str
    workload: str
    epsilon: float
    confidence: float
    n_select: int
    n_detect: int
    results: tuple[PairResult, ...]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def worst(self) -> PairResult:
        """The pair with the largest ε_lower / claimed."""
        return max(self.results, key=lambda r: (r.ratio, r.epsilon_lower))

    def table(self) -> str:
        """The per-pair results as a markdown table."""
        lines = [
            f"{self.mechanism} ({self.route}; noise: {self.sampler}) under {self.policy}, workload {self.workload}, "
            f"ε = {self.epsilon:g}; "
            f"{self.n_select} + {self.n_detect} runs per side, confidence {self.confidence:g}: "
            f"{'PASS' if self.passed else 'FAIL'} ({self.seconds:.1f} s)",
            "",
            "| kind | move | d_G | claimed | ε lower | event | P num / den | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in self.results:
            lines.append(
                f"| {r.pair.kind} | {r.pair.move} | {r.pair.distance:g} | {r.claimed:.3g} | {r.epsilon_lower:.3f} "
                f"| {r.event} | {r.p_numerator:.3f} / {r.p_denominator:.3f} | {'PASS' if r.passed else 'FAIL'} |"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


@dataclass(frozen=True)
class _Runner:
    name: str
    route: str
    sampler: str
    tree: Policy | None
    sample: Callable[[np.ndarray, int, np.random.Generator], np.ndarray]


def _library_runner(
    mech: Mechanism, workload: Workload, policy: Policy, epsilon: float, route: str, tree, secure: bool
) -> _Runner:
    """Runs ``answer`` with the route and tree of its plan pinned: the plan is data-independent, so
    pinning it changes no output distribution, only skips re-planning on every run. ``secure``
    draws through one :class:`~blowfish_te.secure.SecureRandom` (the ``rng=None`` path) instead
    of the audit's seeded generator."""
    chosen = plan(workload, policy, epsilon, mech, route, tree).chosen
    pinned: dict = {}
    if chosen.route == "exact":
        pinned = {"route": "exact"}
    elif chosen.route == "transform":
        pinned = {"route": "transform", "tree": None if chosen.tree is policy else chosen.tree}
    m = workload.num_queries
    hardened = SecureRandom() if secure else None

    def release(x: np.ndarray, gen: np.random.Generator):
        return answer(workload, x, policy, epsilon, mech, rng=gen if hardened is None else hardened, **pinned)

    def sample(x: np.ndarray, n: int, gen: np.random.Generator) -> np.ndarray:
        out = np.empty((n, m))
        for i in range(n):
            out[i] = release(x, gen).answers
        return out

    probe = release(np.ones(policy.size, dtype=np.int64), np.random.default_rng(0))
    return _Runner(mech.name, chosen.label, probe.sampler, pinned.get("tree"), sample)


def _runner(mechanism, workload: Workload, policy: Policy, epsilon: float, route: str, tree, secure: bool) -> _Runner:
    if isinstance(mechanism, str):
        return _library_runner(get_mechanism(mechanism), workload, policy, epsilon, route, tree, secure)
    if isinstance(mechanism, Mechanism):
        return _library_runner(mechanism, workload, policy, epsilon, route, tree, secure)
    if route != "auto" or tree is not None or secure:
        raise ValueError("route, tree and secure apply to library mechanisms run through answer(); a callable runs as given")
    m = workload.num_queries
    if isinstance(mechanism, Batched):
        def batched(x, n, gen):
            out = np.asarray(mechanism.sample(x.copy(), n, gen), dtype=np.float64)
            if out.shape != (n, m):
                raise ValueError(f"mechanism {mechanism.name!r} returned shape {out.shape}, expected ({n}, {m})")
            return out

        return _Runner(mechanism.name, "custom", "custom", None, batched)
    if callable(mechanism):
        name = getattr(mechanism, "__name__", type(mechanism).__name__)

        def looped(x, n, gen):
            out = np.empty((n, m))
            for i in range(n):
                one = np.asarray(mechanism(x.copy(), gen), dtype=np.float64)
                if one.shape != (m,):
                    raise ValueError(f"mechanism {name!r} returned shape {one.shape}, expected ({m},)")
                out[i] = one
            return out

        return _Runner(name, "custom", "custom", None, looped)
    raise TypeError(
        "mechanism must be a name in MECHANISMS, a Mechanism, a Batched sampler or a callable (x, rng) -> answers; "
        f"got {type(mechanism).__name__}"
    )


def _statistics(sx: np.ndarray, sy: np.ndarray, true_diff: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Projections w tried as test statistics w·M(·), from the pair and the selection sample."""
    m = sx.shape[1]
    mean_diff = sx.mean(axis=0) - sy.mean(axis=0)
    var = (sx.var(axis=0) + sy.var(axis=0)) / 2
    spread = var > 0
    stats = []
    if np.any(true_diff):
        stats.append(("W(x - x')·ŷ", true_diff))
    if np.any(mean_diff):
        stats.append(("mean-difference·ŷ", mean_diff))
    if np.any(mean_diff[spread]):
        stats.append(("weighted-difference·ŷ", np.where(spread, mean_diff / np.where(spread, var, 1.0), 0.0)))
    score = np.where(spread, np.abs(mean_diff) / np.sqrt(np.where(spread, var, 1.0)), np.where(mean_diff != 0, np.inf, 0.0))
    for j in np.argsort(-score, kind="stable")[:TOP_ANSWERS]:
        unit = np.zeros(m)
        unit[j] = 1.0
        stats.append((f"ŷ[{j}]", unit))
    return stats


def _check_runs(epsilon, n_select, n_detect, confidence) -> tuple[float, int, int]:
    """Validate the claim's ε, the run counts and the confidence shared by every audit."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number strictly between 0 and 1, got {confidence!r}")
    return (check_epsilon(epsilon), check_int(n_select, "n_select", minimum=1),
            check_int(n_detect, "n_detect", minimum=1))


def _detect(event: Event, det_x: np.ndarray, det_y: np.ndarray, log_lower: np.ndarray, log_upper: np.ndarray):
    """The detection step: (ε_lower, event, P[event | numerator side], P[event | other side]) from
    the counts of ``event`` on the fresh samples."""
    n = det_x.shape[0]
    cx, cy = int(event.occurs(det_x).sum()), int(event.occurs(det_y).sum())
    num, den = (cx, cy) if event.numerator == "x" else (cy, cx)
    return max(float(log_lower[num] - log_upper[den]), 0.0), event, num / n, den / n


def _select_event(sx: np.ndarray, sy: np.ndarray, true_diff: np.ndarray, log_lower: np.ndarray, log_upper: np.ndarray) -> Event:
    """The threshold event with the largest selection-sample Clopper–Pearson log-ratio bound
    (``log_lower``, ``log_upper`` from :func:`_log_bounds`); ties (e.g. no evidence at all) go to
    the largest smoothed empirical log-ratio."""
    n = sx.shape[0]
    best, best_key = None, (-np.inf, -np.inf)
    for name, w in _statistics(sx, sy, true_diff):
        s_x, s_y = np.sort(sx @ w), np.sort(sy @ w)
        pooled = np.unique(np.concatenate([s_x, s_y]))
        if pooled.size > MAX_THRESHOLDS:
            pooled = np.unique(np.quantile(pooled, np.linspace(0, 1, MAX_THRESHOLDS), method="inverted_cdf"))
        above_x = n - np.searchsorted(s_x, pooled, side="right")
        above_y = n - np.searchsorted(s_y, pooled, side="right")
        for above, cx, cy in ((True, above_x, above_y), (False, n - above_x, n - above_y)):
            for numerator, num, den in (("x", cx, cy), ("x'", cy, cx)):
                bound = np.maximum(log_lower[num] - log_upper[den], -50.0)
                smooth = np.log((num + 1.0) / (den + 1.0))
                i = int(np.lexsort((-smooth, -bound))[0])
                key = (float(bound[i]), float(smooth[i]))
                if key > best_key:
                    best_key = key
                    best = Event(name, w, float(pooled[i]), above, numerator)
    return best


def audit(
    mechanism: str | Mechanism | Batched | Callable[[np.ndarray, np.random.Generator], np.ndarray],
    policy: Policy,
    workload: Workload | np.ndarray,
    epsilon: float,
    x: np.ndarray | None = None,
    pairs: Sequence[NeighbourPair] | None = None,
    *,
    n_select: int = 500,
    n_detect: int = 2000,
    confidence: float = 0.95,
    rng: RNGLike = 0,
    route: str = "auto",
    tree: Policy | str | None = None,
    scale_by_distance: bool = True,
    secure: bool = False,
    kinds: Sequence[str] = KINDS,
    per_kind: int = 1,
) -> AuditReport:
    """Audit a claim of (ε, policy)-Blowfish privacy empirically (see the module docstring).

    Parameters
    ----------
    mechanism : a name in ``MECHANISMS`` or a :class:`~blowfish_te.Mechanism` (run through
        :func:`blowfish_te.answer` with ``route`` and ``tree``), a :class:`Batched` sampler, or any
        callable ``(x, rng) -> answers`` claimed to be (ε, policy)-Blowfish for ``workload``
    policy, workload, epsilon : the claim audited
    x : base histogram for the generated pairs (default :func:`~blowfish_te.audit.default_histogram`;
        unused when ``pairs`` are given)
    pairs : explicit :class:`NeighbourPair` list (see :func:`make_pair`); default
        ``neighbour_pairs(policy, x, kinds=kinds, per_kind=per_kind, tree=<the route's tree>)``
    n_select, n_detect : runs per histogram for choosing the event, and for the bound
    confidence : family-wise over all pairs (Bonferroni)
    rng : seed or Generator; the same seed gives the same report
    scale_by_distance : claim ε·d_G(u, v) for each pair (group privacy); False claims ε for every
        pair (a control: pairs at distance 2 must then FAIL for a tight mechanism)
    secure : audit the hardened samplers of ``rng=None`` (exact discrete / lattice Laplace) instead
        of the seeded floating-point path; the pairs stay seeded, the releases are not reproducible

    Every distinct histogram is sampled once and shared by the pairs that contain it.
    """
    epsilon, n_select, n_detect = _check_runs(epsilon, n_select, n_detect, confidence)
    workload = as_workload(workload)
    check_compatible(workload, policy)
    gen = check_rng(rng)
    start = time.perf_counter()
    runner = _runner(mechanism, workload, policy, epsilon, route, tree, bool(secure))
    if pairs is None:
        pairs = neighbour_pairs(policy, x, kinds=kinds, per_kind=per_kind, tree=runner.tree, rng=gen)
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not isinstance(pair, NeighbourPair) or pair.x.size != policy.size:
            raise ValueError(f"pairs[{i}] must be a NeighbourPair over the {policy.size} cells of {policy.name} (see make_pair)")
        rebuilt = make_pair(policy, pair.x, pair.u, pair.v)
        if not np.array_equal(rebuilt.y, pair.y) or rebuilt.distance != pair.distance:
            raise ValueError(
                f"pairs[{i}] is inconsistent: moving a record {pair.move} gives another histogram or distance "
                f"(d_G = {rebuilt.distance:g}, pair says {pair.distance:g}); build pairs with make_pair"
            )
    if not pairs:
        raise ValueError(f"no pairs to audit: {policy.name} has no vertex pairs of the requested kind or distance")
    alpha = (1 - confidence) / (2 * len(pairs))

    samples: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    for pair in pairs:
        for hist in (pair.x, pair.y):
            if hist.tobytes() not in samples:
                samples[hist.tobytes()] = (runner.sample(hist, n_select, gen), runner.sample(hist, n_detect, gen))

    selection_bounds = _log_bounds(n_select, alpha)
    log_lower, log_upper = _log_bounds(n_detect, alpha)
    results = []
    for pair in pairs:
        (sel_x, det_x), (sel_y, det_y) = samples[pair.x.tobytes()], samples[pair.y.tobytes()]
        true_diff = np.asarray(workload.matvec((pair.x - pair.y).astype(np.float64)), dtype=np.float64)
        event = _select_event(sel_x, sel_y, true_diff, *selection_bounds)
        claimed = epsilon * pair.distance if scale_by_distance else epsilon
        results.append(PairResult(claimed, *_detect(event, det_x, det_y, log_lower, log_upper), pair=pair))
    return AuditReport(
        mechanism=runner.name,
        route=runner.route,
        sampler=runner.sampler,
        policy=policy.name,
        workload=workload.name,
        epsilon=epsilon,
        confidence=float(confidence),
        n_select=n_select,
        n_detect=n_detect,
        results=tuple(results),
        seconds=time.perf_counter() - start,
    )


def audit_histograms(
    sample: Callable[[np.ndarray, int, np.random.Generator], np.ndarray], x: ArrayLike, y: ArrayLike, epsilon: float, *,
    n_select: int = 500, n_detect: int = 2000, confidence: float = 0.95, rng: RNGLike = 0,
) -> HistogramAudit:
    """Audit the claim P[M(x) ∈ S] <= e^ε P[M(y) ∈ S] for one pair of histograms the caller
    asserts are neighbours, with the event selection and Clopper–Pearson bounds of :func:`audit`.
    ``sample(h, n, rng)`` returns n independent releases on h as an (n, m) array."""
    epsilon, n_select, n_detect = _check_runs(epsilon, n_select, n_detect, confidence)
    gen = check_rng(rng)
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise ValueError(f"x and y must be histograms of the same shape, got {x.shape} and {y.shape}")
    sel_x, det_x = sample(x, n_select, gen), sample(x, n_detect, gen)
    sel_y, det_y = sample(y, n_select, gen), sample(y, n_detect, gen)
    alpha = (1 - confidence) / 2
    mean_gap = sel_x.mean(axis=0) - sel_y.mean(axis=0)
    event = _select_event(sel_x, sel_y, mean_gap, *_log_bounds(n_select, alpha))
    return HistogramAudit(epsilon, *_detect(event, det_x, det_y, *_log_bounds(n_detect, alpha)))
