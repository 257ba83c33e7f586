"""A private choice between a data-dependent partition and the plain release, made from noisy
features of the data (Pythia: Kotsogiannis, Machanavajjhala, Hay, Miklau, SIGMOD 2017) and judged
by DAWA's own cost model (Li, Hay, Miklau, Wang, PVLDB 2014).

A private partition spends part of ε before any count is measured, and its resolution is that of
its own budget: structure finer than a few times its noise is merged, and one merged spike costs
its square in every query that cuts it. Where the data are large against the noise of the plain
release, or uneven at the partition's resolution, the plain release — with its structure read
back afterwards (:mod:`blowfish_te.smoothing`, post-processing) — is better. The features decide
which, for a small share of ε:

- the record total N (free when the policy discloses it), as the signal-to-noise scale N·ε/K;
- DAWA's cost of the data without noise (:func:`blowfish_te.partitions.dawa_cost`) with and
  without its guards, in units of K/ε (the plain release's L1 error): how much a partition could
  save at all, and how much of that its own guard gives away.

Each has L1 sensitivity 1 for a record added or removed (2 for a record moved along a policy
edge), so Laplace noise of that scale over the feature's share is private; the rule
(:func:`choose`) reads only the noisy values. Its constants were fixed by measurement on 18
DPBench-style shapes across scales and ε (``benchmarks/adaptive_report.py``), with the noise of
the features simulated, never on the data released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ._validation import check_epsilon, check_int, check_real
from .noise import add_laplace
from .partitions import dawa_costs

__all__ = ["Features", "Decision", "Rule", "HISTOGRAMS", "RANGES", "choose", "choose_for_ranges", "feature_stream", "total_share", "fit_share",
           "FIT_FLOOR", "RANGES_SCALE_LOW"]

#: The floor added to both costs when comparing them (costs near the noise are not compared).
FIT_FLOOR = 0.05


@dataclass(frozen=True)
class Rule:
    """Thresholds of :func:`choose` (each fixed by measurement, see the module docstring):
    partition below N·ε/K = ``scale_low``; between it and ``scale_high``, partition when DAWA's
    guarded cost is below ``guarded_max`` + ``guarded_slope``·log10(N·ε/K) of K/ε and
    (guarded + f)/(unguarded + f) is below ``excess_max`` - ``excess_slope``·log10(N·ε/K),
    f = ``floor`` (log10 of at least 0.1); otherwise the plain release, smoothed when
    ``smoothing_fit`` is set and the unguarded cost is below it."""

    scale_low: float
    scale_high: float
    guarded_max: float
    excess_max: float
    excess_slope: float = 0.0
    floor: float = 0.05
    smoothing_fit: float | None = None
    guarded_slope: float = 0.0


#: Histograms (1-D, or a grid along a curve), the plain release Laplace on every cell: calibrated
#: on 18 DPBench-style shapes at N·ε/K from 2e-4 to 244, the features' noise simulated, for the
#: fewest 5-seed means above 1.15 times the plain release or 1.1 times the unchecked partition's
#: wins. The cost cap grows with N·ε/K (dense HEPTH at 2.4, cap 0.88, is better smoothed; smooth
#: PATENT at 24, cap 0.98, keeps its partition) and the guards' allowance shrinks with it (a merged
#: spike's bias grows with its square).
HISTOGRAMS = Rule(scale_low=0.15, scale_high=30.0, guarded_max=0.84, guarded_slope=0.1, excess_max=1.7, excess_slope=0.15,
                  floor=0.12, smoothing_fit=1.15)
#: Prefix and range queries over a line, the plain release a hierarchy: the partition is cheap
#: there (6–8 % of ε) and wins below N·ε/K = 30 on every shape measured; above, it loses where
#: DAWA's guarded cost is high or its guards give much away (the floor tames the noise of the
#: small costs of sparse data, where this decision matters most: NETTRACE's ranges at 10⁷
#: records are 0.19 times the hierarchy's error with the partition). The excess allowance sits
#: well above that of every winning shape measured (NETTRACE 1.13, salaries 1.24–1.29 without
#: noise): at 1.35 the features' noise sent NETTRACE's ranges to the hierarchy in 15 % of
#: releases, 1.8 times the better candidate's error on average. Without noise no decision moves
#: (at 10⁷ records, ε = 0.1, no shape's excess lies between 1.32 and 1.55).
RANGES = Rule(scale_low=30.0, scale_high=math.inf, guarded_max=0.8, excess_max=1.5, floor=0.15)
#: Range queries over a grid: below this N·ε/K every data-dependent mechanism measured kept its gain.
RANGES_SCALE_LOW = 0.01
#: DAWA's split for the cost model: ε₁ = 0.25 ε for the partition, ε₂ = 0.75 ε for the totals.
_MODEL_SPLIT = 0.25


def total_share(k: int) -> float:
    """The share of ε for the record total over ``k`` cells: 40/K within [0.002, 0.01] (the noise
    of N·ε/K is then about 0.025 from K = 4096 on, a sixth of the lowest threshold; on smaller
    domains the check costs at most 4 % of ε and decides more coarsely)."""
    k = check_int(k, "k", minimum=1)
    return min(0.01, max(0.002, 40.0 / k))


def fit_share(k: int, record_moves: int = 1) -> float:
    """The share of ε for each of the two costs over ``k`` cells: 60/K within [0.005, 0.015] (the
    noise of a cost is then about 1.6 % of K/ε from K = 4096 on), 1.5 times that when neighbours
    move a record (the noise doubles, and the policy's total is usually public and free)."""
    k = check_int(k, "k", minimum=1)
    record_moves = check_int(record_moves, "record_moves", minimum=1, maximum=2)
    return min(0.015, max(0.005, 60.0 / k)) * (1.5 if record_moves == 2 else 1.0)


@dataclass(frozen=True)
class Features:
    """Noisy features of a histogram: the record total, and — when they were measured — DAWA's
    cost of the data without and with its guards, in units of K/ε; what they cost."""

    total: float
    fit: float | None
    guarded_fit: float | None
    cells: int
    epsilon: float
    spent: float
    total_public: bool

    @property
    def scale(self) -> float:
        """N·ε/K: the record total against the plain release's noise per cell."""
        return max(self.total, 0.0) * self.epsilon / self.cells

    def describe(self) -> str:
        text = f"record total {self.total:.0f} ({'public' if self.total_public else 'noisy'}), N·ε/K = {self.scale:.3g}"
        if self.fit is not None:
            text += f", DAWA's cost without noise {self.fit:.3g}"
        if self.guarded_fit is not None:
            text += f" (with guards {self.guarded_fit:.3g})"
        return text + f" of K/ε; features spent {self.spent:.3g}"


@dataclass(frozen=True)
class Decision:
    """What to release: ``"partition"`` (the data-dependent mechanism), ``"smooth"`` (the plain
    release with its structure read back) or ``"plain"``; why; the features it read."""

    route: str
    reason: str
    features: Features

    @property
    def spent(self) -> float:
        return self.features.spent


def choose(x, epsilon: float, gen, *, total: float | None = None, record_moves: int = 1, rule: Rule = HISTOGRAMS) -> Decision:
    """Measure features of histogram ``x`` (1-D, or a grid along a curve) for a release at
    ``epsilon`` and decide by ``rule``:

    1. the record total (``total`` when public, else Laplace at :func:`total_share` of ε); below
       N·ε/K = ``rule.scale_low``, partition;
    2. else DAWA's costs without and with guards, each at :func:`fit_share` of ε (only the first
       at N·ε/K >= ``rule.scale_high``, where no partition is tried);
    3. partition when the guarded cost is below ``rule.guarded_max`` and the guards' excess below
       its allowance (:class:`Rule`): the partition gives little away at its own resolution, the
       less the larger the data are against the noise (a merged structure's bias grows with its
       square);
    4. else the plain release, smoothed when the rule smooths and the unguarded cost is below
       ``rule.smoothing_fit`` (above it every cell differs from its neighbours by more than the
       noise).

    The features draw from :func:`feature_stream` (a child stream of a numpy Generator).

    Privacy: each measured feature has L1 sensitivity ``record_moves`` (1 for a record added or
    removed, 2 for one moved along a policy edge: the total, and each cost by
    :func:`~blowfish_te.partitions.dawa_cost`) and gets Laplace(``record_moves`` / its budget); the
    budgets (and whether step 2 runs) depend only on K, ε and the noisy total, so by sequential
    composition the features are (spent)-DP, resp. (spent, G)-Blowfish for every policy G.
    """
    if not isinstance(rule, Rule):
        raise TypeError(f"rule must be a selection Rule, got {type(rule).__name__}")
    gen = feature_stream(gen)
    x = np.asarray(x).reshape(-1)
    epsilon = check_epsilon(epsilon)
    record_moves = check_int(record_moves, "record_moves", minimum=1, maximum=2)
    features = _total_feature(x, epsilon, gen, total, record_moves)
    scale = features.scale
    if scale < rule.scale_low:
        return Decision("partition", f"partition: N·ε/K {scale:.3g} < {rule.scale_low:g}", features)
    guards = (0.0,) if scale >= rule.scale_high else (0.0, 1.0)
    features = _cost_features(x, features, gen, guards, record_moves)
    fit, guarded = features.fit, features.guarded_fit
    why = f"N·ε/K {scale:.3g} >= {rule.scale_high:g}"
    if guarded is not None:
        excess = (guarded + rule.floor) / max(fit + rule.floor, 1e-12)
        level = math.log10(max(scale, 0.1))
        allowed = rule.excess_max - rule.excess_slope * level
        cap = rule.guarded_max + rule.guarded_slope * level
        if guarded < cap and excess < allowed:
            return Decision("partition", f"partition: guarded cost {guarded:.3g} < {cap:.3g} and guard excess "
                                         f"{excess:.3g} < {allowed:.3g}", features)
        why = f"guarded cost {guarded:.3g} >= {cap:.3g}" if guarded >= cap else f"guard excess {excess:.3g} >= {allowed:.3g}"
    if rule.smoothing_fit is not None and fit < rule.smoothing_fit:
        return Decision("smooth", f"plain release, smoothed: {why}; unguarded cost {fit:.3g} < {rule.smoothing_fit:g}", features)
    return Decision("plain", f"plain release: {why}", features)


def feature_stream(gen):
    """The generator the features draw from: a child of a numpy Generator (spawned from its seed
    sequence, so the parent's own stream is untouched and a release with the same seed draws the
    same noise as the mechanism without its check), or a SecureRandom itself."""
    if not isinstance(gen, np.random.Generator):
        return gen
    if hasattr(gen, "spawn"):  # numpy >= 1.25
        return gen.spawn(1)[0]
    return np.random.default_rng(gen.bit_generator._seed_seq.spawn(1)[0])


def _total_feature(x: np.ndarray, epsilon: float, gen, total: float | None, record_moves: int) -> Features:
    """The record total: public, or Laplace at :func:`total_share` of ε."""
    k = x.size
    if total is not None:
        return Features(float(check_real(total, "total", minimum=0)), None, None, k, epsilon, 0.0, True)
    budget = total_share(k) * epsilon
    noisy = add_laplace(np.array([float(x.sum())]), record_moves / budget, gen, sensitivity=float(record_moves), integer=True)
    return Features(float(noisy[0]), None, None, k, epsilon, budget, False)


def _cost_features(x: np.ndarray, features: Features, gen, guards, record_moves: int) -> Features:
    """``features`` with DAWA's cost without (and, for two guards, with) guards, each at :func:`fit_share` of ε."""
    k, epsilon = x.size, features.epsilon
    model = (_MODEL_SPLIT * epsilon, (1 - _MODEL_SPLIT) * epsilon)
    budget = fit_share(k, record_moves) * epsilon
    costs = dawa_costs(x, *model, guards=guards)
    # each cost has sensitivity record_moves: the vector's L1 sensitivity is that times its length
    noisy = add_laplace(costs, record_moves / budget, gen, sensitivity=float(record_moves * costs.size), integer=False) / (k / epsilon)
    return replace(features, fit=float(noisy[0]), guarded_fit=float(noisy[1]) if noisy.size > 1 else None,
                   spent=features.spent + budget * costs.size)


def choose_for_ranges(x, epsilon: float, gen, *, fit_max: float, excess_max: float | None = None, total: float | None = None,
                      record_moves: int = 1) -> Decision:
    """The choice for range queries over a grid (rectangles), whose plain release is a hierarchy
    rather than Laplace on the cells: the record total (public, or at :func:`total_share` of ε);
    below N·ε/K = :data:`RANGES_SCALE_LOW`, partition; else DAWA's cost without guards along the
    curve ``x`` (and with them when ``excess_max`` is given), each at :func:`fit_share` of ε, and
    partition when the unguarded cost is below ``fit_max`` (and (guarded + f)/(unguarded + f) below
    ``excess_max``, f = :data:`FIT_FLOOR`), else the plain release. Rectangles sum many cells, so a
    partition loses where the data are uneven at the noise's scale (the unguarded cost is high)
    or spiky (the guards' excess is high); the thresholds of each mechanism were measured on the
    DPBench 2-D shapes (``benchmarks/adaptive_report.py``). Privacy as :func:`choose`."""
    gen = feature_stream(gen)
    x = np.asarray(x).reshape(-1)
    epsilon = check_epsilon(epsilon)
    record_moves = check_int(record_moves, "record_moves", minimum=1, maximum=2)
    fit_max = check_real(fit_max, "fit_max", minimum=0)
    features = _total_feature(x, epsilon, gen, total, record_moves)
    if features.scale < RANGES_SCALE_LOW:
        return Decision("partition", f"partition: N·ε/K {features.scale:.3g} < {RANGES_SCALE_LOW:g}", features)
    features = _cost_features(x, features, gen, (0.0,) if excess_max is None else (0.0, 1.0), record_moves)
    if features.fit >= fit_max:
        return Decision("plain", f"plain release: unguarded cost {features.fit:.3g} >= {fit_max:g}", features)
    if excess_max is not None:
        excess = (features.guarded_fit + FIT_FLOOR) / max(features.fit + FIT_FLOOR, 1e-12)
        if excess >= excess_max:
            return Decision("plain", f"plain release: guard excess {excess:.3g} >= {excess_max:g}", features)
    return Decision("partition", f"partition: unguarded cost {features.fit:.3g} < {fit_max:g}", features)
