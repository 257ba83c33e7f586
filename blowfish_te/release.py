"""Answering a workload under a policy: route planning, :func:`answer` and :class:`Release`.

Routes (Haney, Machanavajjhala, Ding, PVLDB 2015; He, Machanavajjhala, Ding, SIGMOD 2014):

- ``"transform"``: run the mechanism on (W_T, x_T) of the exact transform of a forest T — the
  policy itself when it is a forest, else a spanning tree with maximum stretch ℓ, at ε/ℓ. Any
  ε-DP mechanism becomes (ε, G)-Blowfish this way, data-dependent ones included.
- ``"exact"``: a linear data-independent mechanism with Laplace noise calibrated to Δ_G of its
  strategy, computed from the policy's edges; any policy.
- ``"auto"``: for linear mechanisms, the candidate (transform through each candidate tree, or
  exact) with the lowest analytic expected error; for other mechanisms the exact transform of a
  forest policy. The choice depends only on the workload, policy, ε and mechanism — never on the
  data — so it costs no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import trees as tree_lib
from ._cache import IdentityCache
from ._validation import check_epsilon, check_histogram
from .forest import CyclicPolicyError
from .mechanisms import MECHANISMS, Auto, LinearMechanism, Mechanism, NativeMechanism, get_mechanism
from .noise import RNGLike, check_rng
from .policies import Policy
from .secure import SecureRandom
from .sensitivity import check_compatible
from .strategies.base import sparse_rows
from .transform import transform
from .workloads import Workload, as_workload

__all__ = ["ROUTES", "Candidate", "ExactRoute", "NativeRoute", "Outcome", "Plan", "Release", "TransformRoute", "answer", "plan"]

ROUTES = ("auto", "transform", "exact")


@dataclass(frozen=True)
class Outcome:
    """What executing a route gives: the answers, the component totals disclosed exactly, the
    sensitivity Δ of what was measured and the Laplace scale drawn (None where not reported), and
    notes on choices the mechanism made while releasing."""

    answers: np.ndarray
    component_totals: dict[int, int]
    sensitivity: float | None
    noise_scale: float | None
    notes: str = ""


@dataclass(frozen=True)
class Candidate:
    """A way to answer — a route — with the forest of the transform route, its stretch ℓ and the
    analytic expected per-query MSE (None for mechanisms without one). :meth:`execute` runs it."""

    route: str
    tree: Policy | None = None
    stretch: int | None = None
    expected_mse: float | None = None
    #: Set on a transform route skipped without computing its error: a lower bound on its
    #: per-query MSE that already exceeded a candidate's error (see :func:`transform_floor`).
    floor: float | None = None
    #: The mechanism this candidate runs when it differs from the plan's (``Auto`` chooses one).
    mechanism: Mechanism | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        base = self.route if self.route in ("exact", "native") else f"transform[{self.tree.name}, stretch {self.stretch}]"
        return base if self.mechanism is None else f"{self.mechanism.name}: {base}"

    @property
    def outcome_text(self) -> str:
        """The candidate's expected per-query MSE, 'n/a', or why it was skipped."""
        if self.floor is not None:
            return f"skipped (per-query MSE >= {self.floor:.6g})"
        return "n/a" if self.expected_mse is None else format(self.expected_mse, ".6g")

    def execute(self, mech: Mechanism, workload: Workload, x: np.ndarray, policy: Policy, epsilon: float, gen) -> Outcome:
        """Release ``workload`` on the validated histogram ``x`` this way (spends ε once)."""
        raise NotImplementedError


@dataclass(frozen=True)
class NativeRoute(Candidate):
    """The mechanism reads the policy itself (:class:`~blowfish_te.mechanisms.NativeMechanism`)."""

    route: str = "native"

    def execute(self, mech, workload, x, policy, epsilon, gen) -> Outcome:
        native = mech.release_native(workload, x, policy, epsilon, gen)
        return Outcome(native.answers, dict(native.component_totals), max(native.sensitivity.values(), default=0.0),
                       max(native.noise_scale.values(), default=0.0), native.notes)


@dataclass(frozen=True)
class ExactRoute(Candidate):
    """A linear mechanism with Laplace noise calibrated to Δ_G of its strategy."""

    route: str = "exact"

    def execute(self, mech, workload, x, policy, epsilon, gen) -> Outcome:
        answers, delta = mech._release(workload, x, epsilon, gen, policy)
        # with Δ = 0 the answers are exact functions of the component totals: say so
        return Outcome(answers, _policy_totals(policy, x) if delta == 0 else {}, delta, delta / epsilon)


