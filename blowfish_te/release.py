"""Answering a workload under a policy: :func:`answer` and the :class:`Release` it returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validation import check_epsilon, check_histogram
from .mechanisms import LinearMechanism, get_mechanism
from .noise import RNGLike, check_rng
from .policies import Policy
from .sensitivity import check_compatible
from .transform import CyclicPolicyError, transform
from .workloads import as_workload

__all__ = ["Release", "answer", "ROUTES"]

#: ``"transform"``: run the mechanism on (W_G, x_G) of the exact tree transform (forests only).
#: ``"exact"``: a linear mechanism with Laplace noise calibrated to Δ_G of its strategy (any policy).
#: ``"auto"``: the transform for forests, the exact route otherwise.
ROUTES = ("auto", "transform", "exact")


@dataclass(frozen=True)
class Release:
    """A private answer to a workload, with everything needed to interpret and audit it.

    ``component_totals`` maps the root cell of every policy component without ⊥ to its record
    count: these totals are invariant under the policy's neighbours and are disclosed exactly
    (empty for the exact route, which publishes only noisy answers). ``expected_mse`` is the
    analytic expected per-query squared error for data-independent linear mechanisms, else None;
    ``sensitivity`` is the L1 sensitivity the Laplace noise was calibrated to (None for mechanisms
    that do not report one).
    """

    answers: np.ndarray = field(repr=False)
    epsilon: float
    policy: Policy
    mechanism: str
    route: str
    workload: str
    component_totals: dict[int, int]
    sampler: str
    expected_mse: float | None
    sensitivity: float | None


def answer(
    workload,
    x,
    policy: Policy,
    epsilon: float,
    mechanism="identity",
    rng: RNGLike = None,
    route: str = "auto",
) -> Release:
    """Answer ``workload`` on histogram ``x`` with (ε, policy)-Blowfish privacy.

    Parameters
    ----------
    workload : Workload or matrix
        The linear queries W (m × K).
    x : array of K non-negative integer counts (flat or of the policy's shape)
    policy : Policy
    epsilon : float > 0
    mechanism : name in ``blowfish_te.mechanisms.MECHANISMS`` or a ``Mechanism`` instance
        ``"identity"`` (Laplace on the cells; on x_G: "transformed + Laplace") or ``"laplace"``
        (W x + Lap(Δ_G(W)/ε), He et al. Thm 5.1).
    rng : numpy Generator, int seed or None
    route : one of :data:`ROUTES`

    Privacy: in the transform route the mechanism is ε-DP for unit changes of x_G, hence
    (ε, G)-Blowfish by the tree TE theorem (SPEC §4); in the exact route the noise is calibrated to
    Δ_G of the strategy, computed from the policy's edges (SPEC §5).
    """
    workload = as_workload(workload)
    check_compatible(workload, policy)
    x = check_histogram(x, policy.shape)
    epsilon = check_epsilon(epsilon)
    mech = get_mechanism(mechanism)
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    gen = check_rng(rng)
    m = workload.num_queries
    if route == "auto":
        route = "transform" if policy.is_forest else "exact"

    if route == "exact":
        if not isinstance(mech, LinearMechanism):
            raise CyclicPolicyError(
                f"mechanism {mech.name!r} is not a linear data-independent mechanism, so it has no exact "
                f"route; on {policy.name} it needs a forest (route='transform') or a spanning tree at "
                "epsilon / stretch (the tree-embedding route of SPEC §5)"
            )
        answers, delta = mech.release(workload, x, epsilon, gen, policy=policy)
        expected = mech.expected_error(workload, epsilon, sensitivity=delta) / m
        totals: dict[int, int] = {}
    else:
        tree = transform(policy)
        component_totals = tree.totals(x)
        offset = tree.offset(workload, component_totals)
        totals = dict(zip(tree.roots.tolist(), component_totals.tolist()))
        if tree.num_edges == 0:  # nothing is protected: every count is a disclosed total
            answers, delta, expected = offset.astype(np.float64), 0.0, 0.0
        else:
            transformed = tree.workload(workload)
            x_g = tree.data(x)
            if isinstance(mech, LinearMechanism):
                answers_g, delta = mech.release(transformed, x_g, epsilon, gen)
                expected = mech.expected_error(transformed, epsilon, sensitivity=delta) / m
            else:
                answers_g, delta = mech.run(transformed, x_g, epsilon, gen), None
                expected = mech.expected_error(transformed, epsilon)
                expected = None if expected is None else expected / m
            answers = np.asarray(answers_g, dtype=np.float64) + offset
    answers.flags.writeable = False
    return Release(
        answers=answers,
        epsilon=epsilon,
        policy=policy,
        mechanism=mech.name,
        route=route,
        workload=workload.name,
        component_totals=totals,
        sampler=mech.sampler,
        expected_mse=expected,
        sensitivity=delta,
    )
