"""Answering a workload under a policy: :func:`plan` and :func:`answer`, the public entry points.

They validate the arguments, resolve mechanism names (every library mechanism and installed
plug-ins, :mod:`blowfish_te.mechanisms`) and plan with :func:`blowfish_te.routes.plan_routes` — or
:func:`blowfish_te.constraints.inference.plan_constrained` under public constraints. The plan is
data-independent; :meth:`Plan.release <blowfish_te.routes.Plan.release>` executes it and makes the
:class:`Release`. See :mod:`blowfish_te.routes` for the routes and their privacy arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

from ._validation import MAX_CELLS, check_epsilon
from .mechanisms import get_mechanism
from .noise import RNGLike
from .policies import Policy
from .routes import ROUTES, Plan, Release, plan_routes
from .sensitivity import check_compatible
from .workloads import Workload, as_workload

if TYPE_CHECKING:
    from .constraints import Constraints
    from .mechanisms import Mechanism

__all__ = ["ROUTES", "Plan", "Release", "answer", "plan"]


def plan(workload: Workload | ArrayLike, policy: Policy, epsilon: float, mechanism: str | Mechanism | None = None,
         route: str = "auto", tree: Policy | str | None = None, *, constraints: Constraints | None = None,
         moves: str = "any") -> Plan:
    """Decide how :func:`answer` releases ``workload`` under ``policy`` (data-independent): a
    :class:`Plan` to inspect (``summary()``) and execute (``release(x, rng)``). Plans are cached
    per (mechanism, workload, policy, ε, route, tree name), so repeated releases plan once.
    ``constraints`` and ``moves``: see :func:`answer`."""
    return make_plan(workload, policy, epsilon, mechanism, route, tree, constraints, moves)


def make_plan(workload: Workload | ArrayLike, policy: Policy, epsilon: float, mechanism: str | Mechanism | None = None,
              route: str = "auto", tree: Policy | str | None = None, constraints: Constraints | None = None,
              moves: str = "any", records: ArrayLike | None = None) -> Plan:
    """:func:`plan`, with ``records``: under constraints, the record ids whose records x holds
    (a part of a parallel composition, :mod:`blowfish_te.budget`)."""
    workload = as_workload(workload)
    check_compatible(workload, policy)
    epsilon = check_epsilon(epsilon)
    if mechanism is None:  # the default: auto's choice, or identity where only a linear mechanism can serve
        mechanism = "identity" if constraints is not None else "auto"
    mech = get_mechanism(mechanism)
    if not isinstance(route, str) or route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if constraints is not None:
        if route != "auto" or tree is not None:
            raise ValueError("a release under constraints measures the strategy on x itself: leave route='auto' and tree=None")
        from .constraints.inference import plan_constrained  # loaded only for releases under constraints

        return plan_constrained(workload, policy, epsilon, constraints, mech, moves, records=records)
    planned = plan_routes(workload, policy, epsilon, mech, route, tree)
    if policy.size > MAX_CELLS and planned.marginals_read() is None:
        raise ValueError(f"mechanism {mech.name!r} releases from the histogram, which would have {policy.size} cells "
                         f"(more than the {MAX_CELLS} allowed where arrays of the domain's size are built); on this "
                         "domain use one that reads marginal counts: marginals, marginals_optimized or auto")
    return planned


def answer(
    workload: Workload | ArrayLike,
    x: ArrayLike,
    policy: Policy,
    epsilon: float,
    mechanism: str | Mechanism | None = None,
    rng: RNGLike = None,
    route: str = "auto",
    tree: Policy | str | None = None,
    *,
    constraints: Constraints | None = None,
    moves: str = "any",
) -> Release:
    """Answer ``workload`` on histogram ``x`` with (ε, policy)-Blowfish privacy.

    Parameters
    ----------
    workload : Workload or matrix (m × K)
    x : array of K non-negative integer counts (flat or of the policy's shape)
    policy : Policy
    epsilon : float > 0
    mechanism : None (default), a name in ``blowfish_te.mechanisms.MECHANISMS`` or a ``Mechanism`` instance
        None: ``"auto"``, the data-independent strategy of lowest analytic expected error for this
        workload and policy (:class:`~blowfish_te.mechanisms.Auto`; the release names it), or
        ``"identity"`` under ``constraints``, where only a linear mechanism has a known
        sensitivity. ``"identity"`` is Laplace on the cells (on x_G: "transformed + Laplace"),
        ``"laplace"`` W x + Lap(Δ/ε) (He et al. Thm 5.1).
    rng : None (default), numpy Generator, int seed or SecureRandom
        None: the secure path (:class:`blowfish_te.secure.SecureRandom`; linear mechanisms draw
        exact discrete Laplace for integer strategies, lattice Laplace otherwise; not
        reproducible). A Generator or seed: the fast floating-point path, reproducible
        (``secure=False``).
    route : ``"auto"``, ``"transform"`` or ``"exact"`` (see :mod:`blowfish_te.routes`)
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
    return plan(workload, policy, epsilon, mechanism, route, tree, constraints=constraints, moves=moves).release(x, rng)
