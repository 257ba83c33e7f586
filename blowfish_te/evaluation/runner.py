"""Run a suite: one tidy row per trial, resumable, optionally across cores.

Seeds: the data sample of (dataset, scale, data seed) and the algorithm run of every cell draw from
``SeedSequence([master_seed, crc32(key)])``, so a cell's result depends only on the master seed and
the cell, never on the order, the number of processes or what ran before. The run's key leaves out
the mechanism and the policy: every mechanism of one trial (dataset, sample, ε, trial) starts from
the same generator state (common random numbers), so comparisons between mechanisms are paired.
Two algorithms that share a step see the same draws there — DAWA at ε/2 and the DAWA partition of
partition-then-transform at the same per-change budget release the same buckets — and their gap
is their real difference, not the spread of rare partitions between two independent samples.

Rows are appended to ``results.csv`` as cells finish; a rerun skips the cells already there (the
suite's fingerprint must match). A cell whose mechanism refuses its policy (say, a native mechanism
under unbounded DP) is recorded with ``status = "error: ..."`` and left out of the summary.

A ``kmeans`` suite measures ``objective`` (He et al. Eq. 10 after the last iteration) and
``objective_ratio``, its ratio to non-private Lloyd iterations from the same public starting
centres, drawn from the run's seed: every variant of a trial starts from the same centres.
"""

from __future__ import annotations

import csv
import itertools
import json
import pathlib
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import datasets
from .. import kmeans as km
from .. import policies as pol
from .. import workloads as wl
from ..metrics import per_query_mse, scaled_l2_error
from ..release import answer
from .suite import Suite, SuiteError, policy_theta

__all__ = ["Cell", "COLUMNS", "cells", "run_suite", "read_rows"]

#: Columns of the tidy table, in order.
COLUMNS = [
    "key", "suite", "dataset", "domain", "scale", "data_seed", "policy", "theta", "workload", "queries",
    "mechanism", "epsilon", "epsilon_used", "trial", "seed", "mse", "scaled_l2", "expected_mse", "route",
    "tree", "stretch", "objective", "objective_ratio", "runtime_s", "status",
]


@dataclass(frozen=True)
class Cell:
    """One trial of one configuration."""

    dataset: str
    domain: tuple[int, ...] | None  # None: the dataset's own shape
    tag: str  # the domain in keys: empty for a suite's first domain, so single-domain keys keep their form
    scale: int | None
    data_seed: int
    policy: str
    mechanism: int  # index into suite.mechanisms
    epsilon: float
    trial: int

    def key(self, suite: Suite) -> str:
        label = suite.mechanisms[self.mechanism].label
        return f"{self.dataset}{self.tag}|{self.scale}|{self.data_seed}|{self.policy}|{label}|{self.epsilon!r}|{self.trial}"

    def run_key(self) -> str:
        """The key of the run's seed: the same for every mechanism and policy of a trial."""
        return f"run|{self.dataset}{self.tag}|{self.scale}|{self.data_seed}|{self.epsilon!r}|{self.trial}"


def cells(suite: Suite) -> list[Cell]:
    """Every cell of the suite's grid, in a fixed order."""
    out = []
    domains = suite.domains or (None,)
    for dataset, domain in itertools.product(suite.datasets, domains):
        tag = "" if domain == domains[0] else "@" + "x".join(map(str, domain))
        for scale in suite.scales or (None,):
            for data_seed in range(suite.data_seeds):
                for policy in suite.policies:
                    for m, spec in enumerate(suite.mechanisms):
                        if spec.policies is not None and policy not in spec.policies:
                            continue
                        for eps in suite.epsilons:
                            for trial in range(suite.trials):
                                out.append(Cell(dataset, domain, tag, scale, data_seed, policy, m, eps, trial))
    return out


def _seed(master: int, key: str) -> np.random.SeedSequence:
    return np.random.SeedSequence([master, zlib.crc32(key.encode())])


