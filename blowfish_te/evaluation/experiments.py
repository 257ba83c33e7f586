"""Kinds of experiment a suite runs, behind one interface (:class:`Experiment`): answering a
query workload with a mechanism, or private k-means. A suite's ``[workload] kind`` picks one
(:func:`experiment`); adding a kind is a subclass here and an entry of :data:`EXPERIMENTS`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import kmeans as km
from .. import workloads as wl
from ..mechanisms import mechanism_class
from ..metrics import per_query_mse, scaled_l2_error
from ..release import answer
from ._checks import fail, integer, unknown

if TYPE_CHECKING:
    from ..mechanisms import Mechanism
    from ..policies import Policy


class Experiment:
    """What a kind of experiment decides: the keys of its ``[workload]`` table, which mechanisms
    and parameters it runs, what one run measures, and which metrics its figures draw."""

    #: The ``[workload]`` keys this kind accepts besides ``kind``.
    settings_keys: frozenset = frozenset()
    #: What the kind's runs are, for messages.
    description: str = ""
    #: Whether its mechanisms take a spanning tree (``tree``) for cyclic policies.
    takes_tree: bool = True
    #: Whether the suite's (mechanism, policy) pairs are planned at load time on a small domain.
    checks_pairs: bool = True

    def settings(self, where: str, kind: str, work: dict, merged: dict) -> dict:
        """The validated ``[workload]`` table (``merged`` holds ``[tiny]`` overrides)."""
        raise NotImplementedError

    def check_mechanism(self, where: str, name: str, params: dict) -> None:
        """Refuse a mechanism entry the kind cannot run."""
        raise NotImplementedError

    def truth(self, workload: dict, x: np.ndarray, cache: dict) -> np.ndarray | None:
        """What the runs of one data sample are measured against (computed once per sample)."""
        return None

    def describe(self, workload: dict, x: np.ndarray, cache: dict) -> dict:
        """The row's ``workload`` and ``queries`` columns."""
        raise NotImplementedError

    def run(
        self, row: dict, workload: dict, x: np.ndarray, truth: np.ndarray | None, policy: Policy, spec: Any,
        mechanism: Callable[[], Mechanism], seed: np.random.SeedSequence, cache: dict,
    ) -> None:
        """One run: fill ``row``'s measured columns (raise ValueError or TypeError when refused)."""
        raise NotImplementedError

    def metrics(self, scaled: bool) -> tuple[str, ...]:
        """The metrics its figures draw."""
        return ("mse", "scaled_l2") if scaled else ("mse",)


def _workload(workload: dict, shape, cache: dict):
    key = ("workload", shape)
    if key not in cache:
        cache[key] = wl.from_spec(workload, shape)
    return cache[key]


class QueryWorkload(Experiment):
    """A workload of :mod:`blowfish_te.workloads` answered by a registered mechanism through
    :func:`blowfish_te.answer`; a run measures the per-query MSE and the scaled L2 error."""

    settings_keys = frozenset({"queries", "seed", "order"})
    description = "random workloads"

    def settings(self, where: str, kind: str, work: dict, merged: dict) -> dict:
        settings = {"kind": kind}
        if wl.SPEC_KINDS[kind].order:
            settings["order"] = integer(where, "order", work.get("order"), 0)
            if "queries" in work or "seed" in work:
                fail(where, f"queries and seed apply to random workloads only, not {kind!r}")
        elif "order" in work:
            fail(where, f"order applies to marginals only, not {kind!r}")
        elif wl.SPEC_KINDS[kind].random:
            settings["queries"] = integer(where, "queries", merged.get("queries"), 1)
            settings["seed"] = integer(where, "seed", work.get("seed", 0), 0)
        elif "queries" in work or "seed" in work:
            fail(where, f"queries and seed apply to random workloads only, not {kind!r}")
        return settings

    def check_mechanism(self, where: str, name: str, params: dict) -> None:
        if name == "kmeans":
            fail(where, "mechanism 'kmeans' runs in suites of workload kind 'kmeans' only")
        try:
            cls = mechanism_class(name)
        except (TypeError, ValueError) as err:
            fail(where, str(err))
        try:
            cls(**params)
        except (TypeError, ValueError) as err:
            fail(where, f"mechanism {name!r} refuses params {params}: {err}")

    def truth(self, workload: dict, x: np.ndarray, cache: dict) -> np.ndarray:
        return _workload(workload, x.shape, cache) @ x.ravel()

    def describe(self, workload: dict, x: np.ndarray, cache: dict) -> dict:
        queries = _workload(workload, x.shape, cache)
        return {"workload": queries.name, "queries": queries.num_queries}

    def run(
        self, row: dict, workload: dict, x: np.ndarray, truth: np.ndarray | None, policy: Policy, spec: Any,
        mechanism: Callable[[], Mechanism], seed: np.random.SeedSequence, cache: dict,
    ) -> None:
        start = time.perf_counter()
        release = answer(_workload(workload, x.shape, cache), x, policy, row["epsilon_used"], mechanism(),
                         rng=np.random.default_rng(seed), tree=spec.tree_for(policy))
        row["runtime_s"] = time.perf_counter() - start
        row.update(mse=per_query_mse(truth, release.answers), scaled_l2=scaled_l2_error(truth, release.answers, row["scale"]),
                   expected_mse=release.expected_mse, route=release.route, tree=release.tree, stretch=release.stretch)


