"""The standard workloads whose optimised strategies and ``auto`` choices ship with the package.

Histograms, prefixes and all ranges over 2⁸…2¹² cells, and DPBench's 2,000 random rectangles
(seed 0) over 64², 128² and 256² cells: the workloads of the DPBench and HDMM comparisons. Their strategies take up to
about 100 s each to optimise (K = 4096), and ``auto`` compares every candidate's error under a
policy in up to 15 s, so both are built once with ``blowfish-te strategies`` (into the user's
cache, or with ``--out`` into the package's ``data/strategies`` folder before a release): the
strategies, and ``auto``'s choice under each of :func:`standard_policies` (any ε: the choice reads
the workload and the policy only). A first release of these in a fresh process then plans in a
fraction of a second plus the chosen mechanism's own time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import policies, workloads
from ..workloads import Workload

#: Sides of the 1-D standard workloads.
SIDES_1D = (256, 512, 1024, 2048, 4096)
#: Sides of the 2-D grids of DPBench's rectangles.
SIDES_2D = (64, 128, 256)
#: Rectangles per 2-D standard workload, and their seed.
RECTANGLES, RECTANGLES_SEED = 2000, 0
#: Policies (spec forms) under which ``auto``'s choice is stored, by the domain's dimension.
POLICIES = {1: ("unbounded", "line"), 2: ("unbounded", "grid:1")}


def standard_workloads() -> dict[str, Callable[[], Workload]]:
    """Builders of the standard workloads by name (``identity:1024``, ``prefix:4096``,
    ``all_ranges:256``, ``dpbench_ranges:2000@128x128``)."""
    out: dict[str, Callable[[], Workload]] = {}
    for k in SIDES_1D:
        out[f"identity:{k}"] = lambda k=k: workloads.identity(k)
        out[f"prefix:{k}"] = lambda k=k: workloads.prefix(k)
        out[f"all_ranges:{k}"] = lambda k=k: workloads.all_ranges(k)
    for side in SIDES_2D:
        out[f"dpbench_ranges:{RECTANGLES}@{side}x{side}"] = (
            lambda side=side: workloads.dpbench_ranges((side, side), RECTANGLES, rng=RECTANGLES_SEED))
    return out


def standard_policies(workload: Workload) -> dict[str, object]:
    """The policies under which ``auto``'s choice for ``workload`` is stored, by spec."""
    size = workload.domain if len(workload.domain) > 1 else workload.size
    return {spec: policies.from_spec(spec, size) for spec in POLICIES[len(workload.domain)]}


@dataclass(frozen=True)
class Built:
    """One standard workload's strategy, or ``auto``'s choice for it under a policy (``name``
    ``prefix:4096/auto/line``): where it came from, how long that took and what it is."""

    name: str
    status: str  # "stored" (found) or "built"
    seconds: float
    summary: str


def build_standard(out: str | Path | None = None, names=None) -> Iterator[Built]:
    """Optimise the standard workloads' strategies (``names``, default all) that are not stored
    yet, with :class:`~blowfish_te.mechanisms.Optimized`'s defaults, and plan ``auto`` for each
    under :func:`standard_policies`, writing them to ``out`` (default: the user's cache
    directory). Yields one :class:`Built` per strategy and per choice as it finishes."""
    from ..mechanisms import Optimized
    from .store import StrategyStore, cache_directory

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
    from ..mechanisms import Auto
    from ..release import plan
    from .store import building_into, choice_key

    chooser = Auto()
    found = store.load_record(choice_key(chooser, workload, policy, "auto")) is not None
    started = time.perf_counter()
    with building_into(store):
        chosen = plan(workload, policy, 1.0, mechanism=chooser)
    return Built(name, "stored" if found else "built", time.perf_counter() - started, chosen._label(chosen.chosen))
