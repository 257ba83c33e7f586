"""Audit every mechanism under the standard policies.

``sweep("ci")`` runs :func:`~blowfish_te.audit.audit` for every mechanism of
:data:`blowfish_te.mechanisms.MECHANISMS` (default parameters), the parametrised ones
(``MatrixMechanism``, ``NonNegative``) and variants with their own privacy arguments, under
``line``, ``threshold``, ``grid`` and ``unbounded`` policies with their prefix workloads (the
mechanisms for marginals with the marginal of every attribute and the total).
Data-dependent mechanisms on cyclic policies run through a spanning tree (hub for threshold graphs,
comb for grids) at ε/ℓ. Mechanisms that do not apply to a policy (1-D native mechanisms on a grid)
are skipped with the library's reason. The confidence is family-wise over the whole sweep:
each audit runs at 1 - (1 - confidence) / #audits (Bonferroni).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import trees
from .. import workloads as wl
from ..forest import CyclicPolicyError
from ..mechanisms import (
    DAWA,
    MECHANISMS,
    MWEM,
    Identity,
    MatrixMechanism,
    Mechanism,
    NonNegative,
    PartitionThenTransform,
)
from ..policies import Policy, grid, line, threshold, unbounded
from ..release import answer
from ..workloads import Workload
from .core import AuditReport, audit
from .pairs import KINDS

__all__ = ["SWEEP_CONFIGS", "SweepConfig", "SweepRow", "sweep", "sweep_mechanisms", "sweep_policies", "sweep_table"]


@dataclass(frozen=True)
class SweepConfig:
    """Sizes of a sweep: domains (k cells in 1-D, ``grid_shape`` in 2-D, threshold ``theta``), ε,
    runs per histogram, pair generators, family-wise confidence, seed, MWEM's parameters (its
    defaults, 10 rounds of 100 updates, cost about 80 ms a run), whether to add the variants
    (DAWA at ratio 0.5, partition-then-transform with the other two partitions at a 0.25
    split: with prefix workloads its default split is 0, no partition), ``reduced``: the
    fraction of the runs given to the slowest mechanisms (10-40 ms a release at K = 8), and
    ``secure``: audit the hardened samplers of ``rng=None`` instead of the seeded float path."""

    name: str
    k: int
    theta: int
    grid_shape: tuple[int, int]
    n_select: int
    n_detect: int
    kinds: tuple[str, ...] = KINDS
    per_kind: int = 1
    epsilon: float = 1.0
    confidence: float = 0.95
    seed: int = 0
    mwem: dict = field(default_factory=lambda: {"rounds": 3, "updates": 10})
    variants: bool = True
    reduced: dict = field(default_factory=dict)
    secure: bool = False


_SLOW = ("ordered_hierarchical", "ordered_hierarchical_tuned", "partition_then_transform", "nonnegative(identity)",
         "ptt(noisy_pairing)", "ptt(matching)")

#: ``"ci"``: every mechanism × policy in about a minute on two cores. A smoke test: 60 detection
#: runs (30 for the slowest) are enough to FAIL a leak that separates the two sides with
#: near-certainty, but bound subtler losses by about 0 (the controls in the tests show the power).
#: ``"large"``: the benchmark configuration (about 10 minutes), 600 detection runs (150 for the
#: slowest), four pair kinds and the variants.
SWEEP_CONFIGS = {
    "ci": SweepConfig(
        "ci", k=8, theta=2, grid_shape=(3, 3), n_select=20, n_detect=60, kinds=("tree", "single"), variants=False,
        reduced=dict.fromkeys(_SLOW, 0.5),
    ),
    "large": SweepConfig(
        "large", k=8, theta=2, grid_shape=(3, 3), n_select=200, n_detect=600,
        kinds=("boundary", "tree", "partition", "single"), reduced=dict.fromkeys(_SLOW, 0.25),
    ),
}


def _prefix_strategy(workload: Workload) -> Workload:
    """Prefix (origin-anchored box) queries over the workload's domain: a full-rank strategy."""
    return wl.prefix(workload.domain)


def sweep_mechanisms(config: SweepConfig) -> dict[str, Mechanism]:
    """Every registered mechanism with default parameters (MWEM with ``config.mwem``), the
    parametrised ones and, with ``config.variants``, variants whose privacy rests on other code."""
    mechanisms: dict[str, Mechanism] = {
        name: (cls(**config.mwem) if cls is MWEM else cls()) for name, cls in MECHANISMS.items()
    }
    mechanisms["matrix(prefix)"] = MatrixMechanism(_prefix_strategy)
    mechanisms["nonnegative(identity)"] = NonNegative(Identity())
    if config.variants:
        mechanisms["dawa(ratio 0.5)"] = DAWA(ratio=0.5, penalty=1.0)
        mechanisms["ptt(noisy_pairing)"] = PartitionThenTransform("noisy_pairing", epsilon_split=0.25)
        mechanisms["ptt(matching)"] = PartitionThenTransform("matching", epsilon_split=0.25)
        mechanisms["dawa(no check)"] = DAWA(select=False)
        mechanisms["ptt(no check)"] = PartitionThenTransform(select=False)
    return mechanisms


def sweep_policies(config: SweepConfig) -> dict[str, tuple[Policy, Workload]]:
    """line, threshold, grid and unbounded policies with prefix workloads (2-D: origin-anchored
    rectangles); mechanisms that need a grid meet unbounded DP on the grid's shape."""
    k = config.k
    return {
        "line": (line(k), wl.prefix(k)),
        "threshold": (threshold(k, config.theta), wl.prefix(k)),
        "grid": (grid(config.grid_shape), wl.prefix(config.grid_shape)),
        "unbounded": (unbounded(k), wl.prefix(k)),
    }