class KMeans(Experiment):
    """Private k-means (:func:`blowfish_te.kmeans.blowfish_kmeans`): mechanisms named ``kmeans``
    with ``params`` among ``sensitivity`` and ``size_share``; a run measures the objective over
    that of non-private Lloyd iterations from the same public starting centres."""

    settings_keys = frozenset({"clusters", "iterations"})
    description = "kmeans"
    takes_tree = False
    checks_pairs = False  # the variants run on any 1-D or 2-D policy
    params = frozenset({"sensitivity", "size_share"})

    def settings(self, where: str, kind: str, work: dict, merged: dict) -> dict:
        return {"kind": kind, "clusters": integer(where, "clusters", work.get("clusters", 4), 1),
                "iterations": integer(where, "iterations", work.get("iterations", 10), 1)}

    def check_mechanism(self, where: str, name: str, params: dict) -> None:
        if name != "kmeans":
            fail(where, f"the mechanisms of a kmeans suite are named 'kmeans' (variants through params), got {name!r}")
        unknown(f"{where} params", params, set(self.params))
        try:
            km.check_variant(**params)
        except (TypeError, ValueError) as err:
            fail(where, f"kmeans refuses params {params}: {err}")

    def describe(self, workload: dict, x: np.ndarray, cache: dict) -> dict:
        return {"workload": f"kmeans k={workload['clusters']} T={workload['iterations']}", "queries": workload["clusters"]}

    def run(
        self, row: dict, workload: dict, x: np.ndarray, truth: np.ndarray | None, policy: Policy, spec: Any,
        mechanism: Callable[[], Mechanism], seed: np.random.SeedSequence, cache: dict,
    ) -> None:
        gen = np.random.default_rng(seed)
        centres = km.initial_centres(x.shape, workload["clusters"], gen)
        start = time.perf_counter()
        result = km.blowfish_kmeans(x, policy, row["epsilon_used"], workload["clusters"], workload["iterations"], gen,
                                    centres=centres, **spec.params)
        row["runtime_s"] = time.perf_counter() - start
        key = ("lloyd", x.shape, centres.tobytes())  # the baseline, once per start
        if key not in cache:
            cache[key] = km.lloyd(x, x.shape, workload["clusters"], workload["iterations"], centres=centres).objective
        base = cache[key]
        row.update(objective=result.objective, objective_ratio=result.objective / base if base > 0 else None)

    def metrics(self, scaled: bool) -> tuple[str, ...]:
        return ("objective_ratio",)


#: Experiment kinds by the ``[workload] kind`` that selects them.
EXPERIMENTS: dict[str, Experiment] = {**dict.fromkeys(wl.KINDS, QueryWorkload()), "kmeans": KMeans()}


def experiment(kind: str) -> Experiment:
    """The experiment of a suite's ``[workload] kind``."""
    return EXPERIMENTS[kind]
