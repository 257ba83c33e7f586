"""Declarative experiment suites: one TOML file per experiment.

A suite names datasets, policies, one workload, mechanisms, ε values and trials; the runner
(:mod:`blowfish_te.evaluation.runner`) takes the product. Layout::

    name = "anuarbek_fig4"            # required; also the default results folder
    description = "..."               # required: what is reproduced, and how ours differs
    master_seed = 2026                # every data and algorithm seed derives from it
    trials = 5                        # algorithm runs per cell
    epsilons = [0.001, 0.01, 0.1]
    policies = ["unbounded", "line"]  # unbounded | complete | line | threshold:θ | threshold:full | grid:θ

    [data]
    datasets = ["HEPTH", "synthetic-1d"]
    domain = 4096                     # optional: sum adjacent cells down to it (DPBench); a list of
                                      # shapes, e.g. [[128, 128], [256, 256]], runs each in turn
    scales = [1000, 100000]           # optional: DPBench sampling of this many records
    data_seeds = 5                    # optional, with scales only: samples per scale

    [workload]
    kind = "identity"                 # identity | prefix | all_ranges | random_ranges | random_rects | kmeans
    queries = 2000                    # random kinds only
    seed = 0                          # random kinds only: the fixed workload seed
    clusters = 4                      # kmeans only: k (default 4)
    iterations = 10                   # kmeans only: Lloyd iterations (default 10)

    [[mechanisms]]
    name = "dawa"                     # a name of blowfish_te.mechanisms.MECHANISMS
    label = "DAWA (ε/2-DP)"           # optional, defaults to the name
    params = { ratio = 0.25 }         # optional constructor parameters
    policies = ["unbounded"]          # optional: run under these of the suite's policies only
    domains = [[128, 128]]            # optional: run on these of the suite's domains only ([tiny]'s
                                      # domain replaces the suite's, and this filter with them)
    epsilon_factor = 0.5              # optional: run at this fraction of each ε
    tree = "hub"                      # optional: spanning tree for cyclic policies (data-dependent
                                      # mechanisms need one), a name from trees.candidates

    Every mechanism is checked against every policy it runs under when the suite is loaded: a pair
    that :func:`blowfish_te.plan` refuses, or whose release the mechanism refuses (a grid mechanism
    on a 1-D domain or on x_T of a spanning tree, a 1-D mechanism on a grid), is a
    :class:`SuiteError` then, not a column of error rows later. The check plans and releases on a
    small domain of the suite's dimensionality (:data:`PROBE_SIDE` cells per axis, one record per
    cell) with θ scaled so that the policy keeps its kind (a forest, plain DP, or neither); what
    only the real data can reveal stays a run-time error row.

    A ``kmeans`` suite runs :func:`blowfish_te.kmeans.blowfish_kmeans` instead of answering a
    workload: its mechanisms are all named ``"kmeans"``, with ``params`` among ``sensitivity`` and
    ``size_share``, and a row measures the objective over that of non-private Lloyd iterations
    from the same public starting centres.

    [tiny]                            # optional overrides for a seconds-long CI run
    datasets = ["synthetic-1d"]       # any of: datasets domain scales data_seeds trials
    epsilons = [0.1]                  #         epsilons policies queries mechanisms (labels kept)

Every error is a :class:`SuiteError` naming the file and the offending key.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np

from .. import policies as pol
from .. import workloads as wl
from ..errors import SpecError, SuiteError
from ..mechanisms import Mechanism, mechanism_class
from ..release import plan
from ._checks import fail, integer, listed, unknown
from .experiments import EXPERIMENTS, Experiment, experiment

__all__ = ["KINDS", "PROBE_SIDE", "SUITES_DIR", "MechanismSpec", "Suite", "SuiteError", "load_suite", "parse_suite"]


def _suites_dir() -> pathlib.Path:
    try:  # installed (wheel or editable): the package data
        return pathlib.Path(str(resources.files("blowfish_te.suites")))
    except ModuleNotFoundError:  # a source checkout on sys.path without installing: the folder itself
        return pathlib.Path(__file__).resolve().parents[2] / "workloads"


#: The published suites: the repository's top-level ``workloads/`` folder, installed with the
#: package as ``blowfish_te.suites``.
SUITES_DIR = _suites_dir()

_TOP = {"name", "description", "master_seed", "trials", "epsilons", "policies", "data", "workload", "mechanisms", "tiny"}
_DATA = {"datasets", "domain", "scales", "data_seeds"}
#: Experiment kinds: the workload kinds of :mod:`blowfish_te.workloads`, and private k-means
#: (:mod:`blowfish_te.evaluation.experiments`).
KINDS = tuple(EXPERIMENTS)
_MECHANISM = {"name", "label", "params", "policies", "domains", "epsilon_factor", "tree"}
_TINY = {"datasets", "domain", "scales", "data_seeds", "trials", "epsilons", "policies", "queries", "mechanisms"}


@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism of a suite: a registered name, constructor parameters and where it runs."""

    name: str
    label: str
    params: dict = field(default_factory=dict)
    policies: tuple[str, ...] | None = None
    epsilon_factor: float = 1.0
    tree: str | None = None
    domains: tuple[tuple[int, ...], ...] | None = None

    def runs_on(self, domain: tuple[int, ...] | None) -> bool:
        """Whether this mechanism runs on ``domain`` (None: the datasets' own shapes)."""
        return self.domains is None or domain in self.domains

    def build(self) -> Mechanism:
        """A fresh mechanism instance with the suite's parameters."""
        return mechanism_class(self.name)(**self.params)

    def tree_for(self, policy: pol.Policy) -> str | None:
        """The spanning tree to pass for ``policy``: the suite's tree for a cyclic policy, none
        for a forest (which is its own exact transform)."""
        return None if policy.is_forest else self.tree


