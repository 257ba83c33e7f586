"""Routes: the ways a mechanism answers a workload under a policy, their one result shape
(:class:`Outcome`), the planner that lists and ranks them (:func:`plan_routes`), :class:`Plan`
and :class:`Release`.

Routes (Haney, Machanavajjhala, Ding, PVLDB 2015; He, Machanavajjhala, Ding, SIGMOD 2014):

- ``"transform"`` (:class:`TransformRoute`): run the mechanism on (W_T, x_T) of the exact
  transform of a forest T — the policy itself when it is a forest, else a spanning tree with
  maximum stretch ℓ, at ε/ℓ. Any ε-DP mechanism becomes (ε, G)-Blowfish this way, data-dependent
  ones included.
- ``"exact"`` (:class:`ExactRoute`): a linear data-independent mechanism with Laplace noise
  calibrated to Δ_G of its strategy, computed from the policy's edges; any policy.
- ``"native"`` (:class:`NativeRoute`): a mechanism that reads the policy itself.
- ``"choice"`` (:class:`ChoiceRoute`): the routes of the mechanisms a chooser (``auto``) compares.

A mechanism class declares the routes it gets in its ``routes`` attribute (a tag, as
scikit-learn's); each route class lists its own candidates for a request and executes one with
``(x, rng)`` only. With route ``"auto"`` the candidate of lowest analytic expected error is
chosen. The choice depends only on the workload, policy, ε and mechanism — never on the data —
so it costs no privacy. This module sits below the mechanisms: it knows them only through their
tags and methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, cast

import numpy as np
from numpy.typing import ArrayLike

from . import trees as tree_lib
from ._cache import IdentityCache
from ._validation import check_histogram
from .forest import CyclicPolicyError
from .noise import RandomSource, RNGLike, check_rng
from .policies import Policy
from .secure import SecureRandom
from .transform import TreeTransform, transform
from .workloads import MarginalCounts, Workload

__all__ = ["ROUTES", "Candidate", "ChoiceRoute", "Chooser", "ExactRoute", "MechanismTags",
           "NativeRoute", "Outcome", "Plan", "Release", "Request", "RoutedMechanism", "TransformRoute", "plan_routes"]

#: The routes a caller may request.
ROUTES = ("auto", "transform", "exact")
#: Above this many cells only mechanisms that need no array of the domain's size are planned
#: where the domain is too large for a histogram (see ``handles_large_domain``).
LARGE_DOMAIN_CELLS = 2**26
#: Above this many cells a mechanism that plans without arrays of the domain's size (marginal
#: strategies) is planned in its exact route only: a transform needs K-sized arrays and trees.
STRUCTURED_CELLS = 2**16


@dataclass(frozen=True)
class Outcome:
    """What a mechanism or a route returns: the answers, the component totals disclosed exactly,
    the L1 sensitivity Δ of what was measured and the Laplace scale drawn (the largest over the
    stages of a multi-stage mechanism; None where not reported), notes on choices made while
    releasing, and for releases under public constraints their counts and the answers before
    constrained inference."""

    answers: np.ndarray
    component_totals: dict = field(default_factory=dict)
    sensitivity: float | None = None
    noise_scale: float | None = None
    notes: str = ""
    public_counts: dict | None = None
    unconstrained_answers: np.ndarray | None = None


@dataclass(frozen=True)
class MechanismTags:
    """What a mechanism declares about itself: the planner, the selectors and the auditor ask
    these instead of its class. Built from the class attributes of the same names, each class
    declaring its own and inheriting the rest along its MRO (as scikit-learn builds an
    estimator's tags); read through :attr:`Mechanism.tags <blowfish_te.mechanisms.Mechanism.tags>`."""

    #: The routes it gets (keys of :data:`ROUTE_CLASSES`): ``"transform"`` for any ε-DP
    #: algorithm, ``"exact"`` for a linear data-independent one, ``"native"`` for one that reads
    #: the policy, ``"choice"`` for one that compares others.
    routes: tuple[str, ...]
    #: Its expected error is analytic (data-independent, possibly None where it cannot be
    #: computed): the planner ranks routes and trees by it, ``auto`` compares it.
    analytic_error: bool
    #: A linear strategy answered by least squares: Laplace noise calibrated to Δ_G of its
    #: strategy under any policy (the exact route), and the plain release of the data-dependent ones.
    linear: bool
    #: Its release is x plus one independent Laplace draw per cell, so structure can be read back
    #: from it (:mod:`blowfish_te.smoothing`).
    laplace_on_cells: bool
    #: It models x as records spread over cells: it runs under DP policies only.
    models_records: bool
    #: It runs on a 2-D grid only.
    needs_grid: bool
    #: It answers marginal workloads only.
    needs_marginals: bool
    #: It tunes its own plan and predicts the time that takes (held to ``auto``'s time budget).
    tunes_plan: bool
    #: The noise sampler it draws from with a numpy Generator.
    sampler: str
    #: It declares a fitted model of its data-dependent release's error over the plain release's
    #: (``model(workload, calibrated=False)``: an :class:`~blowfish_te.selection.ErrorModel`, or None
    #: for a workload it has none for) and runs that release without its own check
    #: (``unchecked()``): ``adaptive`` chooses among such mechanisms.
    predicts_error: bool

    @classmethod
    def of(cls, mechanism_class: type) -> MechanismTags:
        """The tags a mechanism class declares (class attributes, inherited along its MRO)."""
        return cls(**{f.name: getattr(mechanism_class, f.name) for f in fields(cls)})


class RoutedMechanism(Protocol):
    """What the planner and every route may ask of a mechanism (the routes know mechanisms only
    through this; :class:`blowfish_te.mechanisms.Mechanism` implements it): its name and
    :class:`MechanismTags`; whether it serves a policy; its analytic error and its release on
    validated arguments, for unit changes (``policy`` None: what a transform route runs on
    (W_T, x_T)) or under a policy (the exact and native routes)."""

    name: str

    @property
    def tags(self) -> MechanismTags: ...

    def registry(self) -> Mapping[str, Any]: ...

    def serves(self, workload: Workload, policy: Policy) -> bool: ...

    def handles_large_domain(self, workload: Workload) -> bool: ...

    def total_source(self) -> str | None: ...

    def expected_error(self, workload: Workload, epsilon: float, policy: Policy | None = None) -> float | None: ...

    def measure(self, workload: Workload, x: np.ndarray, epsilon: float, gen: RandomSource,
                policy: Policy | None = None) -> Outcome: ...

    def marginals_read(self, workload: Workload, policy: Policy | None = None) -> tuple[tuple[int, ...], ...] | None: ...

    def _cache(self, label: str) -> IdentityCache: ...


class Chooser(RoutedMechanism, Protocol):
    """A mechanism tagged ``"choice"``: it lists the (mechanism, route) pairs it compares, and a note."""

    def choices(self, workload: Workload, policy: Policy | None = None,
                route: str = "auto") -> tuple[list[tuple[Any, str]], str]: ...


@dataclass(frozen=True)
class Request:
    """What the caller asked for: the workload, policy, ε, mechanism, requested route and forest
    (a resolved forest policy, or None)."""

    workload: Workload
    policy: Policy
    epsilon: float
    mechanism: RoutedMechanism
    route: str = "auto"
    tree: Policy | None = None
    #: The lowest per-query MSE of candidates compared outside this plan (a chooser's other
    #: mechanisms): transform routes whose lower bound exceeds it are skipped, as those of the
    #: plan's own routes are.
    bound: float | None = None


@dataclass(frozen=True)
class Candidate:
    """A way to answer — a route — with the forest of the transform route, its stretch ℓ and the
    analytic expected per-query MSE (None for mechanisms without one). It holds what it runs
    (mechanism, workload, policy, ε), so :meth:`execute` needs only the data and a generator."""

    route: str = ""
    tree: Policy | None = None
    stretch: int | None = None
    expected_mse: float | None = None
    #: Set on a transform route skipped without computing its error: a lower bound on its
    #: per-query MSE that already exceeded a candidate's error (see :func:`transform_floor`).
    floor: float | None = None
    # always set by the route that lists the candidate (the defaults only order the fields)
    mechanism: RoutedMechanism = field(default=cast(RoutedMechanism, None), compare=False, repr=False)
    workload: Workload = field(default=cast(Workload, None), compare=False, repr=False)
    policy: Policy = field(default=cast(Policy, None), compare=False, repr=False)
    epsilon: float = field(default=cast(float, None), compare=False, repr=False)

    @classmethod
    def candidates(cls, request: Request, found: list[Candidate]) -> tuple[list[Candidate], str]:
        """This route's candidates for ``request`` and why (none when the request excludes it);
        ``found`` holds the candidates of the routes listed before. Raises ValueError when the
        request asks for this route and it cannot serve it."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        return self.route if self.tree is None else f"transform[{self.tree.name}, stretch {self.stretch}]"

    @property
    def outcome_text(self) -> str:
        """The candidate's expected per-query MSE, 'n/a', or why it was skipped."""
        if self.floor is not None:
            return f"skipped (per-query MSE >= {self.floor:.6g})"
        return "n/a" if self.expected_mse is None else format(self.expected_mse, ".6g")

    def check(self, x: np.ndarray) -> None:
        """Refuse a validated histogram this route cannot release (before any noise is drawn)."""

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        """Release the workload on the validated histogram ``x`` (or, in the exact route of a
        mechanism that reads marginals only, their counts) this way (spends ε once)."""
        raise NotImplementedError


def _histogram(x: np.ndarray | MarginalCounts, route: str) -> np.ndarray:
    """``x`` when it is a histogram: only an exact route reads marginal counts instead."""
    if isinstance(x, MarginalCounts):
        raise TypeError(f"route {route} releases from the histogram, not from marginal counts")
    return x


def _per_query(total: float | None, workload: Workload) -> float | None:
    return None if total is None else total / workload.num_queries


def _analytic(compute: Callable[[], float | None]) -> float | None:
    """An expected error, or None when the mechanism cannot compute one for this size."""
    try:
        return compute()
    except NotImplementedError:
        return None


@dataclass(frozen=True)
class NativeRoute(Candidate):
    """The mechanism reads the policy itself (a ``NativeMechanism``: tag ``"native"``)."""

    route: str = "native"

    @classmethod
    def candidates(cls, request: Request, found: list[Candidate]) -> tuple[list[Candidate], str]:
        mech = request.mechanism
        if request.tree is not None or request.route != "auto":
            raise ValueError(f"mechanism {mech.name!r} is Blowfish-native: it picks its own measurements (route 'auto', no tree)")
        mech.serves(request.workload, request.policy)
        expected = _analytic(lambda: mech.expected_error(request.workload, request.epsilon, policy=request.policy))
        return ([cls(expected_mse=_per_query(expected, request.workload), mechanism=mech, workload=request.workload,
                     policy=request.policy, epsilon=request.epsilon)],
                f"{mech.name} is a Blowfish-native mechanism for this policy")

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        return self.mechanism.measure(self.workload, _histogram(x, self.label), self.epsilon, gen, policy=self.policy)


@dataclass(frozen=True)
class ExactRoute(Candidate):
    """A linear mechanism with Laplace noise calibrated to Δ_G of its strategy (tag ``"exact"``)."""

    route: str = "exact"

    @classmethod
    def candidates(cls, request: Request, found: list[Candidate]) -> tuple[list[Candidate], str]:
        if request.tree is not None:
            if request.route == "exact":
                raise ValueError("tree= applies to the transform route, not to route='exact'")
            return [], ""
        if request.route == "transform":
            return [], ""
        mech = request.mechanism
        workload, policy, epsilon = request.workload, request.policy, request.epsilon
        expected = _analytic(lambda: mech.expected_error(workload, epsilon, policy=policy))
        if request.route == "exact":
            reason = "route='exact' requested"
        elif policy.is_unbounded_dp:
            reason = "auto: under unbounded DP the transform is the identity, so both routes have this error; exact publishes no totals"
        else:
            reason = "auto: lowest analytic expected error"
        return [cls(expected_mse=_per_query(expected, workload), mechanism=mech, workload=workload, policy=policy,
                    epsilon=epsilon)], reason

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        # the marginal counts of a mechanism that reads marginals only (Plan.marginals_read), else the histogram
        outcome = self.mechanism.measure(self.workload, cast(np.ndarray, x), self.epsilon, gen, policy=self.policy)
        if outcome.sensitivity == 0 and isinstance(x, np.ndarray):  # exact functions of the component totals: say so
            return replace(outcome, component_totals=policy_totals(self.policy, x))
        return outcome


def transform_floor(workload: Workload, tr: TreeTransform, epsilon: float) -> float | None:
    """A lower bound on the per-query MSE of every unbiased linear mechanism on (W_T, x_T) at ε/ℓ:
    2 ℓ²/ε² · mean over queries of ‖w_{T,q}‖∞². For a strategy B with column L1 norms <= Δ and
    a reconstruction R with R B = W_T, every w_{T,q,j} = b_jᵀ r_q, so |w_{T,q,j}| <= Δ ‖r_q‖₂ and
    the query's variance 2 (Δ ℓ/ε)² ‖r_q‖₂² is at least 2 ℓ² ‖w_{T,q}‖∞²/ε². None when W_T has
    no cheap sparse form."""
    if tr.num_edges == 0:
        return None
    rows = tr.workload(workload).sparse_rows()
    if rows is None:
        return None
    peaks = np.asarray(abs(rows).max(axis=1).todense(), dtype=np.float64).reshape(-1)
    return 2.0 * (tr.stretch / epsilon) ** 2 * float(np.mean(peaks**2))


@dataclass(frozen=True)
class TransformRoute(Candidate):
    """The mechanism on (W_T, x_T) of the transform of the forest ``tree`` at ε/ℓ, plus the offset
    of the disclosed component totals (tag ``"transform"``)."""

    route: str = "transform"

    @classmethod
    def candidates(cls, request: Request, found: list[Candidate]) -> tuple[list[Candidate], str]:
        mech, workload, policy, epsilon = request.mechanism, request.workload, request.policy, request.epsilon
        if request.route == "exact":
            return [], ""
        if (request.route == "auto" and request.tree is None and "exact" in mech.tags.routes
                and policy.size > STRUCTURED_CELLS and mech.handles_large_domain(workload)):
            return [], ""  # the exact route needs no K-sized array; a transform would
        if mech.tags.models_records and not policy.is_differential_privacy:
            works = ", ".join(sorted(name for name, cls in mech.registry().items() if not MechanismTags.of(cls).models_records))
            raise ValueError(
                f"mechanism {mech.name!r} models the data as records spread over the cells, but under {policy.name} it "
                "would run on the transformed counts x_G, which are not records, and answer no better than the uniform "
                f"estimate; run it under a DP policy (complete or unbounded), or use one of: {works}"
            )
        if request.tree is not None:
            return [cls.build(request, request.tree)], f"tree {request.tree.name} given by the caller"
        if policy.is_forest:
            if request.route == "auto" and "exact" in mech.tags.routes and policy.is_unbounded_dp:
                return [], ""  # the exact route has the same error and publishes no totals
            return [cls.build(request, None)], "the policy is a forest: its exact transform"
        if not mech.tags.analytic_error:
            raise CyclicPolicyError(
                f"{policy.name} has cycles and mechanism {mech.name!r} is data-dependent (no exact route, no "
                "analytic error to choose a tree by): pass a spanning tree, e.g. tree='bfs' or a forest policy, "
                "to run it at epsilon / stretch (an (ε/ℓ, T)-Blowfish mechanism is (ε, G)-Blowfish for ℓ the stretch)"
            )
        listed: list[Candidate] = []
        for t in tree_lib.candidates(policy).values():
            known = [c.expected_mse for c in found + listed if c.expected_mse is not None]
            known += [] if request.bound is None else [request.bound]
            tr = transform(policy, t)
            floor = transform_floor(workload, tr, epsilon) if known else None
            if floor is not None and floor > min(known) * (1 + 1e-9):
                listed.append(cls(tree=tr.tree, stretch=tr.stretch, floor=floor, mechanism=mech, workload=workload,
                                  policy=policy, epsilon=epsilon))
            else:
                listed.append(cls.build(request, t))
        return listed, "route='transform': the candidate tree with the lowest analytic expected error"

    @classmethod
    def build(cls, request: Request, tree: Policy | None) -> TransformRoute:
        """The candidate through ``tree`` (the policy itself when None), with its analytic error."""
        mech, workload, epsilon = request.mechanism, request.workload, request.epsilon
        tr = transform(request.policy, tree)
        expected = None
        if mech.tags.analytic_error:
            expected = 0.0 if tr.num_edges == 0 else _analytic(lambda: mech.expected_error(tr.workload(workload), epsilon / tr.stretch))
        return cls(tree=tr.tree, stretch=tr.stretch, expected_mse=_per_query(expected, workload), mechanism=mech,
                   workload=workload, policy=request.policy, epsilon=epsilon)

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        mech, workload, policy = self.mechanism, self.workload, self.policy
        x = _histogram(x, self.label)
        if policy.is_unbounded_dp:
            # unbounded DP: W_T = W and x_T = x cell by cell, so the mechanism sees the grid itself
            return mech.measure(workload, x, self.epsilon, gen)
        tr = transform(policy, None if self.tree is policy else self.tree)
        x_t, component_totals = tr.data_and_totals(x)
        offset = tr.offset(workload, component_totals)
        totals = dict(zip(tr.roots.tolist(), component_totals.tolist()))
        transformed = tr.workload(workload) if tr.num_edges else None
        if transformed is None or transformed.column_norms().max() == 0:
            # W_T = 0: the answers are the disclosed totals' offset; no mechanism, no noise
            return Outcome(offset.astype(np.float64), totals, 0.0, 0.0)
        outcome = mech.measure(transformed, x_t, self.epsilon / tr.stretch, gen)
        return replace(outcome, answers=checked_answers(outcome.answers, workload.num_queries, mech.name) + offset,
                       component_totals=totals)


@dataclass(frozen=True)
class StoredCandidate(Candidate):
    """A candidate compared when a choice was first planned, read back from the plan store with
    its per-query MSE at this ε: listed in the plan, never executed."""

    stored_label: str = ""

    @property
    def label(self) -> str:
        return self.stored_label

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        raise RuntimeError("a stored candidate is listed in the plan, never executed")


class ChoiceRoute:
    """The candidates of every (mechanism, route) a chooser compares (tag ``"choice"``: the
    mechanism's ``choices(workload, policy, route)`` lists them), each executed by its own
    mechanism.

    A choice reads the workload, the policy and ε only, and every analytic error scales as 1/ε²,
    so it is planned once per (chooser, workload, policy, route) and kept in the strategy store
    (:func:`~blowfish_te.strategies.store.choice_key`; ``BLOWFISH_TE_CACHE_DIR``): a later plan,
    in any process and at any ε, plans the winner alone and lists the others with their stored
    errors. The winner is planned anew and must give its stored error (else everything is
    planned again), so a stale or damaged record costs time, never a wrong release. Choices that
    compare a plug-in (a mechanism from outside the library) are not kept."""

    @classmethod
    def candidates(cls, request: Request, found: list[Candidate]) -> tuple[list[Candidate], str]:
        from .strategies.store import choice_key, default_store

        mech = cast(Chooser, request.mechanism)  # tagged "choice"
        pairs, note = mech.choices(request.workload, request.policy, request.route)
        store = default_store()
        # a plug-in's code can change under the same name: choices that compare one are not kept
        library = all(type(m).__module__.startswith("blowfish_te.") for m in [mech, *(sub for sub, _ in pairs)])
        key = None if request.tree is not None or not library else choice_key(mech, request.workload, request.policy,
                                                                               request.route)
        stored = _stored_choice(request, pairs, store.load_record(key))
        if stored is not None:
            return stored
        per_pair: dict[int, tuple[Candidate, ...]] = {}
        skipped: dict[int, str] = {}
        bound: float | None = None
        # the optimised strategy first: usually the best, it bounds the others' transform routes
        order = sorted(range(len(pairs)), key=lambda i: pairs[i][0].name != "optimized")
        for i in order:
            sub, sub_route = pairs[i]
            try:
                if bound is None:
                    sub_plan = plan_routes(request.workload, request.policy, request.epsilon, sub, sub_route, request.tree)
                else:  # bounded by the others: not the mechanism's own plan, so not kept as one
                    sub_plan = _plan(replace(request, mechanism=sub, route=sub_route, bound=bound))
            except (ValueError, TypeError) as err:  # a native mechanism for other policies, a route it lacks
                skipped[i] = f"{sub.name} ({str(err).split(';')[0]})"
                continue
            per_pair[i] = sub_plan.considered
            errors = [c.expected_mse for c in sub_plan.considered if c.expected_mse is not None]
            if errors:
                bound = min(errors) if bound is None else min(bound, *errors)
        listed = [c for i in sorted(per_pair) for c in per_pair[i]]  # in the compared order: ties go to the first
        not_applicable = [skipped[i] for i in sorted(skipped)]
        if not listed:
            raise ValueError(f"no candidate mechanism of {mech.name} applies here: {'; '.join(not_applicable)}")
        reason = f"{mech.name}: lowest analytic expected error over {', '.join(m.name for m, _ in pairs)}; {note}"
        if not_applicable:
            reason += "; not applicable: " + ", ".join(not_applicable)
        store.save_record(key, _choice_record(request, listed, reason))
        return listed, reason


def _at_unit(value: float | None, epsilon: float) -> float | None:
    return None if value is None else value * epsilon**2


def _choice_record(request: Request, listed: list[Candidate], reason: str) -> dict[str, Any]:
    """What a later plan needs to list this choice: the winner (its mechanism, route and tree)
    and every candidate's label and per-query MSE (or floor) at ε = 1."""
    winner = sorted(listed, key=rank_key)[0]
    return {
        "winner": {"mechanism": winner.mechanism.name, "route": winner.route,
                   "tree": None if winner.tree is None else winner.tree.name, "label": winner.label,
                   "mse": _at_unit(winner.expected_mse, request.epsilon)},
        "candidates": [{"mechanism": c.mechanism.name, "route": c.route, "label": c.label, "stretch": c.stretch,
                        "mse": _at_unit(c.expected_mse, request.epsilon), "floor": _at_unit(c.floor, request.epsilon)}
                       for c in listed],
        "reason": reason,
    }


def _stored_choice(request: Request, pairs: list[tuple[Any, str]],
                  record: dict[str, Any] | None) -> tuple[list[Candidate], str] | None:
    """(candidates, reason) from a stored choice: the winner planned anew (it must give its stored
    error), the others listed as stored; None when there is no usable record."""
    if record is None:
        return None
    try:
        winner = record["winner"]
        subs = {sub.name: sub for sub, _ in pairs}
        sub = subs[winner["mechanism"]]
        route = {"exact": "exact", "native": "auto", "transform": "transform"}[winner["route"]]
        tree = None
        if winner["route"] == "transform" and not request.policy.is_forest:
            trees = [t for t in tree_lib.candidates(request.policy).values()
                     if transform(request.policy, t).tree.name == winner["tree"]]
            tree = trees[0]
        chosen = plan_routes(request.workload, request.policy, request.epsilon, sub, route, tree).chosen
        expected = _at_unit(chosen.expected_mse, request.epsilon)
        if chosen.label != winner["label"] or (expected is None) != (winner["mse"] is None):
            return None
        if expected is not None and not math.isclose(expected, float(winner["mse"]), rel_tol=1e-9):
            return None
        listed = [chosen]
        scale = request.epsilon**-2
        for c in record["candidates"]:
            if c["mechanism"] == winner["mechanism"] and c["label"] == winner["label"]:
                continue
            mse, floor = c["mse"], c["floor"]
            listed.append(StoredCandidate(
                route=str(c["route"]), stretch=c["stretch"], expected_mse=None if mse is None else float(mse) * scale,
                floor=None if floor is None else float(floor) * scale, mechanism=subs[c["mechanism"]],
                workload=request.workload, policy=request.policy, epsilon=request.epsilon, stored_label=str(c["label"])))
        return listed, f"{record['reason']}; planned before, read from the plan store (the winner planned anew)"
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


#: Route classes by the tag a mechanism declares in ``routes``.
ROUTE_CLASSES: dict[str, type[Candidate] | type[ChoiceRoute]] = {
    "exact": ExactRoute, "transform": TransformRoute, "native": NativeRoute, "choice": ChoiceRoute}


def rank_key(c: Candidate) -> tuple:
    """Lowest expected error first (to 9 significant digits); on ties the exact route, which
    publishes no totals, then the smaller stretch."""
    mse = np.inf if c.expected_mse is None else float(f"{c.expected_mse:.9g}")
    return (mse, c.route != "exact", c.stretch or 0)


def plan_routes(workload: Workload, policy: Policy, epsilon: float, mechanism: RoutedMechanism, route: str = "auto",
                tree: Policy | str | None = None) -> Plan:
    """The :class:`Plan` of ``mechanism`` (an instance) for validated arguments: every candidate
    of the routes the mechanism declares, ranked. ``tree`` is a forest policy, a tree name of
    :data:`blowfish_te.trees.TREES` or None. Plans are cached per (mechanism, workload, policy, ε,
    route, tree name)."""
    if isinstance(tree, Policy):
        return _plan(Request(workload, policy, epsilon, mechanism, route, tree))
    if tree is not None and not isinstance(tree, str):
        raise TypeError(f"tree must be a forest Policy or a tree name, got {type(tree).__name__}")
    plans = mechanism._cache("plans").get(workload, IdentityCache).get(policy, dict)
    key = (epsilon, route, tree)
    if key not in plans:
        resolved = None if tree is None else tree_lib.named(policy, tree)
        plans[key] = _plan(Request(workload, policy, epsilon, mechanism, route, resolved))
    return plans[key]


def _plan(request: Request) -> Plan:
    found: list[Candidate] = []
    reasons: list[str] = []
    for tag in request.mechanism.tags.routes:
        listed, reason = ROUTE_CLASSES[tag].candidates(request, found)
        if listed:
            found += listed
            reasons.append(reason)
    if not found:
        raise ValueError(f"mechanism {request.mechanism.name!r} has no {request.route} route: it gets the routes "
                         f"{', '.join(request.mechanism.tags.routes)} (the exact route is for linear data-independent "
                         "mechanisms; this one is not a linear data-independent mechanism)")
    ranked = sorted(found, key=rank_key)
    reason = reasons[0] if len(reasons) == 1 else "auto: lowest analytic expected error"
    return Plan(ranked[0], tuple(ranked), reason, request.workload, request.policy, request.epsilon, request.mechanism)


@dataclass(frozen=True)
class Plan:
    """How a workload is released under a policy, decided before any data is read or budget spent:
    the chosen route, every candidate considered (best first) and why. :meth:`summary` prints it;
    :meth:`release` executes it on a histogram."""

    chosen: Candidate
    considered: tuple[Candidate, ...]
    reason: str
    workload: Workload = field(repr=False, default=cast(Workload, None))
    policy: Policy = field(repr=False, default=cast(Policy, None))
    epsilon: float = field(repr=False, default=cast(float, None))
    mechanism: RoutedMechanism = field(repr=False, default=cast(RoutedMechanism, None))

    def _label(self, c: Candidate) -> str:
        return c.label if c.mechanism is self.mechanism else f"{c.mechanism.name}: {c.label}"

    def summary(self) -> str:
        """The ε a release spends, the route, tree and stretch, the expected per-query error and
        that of every candidate considered."""
        chosen = self.chosen
        mse = chosen.expected_mse
        error = "n/a (no analytic error)" if mse is None else f"MSE {mse:.6g}, RMSE {math.sqrt(mse):.6g}"
        lines = [f"{self.mechanism.name} on {self.workload.name} under {self.policy.name} at ε = {self.epsilon:g}",
                 f"spends: ε = {self.epsilon:g} per release",
                 f"route: {self._label(chosen)}" + (f" (the mechanism runs at ε/{chosen.stretch})" if chosen.stretch else ""),
                 f"expected per-query error: {error}",
                 f"why: {self.reason}", "candidates (expected per-query MSE):"]
        lines += [f"  {'*' if c is chosen else ' '} {self._label(c)}: {c.outcome_text}" for c in self.considered]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """:meth:`summary` as plain JSON types: the ε a release spends, the chosen route, its tree
        and stretch, its expected per-query MSE and RMSE (None without an analytic error), why,
        and every candidate considered, best first."""
        chosen, mse = self.chosen, self.chosen.expected_mse
        return {
            "mechanism": self.mechanism.name, "workload": self.workload.name, "policy": self.policy.name,
            "epsilon": self.epsilon, "route": chosen.route, "tree": None if chosen.tree is None else chosen.tree.name,
            "stretch": chosen.stretch, "expected_mse": mse, "expected_rmse": None if mse is None else math.sqrt(mse),
            "reason": self.reason,
            "candidates": [{"candidate": self._label(c), "expected_mse": c.expected_mse, "skipped_above": c.floor}
                           for c in self.considered],
        }

    def marginals_read(self) -> tuple[tuple[int, ...], ...] | None:
        """The marginals (attribute tuples) the chosen route reads, when it reads marginals only:
        count them from the records (:func:`blowfish_te.io.marginal_counts`) and release from
        those counts instead of the histogram. None when the route needs the histogram."""
        if self.chosen.route != "exact":
            return None
        return self.chosen.mechanism.marginals_read(self.workload, self.policy)

    def check(self, x: ArrayLike | MarginalCounts) -> np.ndarray | MarginalCounts:
        """``x`` validated for this plan (a histogram of the policy's shape the route accepts, or
        the :class:`~blowfish_te.workloads.MarginalCounts` of every marginal the route reads),
        before any noise is drawn."""
        if isinstance(x, MarginalCounts):
            needed = self.marginals_read()
            if needed is None:
                raise ValueError(f"route {self._label(self.chosen)} needs the histogram, not marginal counts: give x, or plan "
                                 "a mechanism that measures marginals only (marginals, marginals_optimized)")
            if x.shape != self.policy.shape:
                raise ValueError(f"the marginal counts are over {x.shape}, the policy over {self.policy.shape}")
            missing = [s for s in needed if not x.covers(s)]
            if missing:
                raise ValueError(f"the marginal counts lack {missing}, which this plan reads; count {list(needed)}")
            return x
        counts = check_histogram(x, self.policy.shape)
        self.chosen.check(counts)
        return counts

    def execute(self, x: np.ndarray | MarginalCounts, gen: RandomSource) -> Outcome:
        """The chosen route's outcome on a validated histogram (or the marginal counts the route
        reads), its answers checked."""
        outcome = self.chosen.execute(x, gen)
        answers = checked_answers(outcome.answers, self.workload.num_queries, self.chosen.mechanism.name)
        return replace(outcome, answers=answers)

    def release(self, x: ArrayLike | MarginalCounts, rng: RNGLike = None) -> Release:
        """Execute the plan on histogram ``x`` with ``rng`` (see :func:`blowfish_te.answer`): the
        one place a :class:`Release` is made."""
        return self.release_checked(self.check(x), rng)

    def release_checked(self, x: np.ndarray | MarginalCounts, rng: RNGLike) -> Release:
        """:meth:`release` of a histogram :meth:`check` has validated."""
        mech, chosen = self.chosen.mechanism, self.chosen
        gen = check_rng(rng)
        tally = gen.tally() if isinstance(gen, SecureRandom) else None
        outcome = self.execute(x, gen)
        if isinstance(gen, SecureRandom) and tally is not None:
            sampler, secure = gen.summary(tally)
        else:
            sampler, secure = mech.tags.sampler, False
        if outcome.sensitivity == 0:
            sampler = "none (sensitivity 0: exact answers)"
        answers = outcome.answers
        answers.flags.writeable = False
        unconstrained = outcome.unconstrained_answers
        if unconstrained is not None:
            unconstrained = np.array(unconstrained, dtype=np.float64)
            unconstrained.flags.writeable = False
        choice = self.reason + "; considered: " + "; ".join(f"{self._label(c)} {c.outcome_text}" for c in self.considered)
        total_source = mech.total_source()
        if total_source is not None:
            choice += "; " + total_source
        if outcome.notes:
            choice += "; " + outcome.notes
        return Release(
            answers=answers, epsilon=self.epsilon, policy=self.policy, mechanism=mech.name, route=chosen.route,
            tree=None if chosen.route != "transform" or chosen.tree is None else chosen.tree.name, stretch=chosen.stretch,
            workload=self.workload.name, component_totals=dict(outcome.component_totals), sampler=sampler,
            secure=secure, expected_mse=chosen.expected_mse, sensitivity=outcome.sensitivity,
            noise_scale=outcome.noise_scale, choice=choice, public_counts=outcome.public_counts,
            unconstrained_answers=unconstrained,
        )


@dataclass(frozen=True)
class Release:
    """A private answer to a workload, with everything needed to interpret and audit it.

    ``route``, ``tree`` and ``stretch`` say how it was computed (the mechanism ran at
    ε / stretch on the tree transform); ``choice`` says why, listing every candidate considered
    with its expected per-query MSE. ``component_totals`` maps the root cell of every tree
    component without ⊥ to its record count, disclosed exactly (empty for the exact route).
    ``expected_mse`` is the analytic expected per-query squared error for linear data-independent
    mechanisms, else None; ``sensitivity`` the L1 sensitivity Δ of the measured strategy (on x_T
    for the transform route, under the policy for the exact route) and ``noise_scale`` the Laplace
    scale actually drawn: Δ·stretch/ε, resp. Δ/ε (None for mechanisms that do not report them).
    A release under public constraints (route ``"constrained"``) holds the constraints' answers
    in ``public_counts``, ``answers`` after constrained inference, ``unconstrained_answers`` before
    it, and ``expected_mse`` of the unconstrained estimate (the constrained one has no closed form).
    ``sampler`` names the noise samplers that produced it ("; "-separated); ``secure`` is True
    only for ``rng=None`` (or a SecureRandom) when every draw went through a hardened sampler
    (exact discrete or lattice Laplace, :mod:`blowfish_te.secure`), and always False with a numpy
    Generator or seed — the fast experimental path.
    """

    answers: np.ndarray = field(repr=False)
    epsilon: float
    policy: Policy
    mechanism: str
    route: str
    tree: str | None
    stretch: int | None
    workload: str
    component_totals: dict[int, int]
    sampler: str
    secure: bool
    expected_mse: float | None
    sensitivity: float | None
    noise_scale: float | None
    choice: str = field(repr=False)
    public_counts: dict[str, int] | None = None
    unconstrained_answers: np.ndarray | None = field(repr=False, default=None)

    def to_dict(self) -> dict:
        """The release as plain JSON types: answers as a list, the policy by name, the disclosed
        component totals keyed by their cell (as a string, JSON's only key type)."""
        return {
            "answers": self.answers.tolist(), "epsilon": self.epsilon, "policy": self.policy.name,
            "mechanism": self.mechanism, "route": self.route, "tree": self.tree, "stretch": self.stretch,
            "workload": self.workload, "component_totals": {str(k): int(v) for k, v in self.component_totals.items()},
            "sampler": self.sampler, "secure": self.secure, "expected_mse": self.expected_mse,
            "sensitivity": self.sensitivity, "noise_scale": self.noise_scale, "choice": self.choice,
            "public_counts": self.public_counts,
            "unconstrained_answers": None if self.unconstrained_answers is None else self.unconstrained_answers.tolist(),
        }


def policy_totals(policy: Policy, x: np.ndarray) -> dict[int, int]:
    """Record totals of the policy's components without ⊥, keyed by their last cell."""
    labels = policy.component_labels[: policy.size]
    free = np.ones(policy.n_components, dtype=bool)
    if policy.has_bottom:
        free[policy.component_labels[policy.size]] = False
    last = np.full(policy.n_components, -1, dtype=np.int64)
    np.maximum.at(last, labels, np.arange(policy.size))
    sums = np.bincount(labels, weights=x, minlength=policy.n_components)
    return {int(last[c]): int(sums[c]) for c in np.flatnonzero(free & (last >= 0))}


def checked_answers(values: ArrayLike, m: int, name: str) -> np.ndarray:
    """``values`` as m finite floats, else a ValueError naming the mechanism."""
    answers = np.asarray(values, dtype=np.float64)
    if answers.shape != (m,):
        raise ValueError(f"mechanism {name!r} returned an array of shape {answers.shape}, expected ({m},)")
    if not np.isfinite(answers).all():
        raise ValueError(f"mechanism {name!r} returned non-finite answers")
    return answers
