"""The contract a mechanism must keep to plug into blowfish_te, checked in one call.

``check_mechanism(m)`` is what a plug-in author runs in their own tests (and what the library runs
over every registered mechanism): the constructor's parameters read back and rebuild the
mechanism, parameters are fixed, a release has one finite answer per query, the same seed gives
the same release and another seed another one, and a small empirical audit
(:func:`~blowfish_te.audit.audit`) finds no violation. The audit is a smoke test, not a proof:
it can miss a violation, never invent one beyond its confidence level.
"""

from __future__ import annotations

import numpy as np

from .. import workloads
from ..errors import ContractError
from ..mechanisms import Mechanism, get_mechanism
from ..policies import Policy, line, unbounded
from ..release import answer
from .core import AuditReport, audit
from .pairs import default_histogram

__all__ = ["check_mechanism"]


def _fail(mechanism: Mechanism, message: str):
    raise ContractError(f"mechanism {type(mechanism).__name__} ({mechanism.name!r}) breaks the contract: {message}")


def check_mechanism(mechanism: str | Mechanism, policy: Policy | None = None, epsilon: float = 1.0, *, cells: int = 8,
                    runs: int = 400, rng: int = 0) -> AuditReport:
    """Check ``mechanism`` (an instance or a registered name) against the contract above, on
    prefix queries (for a mechanism that answers marginals only, the marginal of every attribute
    and the total) over ``cells`` cells under ``policy`` (default: the line policy, or unbounded
    DP for mechanisms that model records). The audit draws ``runs`` releases per histogram of a
    pair across a jump of the data (plus a quarter as many to choose its event). Raises
    :class:`~blowfish_te.errors.ContractError` naming the broken point; returns the audit report."""
    mech = get_mechanism(mechanism)
    if not isinstance(mech.name, str) or not mech.name:
        _fail(mech, f"its name must be a non-empty string, got {mech.name!r}")
    try:
        params = mech.get_params()
    except AttributeError as err:
        _fail(mech, f"get_params() failed ({err}): store each __init__ argument under its own name")
    try:
        rebuilt = type(mech)(**params)
    except TypeError as err:
        _fail(mech, f"get_params() {params} does not rebuild it ({err}): store each __init__ argument under its name")
    if rebuilt.get_params() != params:
        _fail(mech, f"rebuilt from get_params() it reports {rebuilt.get_params()}, not {params}")
    for key, value in params.items():
        try:
            setattr(mech, key, value)
        except AttributeError:
            continue
        _fail(mech, f"parameter {key!r} could be changed after construction (cached strategies would go stale)")
    if policy is None:
        shape = (2, max(1, cells // 2)) if mech.tags.needs_grid else (cells,)
        policy = unbounded(shape) if mech.tags.models_records else line(cells)
    if mech.tags.needs_marginals:
        workload = workloads.marginals(policy.shape, [(a,) for a in range(policy.ndim)] + [()])
    else:
        workload = workloads.prefix(policy.shape)
    x = default_histogram(policy.shape, rng=rng)
    first = answer(workload, x, policy, epsilon, mech, rng=rng)
    if first.answers.shape != (workload.num_queries,) or not np.isfinite(first.answers).all():
        _fail(mech, f"a release must hold {workload.num_queries} finite answers, got shape {first.answers.shape}")
    if not np.array_equal(answer(workload, x, policy, epsilon, mech, rng=rng).answers, first.answers):
        _fail(mech, "the same seed gave two different releases (randomness must come from rng only)")
    if first.noise_scale != 0 and np.array_equal(answer(workload, x, policy, epsilon, mech, rng=rng + 1).answers, first.answers):
        _fail(mech, "two seeds gave the same release: is rng ignored?")
    if "native" in mech.tags.routes and first.route != "native":
        _fail(mech, f"a native mechanism must release through the native route, got {first.route!r}")
    report = audit(mech, policy, workload, epsilon, x, n_select=max(runs // 4, 1), n_detect=runs, rng=rng,
                   kinds=("boundary",))
    if not report.passed:
        _fail(mech, "the empirical audit found a privacy violation:\n" + report.table())
    return report
