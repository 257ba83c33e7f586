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

from dataclasses import dataclass, field

import numpy as np

from . import trees as tree_lib
from ._validation import check_epsilon, check_histogram
from .forest import CyclicPolicyError
from .mechanisms import MECHANISMS, LinearMechanism, Mechanism, NativeMechanism, get_mechanism
from .noise import RNGLike, check_rng
from .policies import Policy
from .secure import SecureRandom
from .sensitivity import check_compatible
from .transform import transform
from .workloads import Workload, as_workload

__all__ = ["Candidate", "Plan", "Release", "ROUTES", "answer", "plan"]

ROUTES = ("auto", "transform", "exact")


@dataclass(frozen=True)
class Candidate:
    """A way to answer: a route, the forest of the transform route, its stretch ℓ, and the
    analytic expected per-query MSE (None for mechanisms without one)."""

    route: str
    tree: Policy | None = None
    stretch: int | None = None
    expected_mse: float | None = None

    @property
    def label(self) -> str:
        if self.route in ("exact", "native"):
            return self.route
        return f"transform[{self.tree.name}, stretch {self.stretch}]"


@dataclass(frozen=True)
class Plan:
    """The chosen candidate, every candidate considered (best first) and why."""

    chosen: Candidate
    considered: tuple[Candidate, ...]
    reason: str


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
    return Candidate("transform", tr.tree, tr.stretch, expected)


def _exact_candidate(workload: Workload, policy: Policy, epsilon: float, mech: LinearMechanism) -> Candidate:
    expected = _analytic(lambda: mech.expected_error(workload, epsilon, policy=policy))
    return Candidate("exact", expected_mse=None if expected is None else expected / workload.num_queries)


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
    """Decide how :func:`answer` releases ``workload`` under ``policy`` (data-independent)."""
    workload = as_workload(workload)
    check_compatible(workload, policy)
    epsilon = check_epsilon(epsilon)
    mech = get_mechanism(mechanism)
    if not isinstance(route, str) or route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    linear = isinstance(mech, LinearMechanism)
    needs_tree = (
        f"{policy.name} has cycles and mechanism {mech.name!r} is data-dependent (no exact route, no "
        "analytic error to choose a tree by): pass a spanning tree, e.g. tree='bfs' or a forest policy, "
        "to run it at epsilon / stretch (an (ε/ℓ, T)-Blowfish mechanism is (ε, G)-Blowfish for ℓ the stretch)"
    )

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
        expected = mech.expected_error_native(workload, policy, epsilon)
        cands = [Candidate("native", expected_mse=None if expected is None else expected / workload.num_queries)]
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
        cands = [_transform_candidate(workload, policy, None, epsilon, mech)]
        reason = "the policy is a forest: its exact transform"
        if route == "auto" and linear:
            cands.append(_exact_candidate(workload, policy, epsilon, mech))
            reason = "auto: lowest analytic expected error"
    else:
        if not linear:
            raise CyclicPolicyError(needs_tree)
        cands = [_transform_candidate(workload, policy, t, epsilon, mech) for t in tree_lib.candidates(policy).values()]
        reason = "route='transform': the candidate tree with the lowest analytic expected error"
        if route == "auto":
            cands.append(_exact_candidate(workload, policy, epsilon, mech))
            reason = "auto: lowest analytic expected error"
    ranked = sorted(cands, key=_rank_key)
    return Plan(chosen=ranked[0], considered=tuple(ranked), reason=reason)


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

    def to_dict(self) -> dict:
        """The release as plain JSON types: answers as a list, the policy by name, the disclosed
        component totals keyed by their cell (as a string, JSON's only key type)."""
        return {
            "answers": self.answers.tolist(), "epsilon": self.epsilon, "policy": self.policy.name,
            "mechanism": self.mechanism, "route": self.route, "tree": self.tree, "stretch": self.stretch,
            "workload": self.workload, "component_totals": {str(k): int(v) for k, v in self.component_totals.items()},
            "sampler": self.sampler, "secure": self.secure, "expected_mse": self.expected_mse,
            "sensitivity": self.sensitivity, "noise_scale": self.noise_scale, "choice": self.choice,
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

    Privacy: transform route — the mechanism is (ε/ℓ)-DP for unit changes of x_T, hence (ε/ℓ, T)-
    and (ε, G)-Blowfish (see above); exact route — Laplace noise calibrated to Δ_G(A) from the
    policy's edges. The route is chosen without looking at x.
    """
    workload = as_workload(workload)
    check_compatible(workload, policy)
    x = check_histogram(x, policy.shape)
    the_plan = plan(workload, policy, epsilon, mechanism, route, tree)
    epsilon = check_epsilon(epsilon)
    mech = get_mechanism(mechanism)
    gen = check_rng(rng)
    tally = gen.tally() if isinstance(gen, SecureRandom) else None
    chosen = the_plan.chosen
    m = workload.num_queries

    scale = None
    if chosen.route == "native":
        native = mech.release_native(workload, x, policy, epsilon, gen)
        answers, totals = native.answers, dict(native.component_totals)
        delta = max(native.sensitivity.values(), default=0.0)
        scale = max(native.noise_scale.values(), default=0.0)
    elif chosen.route == "exact":
        answers, delta = mech.release(workload, x, epsilon, gen, policy=policy)
        scale = delta / epsilon
        # with Δ = 0 the answers are exact functions of the component totals: say so
        totals: dict[int, int] = _policy_totals(policy, x) if delta == 0 else {}
    else:
        tr = transform(policy, None if chosen.tree is policy else chosen.tree)
        component_totals = tr.totals(x)
        offset = tr.offset(workload, component_totals)
        totals = dict(zip(tr.roots.tolist(), component_totals.tolist()))
        transformed = tr.workload(workload) if tr.num_edges else None
        if transformed is None or transformed.column_norms().max() == 0:
            # W_T = 0: the answers are the disclosed totals' offset; no mechanism, no noise
            answers, delta, scale = offset.astype(np.float64), 0.0, 0.0
        else:
            x_t, eps_run = tr.data(x), epsilon / tr.stretch
            if isinstance(mech, LinearMechanism):
                answers_t, delta = mech.release(transformed, x_t, eps_run, gen)
                scale = delta / eps_run
            else:
                answers_t, delta = mech.run(transformed, x_t, eps_run, gen), None
            answers = _checked_answers(answers_t, m, mech) + offset
    sampler, secure = gen.summary(tally) if tally is not None else (mech.sampler, False)
    if delta == 0:
        sampler = "none (sensitivity 0: exact answers)"
    answers = _checked_answers(answers, m, mech)
    answers.flags.writeable = False
    choice = the_plan.reason + "; considered: " + "; ".join(
        f"{c.label} {'n/a' if c.expected_mse is None else format(c.expected_mse, '.6g')}" for c in the_plan.considered
    )
    return Release(
        answers=answers,
        epsilon=epsilon,
        policy=policy,
        mechanism=mech.name,
        route=chosen.route,
        tree=None if chosen.route != "transform" else chosen.tree.name,
        stretch=chosen.stretch,
        workload=workload.name,
        component_totals=totals,
        sampler=sampler,
        secure=secure,
        expected_mse=chosen.expected_mse,
        sensitivity=delta,
        noise_scale=scale,
        choice=choice,
    )