@dataclass(frozen=True)
class TransformRoute(Candidate):
    """The mechanism on (W_T, x_T) of the transform of the forest ``tree`` at ε/ℓ, plus the offset
    of the disclosed component totals."""

    route: str = "transform"

    def execute(self, mech, workload, x, policy, epsilon, gen) -> Outcome:
        if not isinstance(mech, LinearMechanism) and _identity_transform(policy):
            # unbounded DP: W_T = W and x_T = x cell by cell, so the mechanism sees the grid itself
            return Outcome(_checked_answers(mech.run(workload, x, epsilon, gen), workload.num_queries, mech), {}, None, None)
        tr = transform(policy, None if self.tree is policy else self.tree)
        x_t, component_totals = tr.data_and_totals(x)
        offset = tr.offset(workload, component_totals)
        totals = dict(zip(tr.roots.tolist(), component_totals.tolist()))
        transformed = tr.workload(workload) if tr.num_edges else None
        if transformed is None or transformed.column_norms().max() == 0:
            # W_T = 0: the answers are the disclosed totals' offset; no mechanism, no noise
            return Outcome(offset.astype(np.float64), totals, 0.0, 0.0)
        eps_run = epsilon / tr.stretch
        if isinstance(mech, LinearMechanism):
            answers_t, delta = mech._release(transformed, x_t, eps_run, gen, None)
            scale = delta / eps_run
        else:
            answers_t, delta, scale = mech.run(transformed, x_t, eps_run, gen), None, None
        return Outcome(_checked_answers(answers_t, workload.num_queries, mech) + offset, totals, delta, scale)


@dataclass(frozen=True)
class Plan:
    """How :func:`answer` releases a workload under a policy, decided before any data is read or
    budget spent: the chosen route, every candidate considered (best first) and why.
    :meth:`summary` prints it; :meth:`release` executes it on a histogram."""

    chosen: Candidate
    considered: tuple[Candidate, ...]
    reason: str
    workload: Workload = field(repr=False, default=None)
    policy: Policy = field(repr=False, default=None)
    epsilon: float = field(repr=False, default=None)
    mechanism: Mechanism = field(repr=False, default=None)

    def summary(self) -> str:
        """Route, tree, stretch, noise scale and the expected error of every candidate."""
        chosen = self.chosen
        lines = [f"{self.mechanism.name} on {self.workload.name} under {self.policy.name} at ε = {self.epsilon:g}",
                 f"route: {chosen.label}" + (f" (the mechanism runs at ε/{chosen.stretch})" if chosen.stretch else ""),
                 f"why: {self.reason}", "candidates (expected per-query MSE):"]
        lines += [f"  {'*' if c is chosen else ' '} {c.label}: {c.outcome_text}" for c in self.considered]
        return "\n".join(lines)

    def release(self, x, rng: RNGLike = None) -> Release:
        """Execute the plan on histogram ``x`` (validated here) with ``rng`` (see :func:`answer`)."""
        return self._release(check_histogram(x, self.policy.shape), rng)

    def _release(self, x: np.ndarray, rng: RNGLike) -> Release:
        mech, workload = self.chosen.mechanism or self.mechanism, self.workload
        gen = check_rng(rng)
        tally = gen.tally() if isinstance(gen, SecureRandom) else None
        outcome = self.chosen.execute(mech, workload, x, self.policy, self.epsilon, gen)
        sampler, secure = gen.summary(tally) if tally is not None else (mech.sampler, False)
        if outcome.sensitivity == 0:
            sampler = "none (sensitivity 0: exact answers)"
        answers = _checked_answers(outcome.answers, workload.num_queries, mech)
        answers.flags.writeable = False
        choice = self.reason + "; considered: " + "; ".join(f"{c.label} {c.outcome_text}" for c in self.considered)
        if mech.total_source() is not None:
            choice += "; " + mech.total_source()
        if outcome.notes:
            choice += "; " + outcome.notes
        chosen = self.chosen
        return Release(
            answers=answers, epsilon=self.epsilon, policy=self.policy, mechanism=mech.name, route=chosen.route,
            tree=None if chosen.route != "transform" else chosen.tree.name, stretch=chosen.stretch,
            workload=workload.name, component_totals=outcome.component_totals, sampler=sampler, secure=secure,
            expected_mse=chosen.expected_mse, sensitivity=outcome.sensitivity, noise_scale=outcome.noise_scale,
            choice=choice,
        )