class _Context:
    """Per-process caches: data samples, true answers, policies, workloads, mechanism instances."""

    def __init__(self, suite: Suite, data_dir):
        self.suite, self.data_dir = suite, data_dir
        self.data: dict = {}
        self.objects: dict = {}
        self.mechanisms: dict = {}  # one instance per (mechanism, policy): its bounded caches
        # then hold that policy's workloads and tree candidates only, and never thrash

    def histogram(self, cell: Cell):
        key = (cell.dataset, cell.domain, cell.scale, cell.data_seed)
        if key not in self.data:
            raw = datasets.load(cell.dataset, self.data_dir)
            domain = cell.domain or raw.shape
            if len(domain) != raw.ndim:
                raise SuiteError(f"domain {domain} does not fit dataset {cell.dataset!r} of shape {raw.shape}")
            if cell.scale is None:
                x = datasets.coarsen(raw, domain)
            else:
                label = (cell.dataset + cell.tag, cell.scale, cell.data_seed)
                gen = np.random.default_rng(_seed(self.suite.master_seed, "data|" + "|".join(map(str, label))))
                x = datasets.dpbench_sample(raw, cell.scale, domain, rng=gen)
            truth = None if self.kmeans else self.workload(x.shape) @ x.ravel()
            self.data = {key: (x, truth)}  # one sample at a time: cells come grouped by it
        return self.data[key]

    @property
    def kmeans(self) -> bool:
        return self.suite.workload["kind"] == "kmeans"

    def workload(self, shape):
        key = ("workload", shape)
        if key not in self.objects:
            self.objects[key] = wl.from_spec(self.suite.workload, shape)
        return self.objects[key]

    def baseline(self, x: np.ndarray, centres: np.ndarray) -> float:
        """The objective of non-private Lloyd iterations from ``centres`` (cached per start)."""
        key = ("lloyd", x.shape, centres.tobytes())
        if key not in self.objects:
            work = self.suite.workload
            self.objects[key] = km.lloyd(x, x.shape, work["clusters"], work["iterations"], centres=centres).objective
        return self.objects[key]

    def _kmeans(self, row: dict, x: np.ndarray, policy, spec, seed) -> None:
        work = self.suite.workload
        gen = np.random.default_rng(seed)
        centres = km.initial_centres(x.shape, work["clusters"], gen)
        start = time.perf_counter()
        result = km.blowfish_kmeans(x, policy, row["epsilon_used"], work["clusters"], work["iterations"], gen,
                                    centres=centres, **spec.params)
        row["runtime_s"] = time.perf_counter() - start
        base = self.baseline(x, centres)
        row.update(objective=result.objective, objective_ratio=result.objective / base if base > 0 else None)

    def policy(self, spec: str, shape):
        key = ("policy", spec, shape)
        if key not in self.objects:
            self.objects[key] = pol.from_spec(spec, shape)
        return self.objects[key]

    def run(self, cell: Cell) -> dict:
        suite, spec = self.suite, self.suite.mechanisms[cell.mechanism]
        key = cell.key(suite)
        x, truth = self.histogram(cell)
        policy = self.policy(cell.policy, x.shape)
        scale = cell.scale if cell.scale is not None else int(x.sum())
        seed = _seed(suite.master_seed, cell.run_key())
        row = dict.fromkeys(COLUMNS)
        row.update(
            key=key, suite=suite.name, dataset=cell.dataset, domain="x".join(map(str, x.shape)), scale=scale,
            data_seed=cell.data_seed, policy=cell.policy, theta=policy_theta(cell.policy, x.shape),
            mechanism=spec.label, epsilon=cell.epsilon, epsilon_used=cell.epsilon * spec.epsilon_factor,
            trial=cell.trial, seed=int(seed.generate_state(1)[0]), status="ok",
        )
        if self.kmeans:
            work = suite.workload
            row.update(workload=f"kmeans k={work['clusters']} T={work['iterations']}", queries=work["clusters"])
            try:
                self._kmeans(row, x, policy, spec, seed)
            except (ValueError, TypeError) as err:
                row["status"] = f"error: {type(err).__name__}: {err}".replace("\n", " ")
            return row
        workload = self.workload(x.shape)
        row.update(workload=workload.name, queries=workload.num_queries)
        start = time.perf_counter()
        try:
            tree = None if policy.is_forest else spec.tree
            if (cell.mechanism, cell.policy) not in self.mechanisms:
                self.mechanisms[cell.mechanism, cell.policy] = spec.build()
            mechanism = self.mechanisms[cell.mechanism, cell.policy]
            release = answer(workload, x, policy, row["epsilon_used"], mechanism, rng=np.random.default_rng(seed), tree=tree)
        except (ValueError, TypeError) as err:  # the mechanism refuses this policy or data
            row["status"] = f"error: {type(err).__name__}: {err}".replace("\n", " ")
            return row
        row["runtime_s"] = time.perf_counter() - start
        row.update(
            mse=per_query_mse(truth, release.answers),
            scaled_l2=scaled_l2_error(truth, release.answers, scale),
            expected_mse=release.expected_mse,
            route=release.route,
            tree=release.tree,
            stretch=release.stretch,
        )
        return row