@dataclass(frozen=True)
class Suite:
    """A validated experiment: the grid datasets × scales × data seeds × policies × mechanisms × ε × trials."""

    name: str
    description: str
    master_seed: int
    trials: int
    epsilons: tuple[float, ...]
    policies: tuple[str, ...]
    datasets: tuple[str, ...]
    domains: tuple[tuple[int, ...], ...] | None
    scales: tuple[int, ...] | None
    data_seeds: int
    workload: dict
    mechanisms: tuple[MechanismSpec, ...]
    path: str | None = None

    def fingerprint(self) -> str:
        """A hash of everything that decides the rows (not the file's path or description)."""
        content = {k: v for k, v in self.__dict__.items() if k not in ("path", "description")}
        # a mechanism without a domain filter hashes as before the filter existed
        content["mechanisms"] = [{k: v for k, v in m.__dict__.items() if not (k == "domains" and v is None)}
                                 for m in self.mechanisms]
        content["seeding"] = "paired"  # runs seeded per trial, shared by mechanisms (see runner)
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=list).encode()).hexdigest()[:16]


def _domains(where: str, value) -> tuple[tuple[int, ...], ...] | None:
    """``domain``: one shape (an int, or a list of ints) or a list of shapes (lists), each run in turn."""
    if value is None:
        return None
    shapes = value if isinstance(value, list) and value and all(isinstance(v, list) for v in value) else [value]
    out = []
    for shape in shapes:
        shape = listed(where, "domain", [shape] if isinstance(shape, int) and not isinstance(shape, bool) else shape, int, 0)
        out.append(tuple(shape))
    if len({len(shape) for shape in out}) != 1:
        fail(where, f"the domains of a suite must all have the same number of axes, got {value!r}")
    return tuple(out)