def _spanning_tree(policy: Policy) -> str:
    """The tree a data-dependent mechanism runs through on a cyclic policy: hub, else comb, bfs, star."""
    named = trees.candidates(policy)
    return next(name for name in ("hub", "comb", "bfs", "stars") if name in named)


@dataclass(frozen=True)
class SweepRow:
    """One mechanism × policy: its audit report, or why it was skipped."""

    mechanism: str
    policy: str
    report: AuditReport | None
    skipped: str | None = None


def _setting(mechanism: Mechanism, policy: Policy, workload: Workload, epsilon: float) -> tuple[str | None, str | None]:
    """(tree, None) when a probe release on an empty histogram succeeds (tree None: the
    mechanism's own route; a spanning tree when it refuses the cyclic policy), else (None, reason)."""
    empty = np.zeros(policy.size, dtype=np.int64)
    try:
        answer(workload, empty, policy, epsilon, mechanism, rng=0)
        return None, None
    except CyclicPolicyError:
        tree = _spanning_tree(policy)
    except ValueError as exc:
        return None, str(exc).split(":")[0]
    answer(workload, empty, policy, epsilon, mechanism, rng=0, tree=tree)
    return tree, None


def sweep(
    config: str | SweepConfig = "ci",
    mechanisms: Sequence[str] | dict[str, Mechanism] | None = None,
    policies: Sequence[str] | None = None,
) -> list[SweepRow]:
    """Audit each mechanism × policy of ``config`` (a name in :data:`SWEEP_CONFIGS` or a
    :class:`SweepConfig`); ``mechanisms`` and ``policies`` restrict to some labels, and
    ``mechanisms`` may also be a dict label → Mechanism (e.g. a new one)."""
    if isinstance(config, str):
        if config not in SWEEP_CONFIGS:
            raise ValueError(f"config must be one of {sorted(SWEEP_CONFIGS)} or a SweepConfig, got {config!r}")
        config = SWEEP_CONFIGS[config]
    if not isinstance(config, SweepConfig):
        raise TypeError(f"config must be a name or a SweepConfig, got {type(config).__name__}")
    known = sweep_mechanisms(config)
    if isinstance(mechanisms, dict):
        mechs = dict(mechanisms)
    else:
        names = list(known) if mechanisms is None else list(mechanisms)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"mechanisms {unknown} are not in the sweep; known: {', '.join(known)}")
        mechs = {n: known[n] for n in names}
    all_policies = sweep_policies(config)
    chosen = list(all_policies) if policies is None else list(policies)
    unknown = [p for p in chosen if p not in all_policies]
    if unknown:
        raise ValueError(f"policies {unknown} are not in the sweep; known: {', '.join(all_policies)}")

    def setting_of(mech: Mechanism, name: str) -> tuple[Policy, Workload]:
        """Mechanisms that need a grid meet unbounded DP on the grid shape; those that answer
        marginals only, the marginal of every attribute and the total."""
        if name == "unbounded" and mech.tags.needs_grid:
            return unbounded(config.grid_shape), wl.prefix(config.grid_shape)
        policy, workload = all_policies[name]
        if mech.tags.needs_marginals:
            workload = wl.marginals(policy.shape, [(a,) for a in range(policy.ndim)] + [()])
        return policy, workload

    settings = {
        (label, name): _setting(mech, *setting_of(mech, name), config.epsilon) for label, mech in mechs.items() for name in chosen
    }
    runs = sum(reason is None for _, reason in settings.values())
    per_audit = 1 - (1 - config.confidence) / max(runs, 1)
    rows = []
    for (label, name), (tree, reason) in settings.items():
        if reason is not None:
            rows.append(SweepRow(label, name, None, reason))
            continue
        policy, workload = setting_of(mechs[label], name)
        seed = np.random.default_rng([config.seed, zlib.crc32(f"{label}|{name}".encode())])
        fraction = config.reduced.get(label, 1.0)
        report = audit(
            mechs[label], policy, workload, config.epsilon,
            n_select=max(1, round(config.n_select * fraction)), n_detect=max(1, round(config.n_detect * fraction)),
            confidence=per_audit, rng=seed, tree=tree, kinds=config.kinds, per_kind=config.per_kind,
            secure=config.secure,
        )
        rows.append(SweepRow(label, name, report))
    return rows


def sweep_table(rows: Sequence[SweepRow]) -> str:
    """A markdown table: per mechanism × policy the route, the noise samplers (short names), the
    worst pair's ε lower bound against its claim ε·d_G, the verdict and the time."""
    lines = [
        "| mechanism | policy | route | noise | pairs | worst pair (kind, move) | ε lower | claimed | ratio | verdict | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row.report is None:
            lines.append(f"| {row.mechanism} | {row.policy} | – | – | – | – | – | – | – | skipped: {row.skipped} | – |")
            continue
        r = row.report
        w = r.worst
        noise = "; ".join(part.split(" (")[0] for part in r.sampler.split("; "))
        lines.append(
            f"| {row.mechanism} | {row.policy} | {r.route} | {noise} | {len(r.results)} | {w.pair.kind}, {w.pair.move} "
            f"| {w.epsilon_lower:.3f} | {w.claimed:.3g} | {w.ratio:.2f} | {'PASS' if r.passed else '**FAIL**'} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)