_WORKER: _Context | None = None


def _init_worker(suite: Suite, data_dir) -> None:
    global _WORKER
    _WORKER = _Context(suite, data_dir)


def _run_chunk(chunk: list[Cell]) -> list[dict]:
    return [_WORKER.run(cell) for cell in chunk]


def read_rows(path) -> list[dict]:
    """Rows of a ``results.csv``, with numbers parsed back (empty fields become None)."""
    numeric = {"scale", "data_seed", "theta", "queries", "epsilon", "epsilon_used", "trial", "seed", "mse",
               "scaled_l2", "expected_mse", "stretch", "objective", "objective_ratio", "runtime_s"}
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for k in numeric:
                value = row.get(k)  # tables written before a column existed lack it
                row[k] = None if value in (None, "") else float(value)
            rows.append(row)
    return rows


def _check_resume(out: pathlib.Path, suite: Suite, resume: bool) -> set[str]:
    meta, results = out / "suite.json", out / "results.csv"
    fingerprint = suite.fingerprint()
    if results.exists() and resume:
        previous = json.loads(meta.read_text()).get("fingerprint") if meta.exists() else None
        if previous != fingerprint:
            raise SuiteError(
                f"{out} holds results of a different configuration of suite {suite.name!r}: "
                "use another output folder or resume=False (--fresh) to start over"
            )
        return {row["key"] for row in read_rows(results)}
    if results.exists():
        results.unlink()
    out.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"suite": suite.name, "fingerprint": fingerprint, "path": suite.path,
                                "description": suite.description}, indent=2))
    return set()


def run_suite(
    suite: Suite,
    out_dir,
    data_dir=None,
    jobs: int = 1,
    resume: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Run every cell of ``suite`` not yet in ``out_dir/results.csv`` and return all rows.

    Writes ``results.csv`` (tidy, sorted by cell), ``results.parquet`` when pyarrow is installed
    (``pip install blowfish_te[evaluation]``), ``summary.csv`` and ``summary.md``. ``progress`` is
    called with (cells done, cells in all) as cells finish.
    """
    from .summary import summarize, write_summary

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    out = pathlib.Path(out_dir)
    done = _check_resume(out, suite, resume)
    todo = [c for c in cells(suite) if c.key(suite) not in done]
    total = len(todo) + len(done)
    results = out / "results.csv"
    # group cells by data sample so each process loads and samples each dataset once
    groups: dict = {}
    for c in todo:
        groups.setdefault((c.dataset, c.scale, c.data_seed), []).append(c)
    chunks = [g[i : i + 64] for g in groups.values() for i in range(0, len(g), 64)]
    with open(results, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if not done:
            writer.writeheader()
        finished = len(done)

        def record(rows):
            nonlocal finished
            writer.writerows(rows)
            f.flush()
            finished += len(rows)
            if progress:
                progress(finished, total)

        if jobs == 1:
            context = _Context(suite, data_dir)
            for chunk in chunks:
                record([context.run(c) for c in chunk])
        else:
            with ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(suite, data_dir)) as pool:
                for rows in pool.map(_run_chunk, chunks):
                    record(rows)
    order = {c.key(suite): i for i, c in enumerate(cells(suite))}
    rows = sorted((r for r in read_rows(results) if r["key"] in order), key=lambda r: order[r["key"]])
    with open(results, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    _write_parquet(rows, out / "results.parquet")
    write_summary(summarize(rows), out)
    return rows


def _write_parquet(rows: list[dict], path: pathlib.Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # optional extra
        return
    pq.write_table(pa.Table.from_pylist(rows), path)