def _analytic(compute) -> float | None:
    """An expected error, or None when the mechanism cannot compute one for this size."""
    try:
        return compute()
    except NotImplementedError:
        return None


def _transform_candidate(workload: Workload, policy: Policy, tree: Policy | None, epsilon: float, mech: Mechanism) -> Candidate:
    tr = transform(policy, tree)
    expected = None
    if isinstance(mech, LinearMechanism):  # one transformed workload, so its column norms are computed once
        expected = 0.0 if tr.num_edges == 0 else _analytic(lambda: mech.expected_error(tr.workload(workload), epsilon / tr.stretch))
        expected = None if expected is None else expected / workload.num_queries
    return TransformRoute(tree=tr.tree, stretch=tr.stretch, expected_mse=expected)


def transform_floor(workload: Workload, tr, epsilon: float) -> float | None:
    """A lower bound on the per-query MSE of every unbiased linear mechanism on (W_T, x_T) at ε/ℓ:
    2 ℓ²/ε² · mean over queries of ‖w_{T,q}‖∞². For a strategy B with column L1 norms <= Δ and
    a reconstruction R with R B = W_T, every w_{T,q,j} = b_jᵀ r_q, so |w_{T,q,j}| <= Δ ‖r_q‖₂ and
    the query's variance 2 (Δ ℓ/ε)² ‖r_q‖₂² is at least 2 ℓ² ‖w_{T,q}‖∞²/ε². None when W_T has
    no cheap sparse form."""
    if tr.num_edges == 0:
        return None
    rows = sparse_rows(tr.workload(workload))
    if rows is None:
        return None
    peaks = np.asarray(abs(rows).max(axis=1).todense(), dtype=np.float64).reshape(-1)
    return 2.0 * (tr.stretch / epsilon) ** 2 * float(np.mean(peaks**2))


def _exact_candidate(workload: Workload, policy: Policy, epsilon: float, mech: LinearMechanism) -> Candidate:
    expected = _analytic(lambda: mech.expected_error(workload, epsilon, policy=policy))
    return ExactRoute(expected_mse=None if expected is None else expected / workload.num_queries)


def _identity_transform(policy: Policy) -> bool:
    """Unbounded DP: every cell joined to ⊥ and nothing else. Its transform is x itself and W_G = W,
    so the transform and exact routes have the same error for every linear mechanism."""
    return policy.has_bottom and policy.num_edges == policy.size and policy.is_differential_privacy


def _resolve_tree(policy: Policy, tree) -> Policy:
    if isinstance(tree, Policy):
        return tree
    if isinstance(tree, str):
        return tree_lib.named(policy, tree)
    raise TypeError(f"tree must be a forest Policy or a tree name, got {type(tree).__name__}")


def _rank_key(c: Candidate) -> tuple:
    """Lowest expected error first (to 9 significant digits); on ties the exact route, which
    publishes no totals, then the smaller stretch."""
    mse = np.inf if c.expected_mse is None else float(f"{c.expected_mse:.9g}")
    return (mse, c.route != "exact", c.stretch or 0)


def plan(workload, policy: Policy, epsilon: float, mechanism="identity", route: str = "auto", tree=None) -> Plan:
    """Decide how :func:`answer` releases ``workload`` under ``policy`` (data-independent): a
    :class:`Plan` to inspect (``summary()``) and execute (``release(x, rng)``). Plans are cached
    per (mechanism, workload, policy, ε, route, tree name), so repeated releases plan once."""
    workload = as_workload(workload)
    check_compatible(workload, policy)
    epsilon = check_epsilon(epsilon)
    mech = get_mechanism(mechanism)
    if not isinstance(route, str) or route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if isinstance(tree, Policy):
        return _plan(workload, policy, epsilon, mech, route, tree)
    plans = mech._cache("plans").get(workload, IdentityCache).get(policy, dict)
    key = (epsilon, route, tree)
    if key not in plans:
        plans[key] = _plan(workload, policy, epsilon, mech, route, tree)
    return plans[key]


