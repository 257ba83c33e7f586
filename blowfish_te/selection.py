"""A private check before a data-dependent release: noisy features of the data (Pythia:
Kotsogiannis, Machanavajjhala, Hay, Miklau, SIGMOD 2017), a fitted model of the data-dependent
release's error against the plain release's (:class:`ErrorModel`), and the branch of lower
predicted error.

A private partition spends part of ε before any count is measured and resolves structure only at
a few times its own noise; where the data are large against the noise of the plain release, or
uneven at the partition's resolution, the plain release is better. Two features tell which, for
a few % of ε:

- the record total N (free when the policy discloses it), as the signal-to-noise scale N·ε/K;
- DAWA's cost of the data without noise over aligned dyadic tilings
  (:func:`blowfish_te.partitions.tree_cost`), in units of K/ε — the plain release's L1 error —:
  how much of the plain release's error the best partition would still carry; and the same cost
  with DAWA's guard on every block, whose excess over the first tells how much a private
  partition, which pays its guards, gives away (spikes merged, or kept at the price of runs of
  single cells).

Each has L1 sensitivity 1 for a record added or removed (2 for a record moved along a policy
edge), so Laplace noise of that scale over the feature's share is private. The model predicts
log(error ratio) of the partition over the plain branch the release would run (smoothed counts
included) from the noisy features; the release partitions where the prediction is below 1, the
point where the two branches' expected errors cross. The models' coefficients are
data-independent constants, fitted by ``benchmarks/train_selection.py`` on the DPBench shapes
over noisy copies of the features, as a release reads them (``blowfish_te/_selection_models.py``;
docs/theory.md, "Data-dependent releases that never lose much to the plain release").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_epsilon, check_int, check_real
from .noise import RandomSource, add_laplace
from .partitions import BUCKET_GUARD, tree_costs

__all__ = ["Features", "Decision", "ErrorModel", "measure", "refine_total", "decide", "choose", "error_model", "total_share",
           "cost_share", "MODEL_SPLIT", "COST_FLOOR", "WORKLOAD_CLASSES", "LOW_SCALE", "REFINED_TOTAL_SHARE"]

#: DAWA's split for the cost feature: the price of a bucket is 1/ε₂ with ε₂ = (1 - MODEL_SPLIT)·ε.
MODEL_SPLIT = 0.25
#: Added to the cost feature before its logarithm: costs below it are all "the partition is
#: nearly free" (the feature's own noise is about a hundredth of K/ε at K = 4096).
COST_FLOOR = 0.02


def total_share(k: int) -> float:
    """The share of ε for the record total over ``k`` cells: 40/K within [0.002, 0.01] (the noise
    of N·ε/K is then about 0.025 from K = 4096 on; on smaller domains the check costs at most
    2.5 % of ε and decides more coarsely)."""
    k = check_int(k, "k", minimum=1)
    return min(0.01, max(0.002, 40.0 / k))


def cost_share(k: int, record_moves: int = 1) -> float:
    """The share of ε for each of the two costs over ``k`` cells: 40/K within [0.0025, 0.01] (its
    noise is then about 2.5 % of K/ε from K = 4096 on), 1.5 times that when neighbours move a
    record (the noise doubles, and the policy's total is usually public and free)."""
    k = check_int(k, "k", minimum=1)
    record_moves = check_int(record_moves, "record_moves", minimum=1, maximum=2)
    return min(0.01, max(0.0025, 40.0 / k)) * (1.5 if record_moves == 2 else 1.0)


@dataclass(frozen=True)
class Features:
    """Noisy features of a histogram for a release at ``epsilon``: the record total and — when they
    were measured — DAWA's cost of the data without and with its guards, in units of K/ε; what
    they cost."""

    total: float
    cost: float | None
    cells: int
    epsilon: float
    spent: float
    total_public: bool
    guarded_cost: float | None = None
    #: The variance of the noisy total (0 when public).
    total_variance: float = 0.0
    #: Each feature's L1 sensitivity: 1 for a record added or removed, 2 for one moved along an edge.
    record_moves: int = 1

    @property
    def excess(self) -> float:
        """(guarded cost + f)/(cost + f), f = :data:`COST_FLOOR`: what the guards add."""
        if self.cost is None or self.guarded_cost is None:
            raise ValueError("the guards' excess needs both costs; measure them (cost=True)")
        return (max(self.guarded_cost, 0.0) + COST_FLOOR) / (max(self.cost, 0.0) + COST_FLOOR)

    @property
    def scale(self) -> float:
        """N·ε/K: the record total against the plain release's noise per cell."""
        return max(self.total, 0.0) * self.epsilon / self.cells

    def total_estimate(self) -> tuple[float, float] | None:
        """(record total, its noise variance): 0 for a public total; None when the variance of a
        noisy total is not known (features built by hand without it)."""
        if self.total_public:
            return float(self.total), 0.0
        return (float(self.total), float(self.total_variance)) if self.total_variance > 0 else None

    def describe(self) -> str:
        text = f"record total {self.total:.0f} ({'public' if self.total_public else 'noisy'}), N·ε/K = {self.scale:.3g}"
        if self.cost is not None:
            text += f", DAWA's cost {self.cost:.3g} of K/ε"
        if self.guarded_cost is not None:
            text += f" ({self.guarded_cost:.3g} with its guards)"
        return text + f"; features spent {self.spent:.3g}"


def measure(x: ArrayLike, epsilon: float, gen: RandomSource, *, total: float | None = None, record_moves: int = 1, cost: bool = True,
            total_budget: float | None = None) -> Features:
    """Noisy features of histogram ``x`` (1-D, or a grid laid out along a curve) for a release at
    ``epsilon``, drawn from ``gen``: the record total (``total`` when public, else Laplace at
    ``total_budget``, by default :func:`total_share` of ε) and, with ``cost``,
    :func:`~blowfish_te.partitions.tree_costs` at DAWA's price 1/ε₂, ε₂ = (1 - :data:`MODEL_SPLIT`)·ε,
    without and with DAWA's guard on every block (BUCKET_GUARD·2/ε₁, ε₁ = MODEL_SPLIT·ε), each with
    Laplace at :func:`cost_share` of ε.

    Privacy: each feature has L1 sensitivity ``record_moves`` (1 for a record added or removed, 2
    for one moved along a policy edge) and gets Laplace(``record_moves`` / its budget); the budgets
    depend only on K and ε, so by sequential composition the features are (spent)-DP, resp.
    (spent, G)-Blowfish for every policy G.
    """
    x = np.asarray(x).reshape(-1)
    epsilon = check_epsilon(epsilon)
    record_moves = check_int(record_moves, "record_moves", minimum=1, maximum=2)
    k = x.size
    if total is not None:
        features = Features(float(check_real(total, "total", minimum=0)), None, k, epsilon, 0.0, True, record_moves=record_moves)
    else:
        budget = total_share(k) * epsilon if total_budget is None else check_real(total_budget, "total_budget", 0, epsilon,
                                                                                  exclusive=True)
        noisy = add_laplace(np.array([float(x.sum())]), record_moves / budget, gen, sensitivity=float(record_moves),
                            integer=True)
        features = Features(float(noisy[0]), None, k, epsilon, budget, False, total_variance=2.0 * (record_moves / budget) ** 2,
                            record_moves=record_moves)
    if not cost:
        return features
    budget = cost_share(k, record_moves) * epsilon
    price, guard = 1.0 / ((1 - MODEL_SPLIT) * epsilon), BUCKET_GUARD * 2.0 / (MODEL_SPLIT * epsilon)
    values = tree_costs(x, [price, price + guard])
    # each cost has sensitivity record_moves: the pair's L1 sensitivity is twice that, at twice the budget
    noisy = add_laplace(values, record_moves / budget, gen, sensitivity=2.0 * record_moves, integer=False) / (k / epsilon)
    return replace(features, cost=float(noisy[0]), guarded_cost=float(noisy[1]), spent=features.spent + 2 * budget)


#: A smoothed plain release buys a second record total (:func:`refine_total`) below this noisy N·ε/K …
LOW_SCALE = 0.15
#: … at this share of ε.
REFINED_TOTAL_SHARE = 0.1


def refine_total(features: Features, x: ArrayLike, gen: RandomSource) -> Features:
    """``features`` with a second, independent noisy record total of histogram ``x`` merged in (by
    inverse variance) where it pays, at :data:`REFINED_TOTAL_SHARE` of ε: when the total is not
    public, the noisy N·ε/K reads below :data:`LOW_SCALE` and the smoothed counts' own sum is
    noisier than one count per cell (its variance K·2/ε² over K² cells: ε < √(2/K)). A smoothed
    release whose buckets are long (flat or nearly empty data) then takes its mass from this
    total rather than from the sum of K Laplace draws (:func:`blowfish_te.smoothing.smooth`).
    Measured on the DPBench 1-D shapes at 10³ records and ε = 0.01: the smoothed counts 1.04–1.08
    times a uniform spread of the true total on the flat ones, where they were 1.7–2.1 times;
    at 10⁴ records and ε = 0.01 0.8–1.1 times the error without it.

    Privacy: the second total has the features' sensitivity (``record_moves``) and Laplace noise of
    scale ``record_moves``/(share·ε); whether it is bought depends on the first noisy total, ε and
    K only, so by (adaptive) sequential composition the features spend their first budget plus
    this share, and the release that follows gets the rest.
    """
    if not isinstance(features, Features):
        raise TypeError(f"features must be Features, got {type(features).__name__}")
    if (features.total_public or features.total_variance <= 0 or features.scale >= LOW_SCALE
            or features.epsilon**2 * features.cells >= 2.0):
        return features
    record_moves = features.record_moves
    budget = REFINED_TOTAL_SHARE * features.epsilon
    variance = 2.0 * (record_moves / budget) ** 2
    second = float(add_laplace(np.array([float(np.sum(x))]), record_moves / budget, gen, sensitivity=float(record_moves),
                               integer=True)[0])
    merged = 1.0 / (1.0 / features.total_variance + 1.0 / variance)
    total = merged * (features.total / features.total_variance + second / variance)
    return replace(features, total=total, total_variance=merged, spent=features.spent + budget)


@dataclass(frozen=True)
class ErrorModel:
    """A data-dependent release's error over the plain release's, both at the same ε, predicted
    from noisy :class:`Features`: log10(ratio) = c₀ + c₁·s + c₂·c + c₃·s·c + c₄·s² + c₅·c² +
    c₆·g + c₇·s·g, with s = log10(N·ε/K) clipped to [``scale_range``], c = log10(cost +
    :data:`COST_FLOOR`), cost in units of K/ε clipped to [0, 2], and g = log10 of the guards'
    excess (:attr:`Features.excess`) clipped to [0, ``excess_max``]. Fitted by least squares on
    DPBench shapes across scales and ε (``benchmarks/train_selection.py``); ``scale_range`` and
    ``excess_max`` bound the s and g it was fitted on (a quadratic surface is not extrapolated: a
    larger value reads as the largest).

    With ``cost_bound`` (histogram workloads) the prediction is at least the cost feature: DAWA's
    cost in units of K/ε is the L1 error of the best partition without noise over the plain
    release's L1 error K/ε (Li et al., PVLDB 2014, the cost of a bucket is its deviation plus
    the noise of its total), and no private partition beats that optimum.

    ``threshold``: the check partitions where the prediction is below it. 1 is where the two
    branches' expected errors cross; a model whose fit errs on shapes it was not fitted on has it
    lowered to the value that made the cheapest decisions over shapes held out one at a time
    (``benchmarks/train_selection.py --thresholds``), so that it partitions only where it predicts
    a gain larger than its own error there."""

    name: str
    coefficients: tuple[float, ...]
    scale_range: tuple[float, float] = (-1.5, 4.0)
    excess_max: float = 2.0
    cost_bound: bool = False
    threshold: float = 1.0

    def terms(self, features: Features) -> tuple[float, ...]:
        """The surface's terms (1, s, c, s·c, s², c², g, s·g) for ``features``."""
        if features.cost is None or features.guarded_cost is None:
            raise ValueError(f"the {self.name} reads the cost features; measure them (cost=True)")
        s = min(max(math.log10(max(features.scale, 1e-12)), self.scale_range[0]), self.scale_range[1])
        c = math.log10(min(max(features.cost, 0.0), 2.0) + COST_FLOOR)
        g = min(max(math.log10(features.excess), 0.0), self.excess_max)
        return 1.0, s, c, s * c, s * s, c * c, g, s * g

    def log_ratio(self, features: Features) -> float:
        return float(sum(a * t for a, t in zip(self.coefficients, self.terms(features), strict=True)))

    def predict(self, features: Features) -> float:
        """The predicted ratio err(data-dependent) / err(plain)."""
        ratio = 10.0 ** self.log_ratio(features)
        return max(ratio, features.cost) if self.cost_bound else ratio


#: The workload classes a model is fitted for: ``"cells"`` (histogram-like: a hierarchy gains
#: little over Laplace on the cells) and ``"ranges"`` (prefixes, ranges, rectangles).
WORKLOAD_CLASSES = ("cells", "ranges")


def error_model(mechanism: str, ndim: int, workload_class: str, *, calibrated: bool = False) -> ErrorModel:
    """The fitted model of ``mechanism``'s release on a ``ndim``-dimensional domain for a workload
    of ``workload_class`` (:data:`WORKLOAD_CLASSES`). By default the model its check decides with
    (where a cost-weighted refinement made cheaper decisions, only the side of 1 it predicts is
    fitted); with ``calibrated`` the least-squares fit of the same surface, whose magnitudes can
    be compared across mechanisms (:func:`choose`), and its decision threshold is 1."""
    from ._selection_models import COEFFICIENTS, EXCESS_MAX, LEAST_SQUARES, SCALE_RANGES, THRESHOLDS

    if workload_class not in WORKLOAD_CLASSES:
        raise ValueError(f"workload_class must be one of {WORKLOAD_CLASSES}, got {workload_class!r}")
    key = (mechanism, int(ndim), workload_class)
    if key not in COEFFICIENTS:
        known = ", ".join(f"{m} ({d}-D {c})" for m, d, c in sorted(COEFFICIENTS))
        raise ValueError(f"no error model is fitted for {mechanism} on {ndim}-D {workload_class} workloads; fitted: {known}")
    coefficients = LEAST_SQUARES.get(key, COEFFICIENTS[key]) if calibrated else COEFFICIENTS[key]
    return ErrorModel(f"{mechanism}'s {ndim}-D {workload_class} model", coefficients, SCALE_RANGES[ndim], EXCESS_MAX,
                      cost_bound=workload_class == "cells", threshold=1.0 if calibrated else THRESHOLDS.get(key, 1.0))


@dataclass(frozen=True)
class Decision:
    """What to release: ``"partition"`` (the data-dependent release), ``"plain"``, or — from
    :func:`choose` — the name of the data-dependent release chosen; why; the predicted error ratio
    (None when nothing was predicted) and the features it read."""

    route: str
    reason: str
    predicted: float | None
    features: Features

    @property
    def spent(self) -> float:
        return self.features.spent


def decide(features: Features, model: ErrorModel) -> Decision:
    """Partition when ``model`` predicts the data-dependent release below its threshold times the
    plain release's error (1: the branches' expected errors cross there; lower for a model whose
    fit errs on shapes it was not fitted on, :class:`ErrorModel`), else the plain release."""
    if not isinstance(model, ErrorModel):
        raise TypeError(f"model must be an ErrorModel, got {type(model).__name__}")
    ratio = model.predict(features)
    below = "" if model.threshold == 1.0 else f" (it partitions below {model.threshold:g})"
    if ratio < model.threshold:
        return Decision("partition", f"partition: {model.name} predicts {ratio:.3g} × the plain release's error{below}",
                        ratio, features)
    return Decision("plain", f"plain release: {model.name} predicts the partition at {ratio:.3g} × its error{below}",
                    ratio, features)


def choose(features: Features, models: dict[str, ErrorModel], deciders: dict[str, ErrorModel] | None = None) -> Decision:
    """Pythia's choice among several data-dependent releases (Kotsogiannis et al., SIGMOD 2017):
    each model in ``models`` (name → calibrated :class:`ErrorModel`) predicts its release's error
    over the plain release's from the same noisy ``features``; the release of lowest prediction
    runs where its decision model (``deciders[name]``, by default the same model) predicts below
    its threshold (the decision's ``route`` is its name), else the plain release. The models must share
    their plain release (range workloads, where it is the analytic error of ``auto``'s strategy
    for every mechanism), so that their predictions compare."""
    deciders = models if deciders is None else deciders
    if not models or not all(isinstance(m, ErrorModel) for m in (*models.values(), *deciders.values())) \
            or not set(models) <= set(deciders):
        raise TypeError(f"models must map names to ErrorModels, at least one, each with a decider; got {models!r}")
    predicted = {name: model.predict(features) for name, model in models.items()}
    best = min(predicted, key=predicted.get)
    decided = deciders[best].predict(features)
    listing = ", ".join(f"{name} {ratio:.3g}" for name, ratio in predicted.items())
    if decided < deciders[best].threshold:
        return Decision(best, f"{best}: the lowest predicted error over the plain release's ({listing})", decided, features)
    return Decision("plain", f"plain release: {best}, the lowest predicted error over its own ({listing}), is predicted "
                    f"at {decided:.3g} × it by its check's model", decided, features)
