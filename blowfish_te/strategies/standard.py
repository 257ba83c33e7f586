"""The standard workloads whose optimised strategies and ``auto`` choices ship with the package.

Histograms, prefixes and all ranges over 2⁸…2¹² cells, and DPBench's 2,000 random rectangles
(seed 0) over 64², 128² and 256² cells: the workloads of the DPBench and HDMM comparisons. Their strategies take up to
about 100 s each to optimise (K = 4096), and ``auto`` compares every candidate's error under a
policy in up to 15 s, so both are built once with ``blowfish-te strategies`` (into the user's
cache, or with ``--out`` into the package's ``data/strategies`` folder before a release): the
strategies, and ``auto``'s choice under each of :func:`standard_policies` (any ε: the choice reads
the workload and the policy only). A first release of these in a fresh process then plans in a
fraction of a second plus the chosen mechanism's own time. They are built by
:func:`blowfish_te.mechanisms.optimized.build_standard`.
"""

from __future__ import annotations

from collections.abc import Callable

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