def _plan_auto(workload: Workload, policy: Policy, epsilon: float, mech: Auto, route: str, tree) -> Plan:
    """Every route of every mechanism ``mech`` compares, best analytic expected error first."""
    pairs, note = mech.choices(workload, policy, route)
    cands, skipped = [], []
    for sub, sub_route in pairs:
        try:
            sub_plan = plan(workload, policy, epsilon, sub, sub_route, tree)
        except (ValueError, TypeError) as err:  # a native mechanism for other policies, a route it lacks
            skipped.append(f"{sub.name} ({str(err).split(';')[0]})")
            continue
        cands += [replace(c, mechanism=sub) for c in sub_plan.considered]
    if not cands:
        raise ValueError(f"no candidate mechanism of auto applies here: {'; '.join(skipped)}")
    ranked = sorted(cands, key=_rank_key)
    reason = f"auto: lowest analytic expected error over {', '.join(m.name for m, _ in pairs)}; {note}"
    if skipped:
        reason += "; not applicable: " + ", ".join(skipped)
    return Plan(chosen=ranked[0], considered=tuple(ranked), reason=reason, workload=workload, policy=policy,
                epsilon=epsilon, mechanism=mech)


def _plan(workload: Workload, policy: Policy, epsilon: float, mech: Mechanism, route: str, tree) -> Plan:
    if isinstance(mech, Auto):
        return _plan_auto(workload, policy, epsilon, mech, route, tree)
    linear = isinstance(mech, LinearMechanism)
    if mech.models_records and not policy.is_differential_privacy:
        works = ", ".join(sorted(name for name, cls in MECHANISMS.items() if not cls.models_records))
        raise ValueError(
            f"mechanism {mech.name!r} models the data as records spread over the cells, but under {policy.name} it "
            "would run on the transformed counts x_G, which are not records, and answer no better than the uniform "
            f"estimate; run it under a DP policy (complete or unbounded), or use one of: {works}"
        )
    if isinstance(mech, NativeMechanism):
        if tree is not None or route != "auto":
            raise ValueError(f"mechanism {mech.name!r} is Blowfish-native: it picks its own measurements (route 'auto', no tree)")
        expected = mech.expected_error_native(workload, epsilon, policy)
        cands = [NativeRoute(expected_mse=None if expected is None else expected / workload.num_queries)]
        reason = f"{mech.name} is a Blowfish-native mechanism for this policy"
    elif tree is not None:
        if route == "exact":
            raise ValueError("tree= applies to the transform route, not to route='exact'")
        resolved = _resolve_tree(policy, tree)
        cands = [_transform_candidate(workload, policy, resolved, epsilon, mech)]
        reason = f"tree {resolved.name} given by the caller"
    elif route == "exact":
        if not linear:
            raise ValueError(
                f"mechanism {mech.name!r} is not a linear data-independent mechanism, so it has no exact route"
            )
        cands = [_exact_candidate(workload, policy, epsilon, mech)]
        reason = "route='exact' requested"
    elif policy.is_forest:
        if route == "auto" and linear and _identity_transform(policy):
            cands = [_exact_candidate(workload, policy, epsilon, mech)]
            reason = "auto: under unbounded DP the transform is the identity, so both routes have this error; exact publishes no totals"
        else:
            cands = [_transform_candidate(workload, policy, None, epsilon, mech)]
            reason = "the policy is a forest: its exact transform"
            if route == "auto" and linear:
                cands.append(_exact_candidate(workload, policy, epsilon, mech))
                reason = "auto: lowest analytic expected error"
    else:
        if not linear:
            raise CyclicPolicyError(
                f"{policy.name} has cycles and mechanism {mech.name!r} is data-dependent (no exact route, no "
                "analytic error to choose a tree by): pass a spanning tree, e.g. tree='bfs' or a forest policy, "
                "to run it at epsilon / stretch (an (ε/ℓ, T)-Blowfish mechanism is (ε, G)-Blowfish for ℓ the stretch)"
            )
        cands = [_exact_candidate(workload, policy, epsilon, mech)] if route == "auto" else []
        reason = "auto: lowest analytic expected error" if route == "auto" else (
            "route='transform': the candidate tree with the lowest analytic expected error")
        for t in tree_lib.candidates(policy).values():
            known = [c.expected_mse for c in cands if c.expected_mse is not None]
            tr = transform(policy, t)
            floor = transform_floor(workload, tr, epsilon) if known else None
            if floor is not None and floor > min(known) * (1 + 1e-9):
                cands.append(TransformRoute(tree=tr.tree, stretch=tr.stretch, floor=floor))
            else:
                cands.append(_transform_candidate(workload, policy, t, epsilon, mech))
    ranked = sorted(cands, key=_rank_key)
    return Plan(chosen=ranked[0], considered=tuple(ranked), reason=reason, workload=workload, policy=policy,
                epsilon=epsilon, mechanism=mech)


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