def _mechanism(where: str, entry, policies: tuple[str, ...], kind: Experiment,
               domains: tuple[tuple[int, ...], ...] | None) -> MechanismSpec:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        fail(where, f"a mechanism must be a name or a table, got {entry!r}")
    unknown(where, entry, _MECHANISM)
    name = entry.get("name")
    params = entry.get("params", {})
    if not isinstance(params, dict):
        fail(where, f"params must be a table, got {params!r}")
    kind.check_mechanism(where, name, params)
    label = entry.get("label", name)
    if not isinstance(label, str) or not label:
        fail(where, f"label must be a non-empty string, got {label!r}")
    only = entry.get("policies")
    if only is not None:
        only = listed(where, "policies", only, str)
        missing = sorted(set(only) - set(policies))
        if missing:
            fail(where, f"policies {missing} are not among the suite's policies {list(policies)}")
    only_on = entry.get("domains")
    if only_on is not None:
        only_on = _domains(where, only_on)
        if domains is None:
            fail(where, "domains applies only when the suite sets [data] domain")
        missing = [list(d) for d in only_on if d not in domains]
        if missing:
            fail(where, f"domains {missing} are not among the suite's domains {[list(d) for d in domains]}")
    factor = entry.get("epsilon_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        fail(where, f"epsilon_factor must be a number in (0, 1], got {factor!r}")
    tree = entry.get("tree")
    if tree is not None and not kind.takes_tree:
        fail(where, f"tree does not apply to {kind.description} (its runs release on the policy itself)")
    if tree is not None and not isinstance(tree, str):
        fail(where, f"tree must be the name of a spanning tree (e.g. 'hub', 'snake', 'bfs'), got {tree!r}")
    return MechanismSpec(name, label, dict(params), only, float(factor), tree, only_on)


#: Cells per axis of the small domain on which a suite's (mechanism, policy) pairs are checked at
#: load time, by number of axes (domains smaller than this are checked as they are).
PROBE_SIDE = {1: 32, 2: 8}
_PROBE_QUERIES = 32  # random workloads are drawn this large on the small domain
_ONE_D_KINDS = ("all_ranges", "random_ranges")


def _probe_domains(domains, kind: str, policies: tuple[str, ...]) -> tuple[list, bool]:
    """The domains to check pairs on, as (real shape or None, small shape), and whether a pair is
    refused when any of them refuses it (the suite's own domains) or only when all do (datasets at
    their native shapes, of a dimensionality the suite does not fix: 1-D and 2-D are both tried)."""
    if domains is not None:
        return [(d, tuple(min(s, PROBE_SIDE.get(len(d), 4)) for s in d)) for d in domains], False
    ndims = {1, 2}
    if kind in _ONE_D_KINDS or any(pol.PolicySpec.parse(p).one_dimensional for p in policies):
        ndims &= {1}
    if kind == "random_rects":
        ndims &= {2}
    return [(None, (PROBE_SIDE[d],) * d) for d in sorted(ndims)], True


def _probe_specs(spec: str, real, small: tuple[int, ...]) -> list[str]:
    """``spec`` for the small domain, of the same kind as on the real one: θ = 1 stays, a θ that
    reaches across the real domain becomes the complete graph (plain DP), any other θ at most
    the small domain's span - 1 (cyclic, not DP). With the real shape unknown (assumed at least
    the small one), a θ that spans the small domain may be either: both are returned."""
    parsed = pol.PolicySpec.parse(spec)
    if parsed.theta is None:
        return [spec]
    kind, theta, span = parsed.kind, parsed.theta, sum(s - 1 for s in small)
    full = "threshold:full" if kind == "threshold" else "complete"
    if real is not None and theta >= sum(s - 1 for s in real):
        return [full]
    scaled = f"{kind}:{theta if theta == 1 else max(1, min(theta, span - 1))}"
    return [scaled, full] if real is None and theta >= span else [scaled]


def _refusal(spec: MechanismSpec, policy_spec: str, kind: dict, small: tuple[int, ...]) -> str | None:
    """Why ``spec`` cannot release under ``policy_spec`` on the small domain, or None: the same
    :func:`blowfish_te.plan` the runner's releases go through, executed on one record per cell."""
    try:
        policy = pol.from_spec(policy_spec, small)
        workload = wl.from_spec(kind, small)
        the_plan = plan(workload, policy, 1.0, spec.build(), tree=spec.tree_for(policy))
        the_plan.release(np.ones(small, dtype=np.int64), np.random.default_rng(0))
    except (ValueError, TypeError) as err:
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def _check_pairs(where: str, workload: dict, domains, policies: tuple[str, ...], mechanisms, index: dict) -> None:
    """Refuse the first (mechanism, policy) pair of the suite that cannot run (see the module)."""
    probes, every = _probe_domains(domains, workload["kind"], policies)
    if not probes:
        fail(where, f"workload {workload['kind']!r} and policies {list(policies)} fit no common number of axes")
    kind = {**workload, "queries": min(workload["queries"], _PROBE_QUERIES)} if "queries" in workload else workload
    for real, _ in probes if not every else ():
        try:
            wl.from_spec(kind, real)
        except SpecError as err:
            fail(f"{where} [workload]", str(err))
    for spec in mechanisms:
        for policy_spec in spec.policies or policies:
            if policy_spec not in policies:  # left out by [tiny]
                continue
            reasons = []
            for real, small in [p for p in probes if every or spec.runs_on(p[0])]:
                refusals = [_refusal(spec, probe, kind, small) for probe in _probe_specs(policy_spec, real, small)]
                reasons.append(refusals[0] if all(refusals) else None)
            refused = all(reasons) if every else any(reasons)
            if refused:
                (_, small), reason = next((p, r) for p, r in zip(probes, reasons) if r)
                name = repr(spec.label) + ("" if spec.label == spec.name else f" ({spec.name})")
                fail(f"{where} mechanisms[{index[spec.label]}]", f"mechanism {name} cannot run under policy "
                      f"{policy_spec!r}: {reason} (found on a small domain of shape {small})")


def load_suite(path: str | pathlib.Path, tiny: bool = False) -> Suite:
    """Read and validate a suite: a path to a TOML file, or the name of one in :data:`SUITES_DIR`.

    ``tiny=True`` applies the file's ``[tiny]`` overrides (a configuration small enough for CI).
    """
    path = pathlib.Path(path)
    if not path.suffix and not path.exists():
        path = SUITES_DIR / f"{path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in SUITES_DIR.glob("*.toml"))
        raise SuiteError(f"suite {str(path)!r} not found; suites in {SUITES_DIR}: {', '.join(known) or 'none'}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: not valid TOML: {err}") from None
    return parse_suite(raw, str(path), tiny)


def parse_suite(raw: dict, where: str = "suite", tiny: bool = False) -> Suite:
    """Validate a suite given as a dict (the parsed TOML)."""
    unknown(where, raw, _TOP)
    for key in ("name", "description", "epsilons", "policies", "data", "workload", "mechanisms"):
        if key not in raw:
            fail(where, f"missing required key {key!r}")
    data, work = raw["data"], raw["workload"]
    if not isinstance(data, dict) or not isinstance(work, dict):
        fail(where, "data and workload must be tables")
    unknown(f"{where} [data]", data, _DATA)
    if "datasets" not in data:
        fail(f"{where} [data]", "missing required key 'datasets'")
    merged = {**raw, **data, "queries": work.get("queries")}
    overrides = raw.get("tiny", {})
    if not isinstance(overrides, dict):
        fail(where, "tiny must be a table")
    unknown(f"{where} [tiny]", overrides, _TINY)
    if tiny:
        merged.update(overrides)
    name = raw["name"]
    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        fail(where, f"name must be letters, digits, '_' or '-', got {name!r}")
    if not isinstance(raw["description"], str):
        fail(where, "description must be a string")
    policies = listed(where, "policies", merged["policies"], str)
    datasets = listed(where, "datasets", merged["datasets"], str)
    epsilons = tuple(float(e) for e in listed(where, "epsilons", merged["epsilons"], (int, float), 0))
    domains = _domains(where, merged.get("domain"))
    domain = None if domains is None else domains[0]
    scales = merged.get("scales")
    if scales is not None:
        scales = listed(where, "scales", scales, int, 0)
    data_seeds = integer(where, "data_seeds", merged.get("data_seeds", 1), 1)
    if scales is None and data_seeds != 1:
        fail(where, "data_seeds needs scales: without sampling there is one dataset")
    kind = work.get("kind")
    if kind not in KINDS:
        fail(f"{where} [workload]", f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    runs = experiment(kind)
    allowed = {"kind"}.union(*(e.settings_keys for e in EXPERIMENTS.values()))
    unknown(f"{where} [workload]", work, allowed)
    for other in {e for e in EXPERIMENTS.values() if e is not runs}:
        extra = [key for key in sorted(other.settings_keys - runs.settings_keys) if key in work]
        if extra:
            fail(f"{where} [workload]", f"{' and '.join(extra)} apply to {other.description} only, not {kind!r}")
    workload = runs.settings(f"{where} [workload]", kind, work, merged)
    for spec in policies:
        try:
            pol.from_spec(spec, domain or ((8, 8) if spec.startswith("grid") else (8,)))  # syntax only
        except SpecError as err:
            fail(where, str(err))
    entries = raw["mechanisms"]
    if not isinstance(entries, list) or not entries:
        fail(where, "mechanisms must be a non-empty list")
    every_policy = listed(where, "policies", raw["policies"], str)  # [tiny] may keep only some
    every_domain = _domains(where, data.get("domain"))
    mechanisms = tuple(_mechanism(f"{where} mechanisms[{i}]", e, every_policy, runs, every_domain)
                       for i, e in enumerate(entries))
    if tiny and "domain" in overrides:  # [tiny]'s domain replaces the suite's and the filters on them
        mechanisms = tuple(replace(m, domains=None) for m in mechanisms)
    labels = [m.label for m in mechanisms]
    if len(set(labels)) != len(labels):
        fail(where, f"mechanism labels must be distinct, got {labels}")
    if tiny and "mechanisms" in overrides:
        keep = listed(f"{where} [tiny]", "mechanisms", overrides["mechanisms"], str)
        if set(keep) - set(labels):
            fail(f"{where} [tiny]", f"mechanisms {sorted(set(keep) - set(labels))} are not labels of the suite: {labels}")
        mechanisms = tuple(m for m in mechanisms if m.label in keep)
    if runs.checks_pairs:
        _check_pairs(where, workload, domains, policies, mechanisms, {label: i for i, label in enumerate(labels)})
    return Suite(
        name=name,
        description=raw["description"],
        master_seed=integer(where, "master_seed", raw.get("master_seed", 0), 0),
        trials=integer(where, "trials", merged.get("trials", 1), 1),
        epsilons=epsilons,
        policies=policies,
        datasets=datasets,
        domains=domains,
        scales=scales,
        data_seeds=data_seeds,
        workload=workload,
        mechanisms=mechanisms,
        path=where,
    )
