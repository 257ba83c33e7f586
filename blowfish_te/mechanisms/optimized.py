"""Strategies optimised for the workload they answer (HDMM: McKenna, Miklau, Hay,
Machanavajjhala, PVLDB 2018), and for the policy's own sensitivity in the exact route."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._cache import IdentityCache
from .._validation import check_int
from ..policies import Policy
from ..sensitivity import sensitivity
from ..strategies import IdentityStrategy, optimize_pidentity
from ..strategies.kronecker import KroneckerStrategy, kronecker_rows, optimize_kronecker
from ..strategies.pidentity import MAX_COLUMN_SCALE, PIDENTITY_MAXITER, PIdentityStrategy, default_restarts, default_rows
from ..strategies.store import StrategyStore, default_store, strategy_key
from ..workloads import Boxes, Workload
from .base import LinearMechanism

#: Seconds per (cell × row × (row + 32)) and per (edge × row) of one optimiser iteration, measured on
#: the 2-core reference machine (p-Identity at K = 4096, p = 128: 74 ms per iteration; K = 1024,
#: p = 64: 11 ms): the cost model of :meth:`Optimized.predicted_seconds`, which depends on sizes
#: only, never on data or the clock.
SECONDS_PER_CELL_ROW = 1.2e-9
SECONDS_PER_EDGE_ROW = 1e-7
#: Iterations a p-Identity optimisation is predicted to take before its progress stops (1,000-1,300
#: measured on prefixes and all ranges at K = 1024-4096); Kronecker factors run at most 150 each.
PREDICTED_ITERATIONS = 1200
KRONECKER_MAXITER = 150
#: Iteration limit of the policy-aware p-Identity search, which starts from the unit-change strategy.
POLICY_MAXITER = 150
#: Most (policy edges × strategy rows) the policy-aware objective handles per evaluation; beyond
#: it (e.g. bounded DP's K²/2 pairs) the exact route uses the unit-change strategy.
MAX_EDGE_ENTRIES = 2**24


def _template_seconds(starts: int, iterations: int, side: int, rows: int) -> float:
    """Predicted seconds of ``starts`` optimisations of ``iterations`` each, one template of
    ``rows`` rows over ``side`` cells (see :data:`SECONDS_PER_CELL_ROW`)."""
    return starts * iterations * SECONDS_PER_CELL_ROW * side * rows * (rows + 32)


def axis_edges(policy: Policy) -> list[tuple[np.ndarray, np.ndarray]]:
    """The policy's edges seen along each axis: the distinct pairs (u_a, v_a), u_a != v_a, of the
    coordinates of its edges, and (u_a, k_a) (⊥) for each ⊥ edge."""
    edges = policy.edges
    k = policy.size
    bottom = edges[:, 1] == k
    cu = np.unravel_index(edges[~bottom, 0], policy.shape)
    cv = np.unravel_index(edges[~bottom, 1], policy.shape)
    cb = np.unravel_index(edges[bottom, 0], policy.shape)
    out = []
    for axis, side in enumerate(policy.shape):
        lo, hi = np.minimum(cu[axis], cv[axis]), np.maximum(cu[axis], cv[axis])
        keep = lo != hi
        pairs = np.concatenate([np.stack([lo[keep], hi[keep]], 1), np.stack([cb[axis], np.full(cb[axis].size, side)], 1)])
        pairs = np.unique(pairs, axis=0)
        out.append((pairs[:, 0], pairs[:, 1]))
    return out


class Optimized(LinearMechanism):
    """An optimised strategy (HDMM's templates): p-Identity on 1-D and other workloads, a
    Kronecker product of p-Identity factors (OPT⊗) on boxes of a multi-dimensional domain.

    Unit changes (DP, and x_G of a transform): columns of L1 norm 1, so Δ = 1; error
    2 (Δ/ε)² ‖W A⁺‖_F², least squares by Woodbury. In the exact route under a policy G, the
    strategy is optimised against G's own sensitivity: ‖W A⁺‖_F² · Δ̃_G² with Δ̃_G a smooth
    bound on max over edges ‖A(e_u - e_v)‖₁ (per axis for Kronecker factors; on 1-D from the
    unit-change strategy); the better of it
    and the unit-change strategy, by the exact Δ_G computed from the edges, is measured, and the
    noise is Laplace(Δ_G/ε) for that exact Δ_G. Placed after a policy transform the workload is
    W_G, so the strategy is optimised for the transformed workload. The better of the optimised
    strategy and the identity (Θ = 0) is kept, as OPT₀ keeps the best of its templates. Restarts
    are seeded by ``seed``; strategies depend on the workload and policy only, never on the data,
    so with ``store`` (default True: the shipped strategies and the user's cache directory; or a
    :class:`~blowfish_te.strategies.StrategyStore`) each is computed once and kept on disk (see
    :mod:`blowfish_te.strategies.store`; the standard workloads' ship with the package).

    ``p``, ``restarts`` and ``maxiter`` default per template: p-Identity takes
    :func:`~blowfish_te.strategies.pidentity.default_rows`,
    :func:`~blowfish_te.strategies.pidentity.default_restarts` and 2,000 iterations (stopped earlier
    by measured progress) for unit changes, one start and 150 iterations for the policy-aware search
    that refines it; each Kronecker factor 1 restart and 150 iterations per round.
    """

    name = "optimized"

    def __init__(self, p: int | None = None, restarts: int | None = None, maxiter: int | None = None, seed: int = 0,
                 store: bool | StrategyStore = True):
        self.p = None if p is None else check_int(p, "p", minimum=1)
        self.restarts = None if restarts is None else check_int(restarts, "restarts", minimum=1)
        self.maxiter = None if maxiter is None else check_int(maxiter, "maxiter", minimum=1)
        self.seed = check_int(seed, "seed", minimum=0)
        if not isinstance(store, (bool, np.bool_, StrategyStore)):
            raise TypeError(f"store must be True, False or a StrategyStore, got {store!r}")
        self.store = store if isinstance(store, StrategyStore) else bool(store)

    def predicted_seconds(self, workload: Workload, policy: Policy | None = None) -> float:
        """The optimiser's predicted run time for the strategy of ``workload`` (with ``policy``:
        the exact route's, policy-aware where it applies), from sizes alone (see
        :data:`SECONDS_PER_CELL_ROW`): data-independent and the same on every machine; 0 when the
        strategies it needs are stored."""
        if self._stored(workload, None) and (policy is None or not self._policy_aware(policy)
                                              or self._stored(workload, policy)):
            return 0.0
        boxes = isinstance(workload, Boxes) and len(workload.domain) > 1
        sides = workload.domain if boxes else (workload.size,)
        seconds = sum(self._seconds(side, boxes) for side in sides)
        if policy is not None and self._policy_aware(policy):
            edges = sum(e[0].size for e in axis_edges(policy)) if boxes else policy.num_edges
            rows = self.p or (kronecker_rows if boxes else default_rows)(max(sides))
            _, _, restarts, iterations = self._settings(workload, policy)
            starts = 3 * restarts + 2 if boxes else restarts
            aware = sum(_template_seconds(starts, iterations, side, rows) for side in sides)
            seconds += aware + starts * iterations * SECONDS_PER_EDGE_ROW * edges * rows
        return seconds

    def predicted_transform_seconds(self, cells: int) -> float:
        """Predicted run time for the strategy of a transformed workload W_T over ``cells`` edges
        (a 1-D p-Identity optimisation)."""
        return self._seconds(cells, False)

    def _seconds(self, side: int, kronecker: bool) -> float:
        """Predicted seconds of the unit-change optimisation of one template over ``side`` cells."""
        rows = self.p or (kronecker_rows if kronecker else default_rows)(side)
        if kronecker:  # 3 rounds, a warm start beside the random ones after the first
            starts, iterations = 3 * (self.restarts or 1) + 2, self.maxiter or KRONECKER_MAXITER
        else:
            starts = self.restarts or default_restarts(side, rows)
            iterations = min(self.maxiter or PREDICTED_ITERATIONS, PREDICTED_ITERATIONS)
        return _template_seconds(starts, iterations, side, rows)

    def _settings(self, workload: Workload, policy: Policy | None) -> tuple[str, object, int, int]:
        """(template, rows, restarts, iteration limit) of the optimisation for ``workload``, for
        unit changes (``policy`` None) or against ``policy``: the set parameters, else each
        template's defaults (a policy-aware p-Identity search refines the unit-change strategy:
        one start, :data:`POLICY_MAXITER` iterations)."""
        if isinstance(workload, Boxes) and len(workload.domain) > 1:
            rows = tuple(self.p or kronecker_rows(k) for k in workload.domain)
            return "kronecker", rows, self.restarts or 1, self.maxiter or KRONECKER_MAXITER
        rows = self.p or default_rows(workload.size)
        if policy is not None:
            return "p-identity", rows, self.restarts or 1, self.maxiter or POLICY_MAXITER
        return "p-identity", rows, self.restarts or default_restarts(workload.size, rows), self.maxiter or PIDENTITY_MAXITER

    def store_key(self, workload: Workload, policy: Policy | None = None) -> str | None:
        """The store's key: the workload, the policy and every parameter the optimiser uses (against
        a policy also the bound on the column scales its search keeps to)."""
        params = (*self._settings(workload, policy), self.seed)
        if policy is not None:
            params += (MAX_COLUMN_SCALE,)
        return strategy_key("optimized", workload, policy, params)

    def _store(self) -> StrategyStore | None:
        if isinstance(self.store, StrategyStore):
            return self.store
        return default_store() if self.store else None

    def _stored(self, workload: Workload, policy: Policy | None) -> bool:
        store = self._store()
        return store is not None and store.contains(self.store_key(workload, policy))

    def _kept(self, workload: Workload, policy: Policy | None, compute):
        """``compute()``, or the stored strategy for (workload, policy) when there is a store."""
        store = self._store()
        if store is None:
            return compute()
        return store.get(self.store_key(workload, policy), workload.domain, compute)

    def _policy_aware(self, policy: Policy) -> bool:
        """Whether the exact route optimises against the policy (else it measures the unit-change
        strategy): not for unbounded DP, where Δ = 1 already, nor beyond MAX_EDGE_ENTRIES."""
        rows = self.p or default_rows(max(policy.shape))
        only_bottom = policy.is_unbounded_dp
        return not only_bottom and 0 < policy.num_edges * rows <= MAX_EDGE_ENTRIES

    def strategy(self, workload: Workload) -> IdentityStrategy | PIdentityStrategy | KroneckerStrategy:
        return self._cache("strategy").get(workload, lambda: self._kept(workload, None, lambda: self._optimize(workload, None)))

    def policy_strategy(self, workload: Workload, policy: Policy) -> IdentityStrategy | PIdentityStrategy | KroneckerStrategy:
        per_workload = self._cache("policy strategy").get(workload, IdentityCache)
        return per_workload.get(policy, lambda: self._for_policy(workload, policy))

    def _for_policy(self, workload: Workload, policy: Policy):
        unit = self.strategy(workload)
        if not self._policy_aware(policy):
            return unit
        aware = self._kept(workload, policy, lambda: self._optimize(workload, policy, unit))

        def error(strategy) -> float:
            return sensitivity(strategy, policy) ** 2 * self._frobenius(workload, strategy)

        return aware if error(aware) < error(unit) else unit

    def _optimize(self, workload: Workload, policy: Policy | None, unit=None):
        """The strategy for unit changes (``policy`` None) or against ``policy``'s edges; a 1-D
        policy-aware search starts from the unit-change p-Identity ``unit`` when there is one (at
        K = 1024 under line and threshold policies, random starts ended 4-16× above the unit-change
        strategy's error, this start 0.2-0.6×)."""
        template, rows, restarts, maxiter = self._settings(workload, policy)
        if template == "kronecker":
            edges = None if policy is None else axis_edges(policy)
            optimized = optimize_kronecker(workload, list(rows), restarts=restarts, rng=self.seed, maxiter=maxiter,
                                           axis_edges=edges)
        else:
            edges = None if policy is None else tuple(policy.edges.T)
            start = unit.theta if isinstance(unit, PIdentityStrategy) else None
            optimized = optimize_pidentity(workload, rows, restarts, self.seed, maxiter, edges=edges, start=start)
        if policy is None and workload.frobenius_sq() < optimized.lstsq_frobenius_sq(workload):
            return IdentityStrategy(workload.domain)
        return optimized


# -- the standard workloads' strategies and choices, built ahead of releases ----------------------


@dataclass(frozen=True)
class Built:
    """One standard workload's strategy, or ``auto``'s choice for it under a policy (``name``
    ``prefix:4096/auto/line``): where it came from, how long that took and what it is."""

    name: str
    status: str  # "stored" (found) or "built"
    seconds: float
    summary: str


def build_standard(out: str | Path | None = None, names: Iterable[str] | None = None) -> Iterator[Built]:
    """Optimise the standard workloads' strategies (``names``, default all) that are not stored
    yet, with :class:`~blowfish_te.mechanisms.Optimized`'s defaults, and plan ``auto`` for each
    under :func:`standard_policies`, writing them to ``out`` (default: the user's cache
    directory). Yields one :class:`Built` per strategy and per choice as it finishes."""
    from ..strategies.standard import standard_policies, standard_workloads
    from ..strategies.store import cache_directory

    table = standard_workloads()
    names = list(table) if names is None else list(names)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown standard workload(s) {unknown}; allowed: {', '.join(table)}")
    directory = Path(out) if out is not None else cache_directory()
    if directory is None:
        raise ValueError("the strategy cache is turned off (BLOWFISH_TE_CACHE_DIR=off): give an output folder")
    # the target folder alone decides what is missing, so a release build writes every file
    store = StrategyStore(directory, shipped=False)
    mech = Optimized(store=store)
    for name in names:
        workload = table[name]()
        status = "stored" if store.contains(mech.store_key(workload)) else "built"
        started = time.perf_counter()
        strategy = mech.strategy(workload)
        yield Built(name, status, time.perf_counter() - started, strategy.name)
        for spec, policy in standard_policies(workload).items():
            yield _build_choice(store, f"{name}/auto/{spec}", workload, policy)


def _build_choice(store, name: str, workload: Workload, policy) -> Built:
    from ..routes import plan_routes
    from ..strategies.store import building_into, choice_key
    from .auto import Auto

    chooser = Auto()
    found = store.load_record(choice_key(chooser, workload, policy, "auto")) is not None
    started = time.perf_counter()
    with building_into(store):
        chosen = plan_routes(workload, policy, 1.0, chooser)
    return Built(name, "stored" if found else "built", time.perf_counter() - started, chosen._label(chosen.chosen))