def _policy_totals(policy: Policy, x: np.ndarray) -> dict[int, int]:
    """Record totals of the policy's components without ⊥, keyed by their last cell."""
    labels = policy.component_labels[: policy.size]
    free = np.ones(policy.n_components, dtype=bool)
    if policy.has_bottom:
        free[policy.component_labels[policy.size]] = False
    last = np.full(policy.n_components, -1, dtype=np.int64)
    np.maximum.at(last, labels, np.arange(policy.size))
    sums = np.bincount(labels, weights=x, minlength=policy.n_components)
    return {int(last[c]): int(sums[c]) for c in np.flatnonzero(free & (last >= 0))}


def _checked_answers(values, m: int, mech: Mechanism) -> np.ndarray:
    answers = np.asarray(values, dtype=np.float64)
    if answers.shape != (m,):
        raise ValueError(f"mechanism {mech.name!r} returned an array of shape {answers.shape}, expected ({m},)")
    if not np.isfinite(answers).all():
        raise ValueError(f"mechanism {mech.name!r} returned non-finite answers")
    return answers


def answer(
    workload,
    x,
    policy: Policy,
    epsilon: float,
    mechanism="identity",
    rng: RNGLike = None,
    route: str = "auto",
    tree=None,
    *,
    constraints=None,
    moves: str = "any",
) -> Release:
    """Answer ``workload`` on histogram ``x`` with (ε, policy)-Blowfish privacy.

    Parameters
    ----------
    workload : Workload or matrix (m × K)
    x : array of K non-negative integer counts (flat or of the policy's shape)
    policy : Policy
    epsilon : float > 0
    mechanism : a name in ``blowfish_te.mechanisms.MECHANISMS`` or a ``Mechanism`` instance
        ``"identity"`` (Laplace on the cells; on x_G: "transformed + Laplace") or ``"laplace"``
        (W x + Lap(Δ/ε), He et al. Thm 5.1).
    rng : None (default), numpy Generator, int seed or SecureRandom
        None: the secure path (:class:`blowfish_te.secure.SecureRandom`; linear mechanisms draw
        exact discrete Laplace for integer strategies, lattice Laplace otherwise; not
        reproducible). A Generator or seed: the fast floating-point path, reproducible
        (``secure=False``).
    route : ``"auto"``, ``"transform"`` or ``"exact"`` (see the module docstring)
    tree : a forest Policy or a tree name of ``trees.TREES`` (``"stars"``, ``"bfs"``, ``"hub"``, ...); forces the
        transform route through that tree, at ε / stretch.
    constraints : public count constraints (:class:`blowfish_te.constraints.Constraints`), known to
        the adversary. The linear mechanism's strategy is measured with Laplace noise at its
        sensitivity under the constraints, then the estimate is fitted to the public counts
        (non-negative least squares, :mod:`blowfish_te.constraints.inference`); route ``"auto"``, no tree.
    moves : how neighbours under constraints may move records: ``"any"`` (He et al. Def. 4.1 as
        written) or ``"edges"`` (along policy edges only); see :mod:`blowfish_te.constraints.graph`.

    Notes
    -----
    Privacy: transform route — the mechanism is (ε/ℓ)-DP for unit changes of x_T, hence (ε/ℓ, T)-
    and (ε, G)-Blowfish (see above); exact route — Laplace noise calibrated to Δ_G(A) from the
    policy's edges. The route is chosen without looking at x.
    """
    if constraints is not None:
        if route != "auto" or tree is not None:
            raise ValueError("a release under constraints measures the strategy on x itself: leave route='auto' and tree=None")
        from .constraints.inference import release_constrained

        return release_constrained(workload, x, policy, epsilon, constraints, mechanism, rng, moves)
    the_plan = plan(workload, policy, epsilon, mechanism, route, tree)
    return the_plan._release(check_histogram(x, policy.shape), rng)
