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
suite's fingerprint must match). Pairs of a mechanism and a policy it cannot run are refused when
the suite is loaded (:mod:`blowfish_te.evaluation.suite`); a cell that fails on its data all the
same is recorded with ``status = "error: ..."``, left out of the summary and counted by
:func:`describe_failures` (``blowfish-te bench`` then exits non-zero).

Cells run in this process (``jobs=1``), in a pool of ``jobs`` processes, or on the workers of a
Dask distributed scheduler (``scheduler=``; ``pip install 'blowfish_te[distributed]'``), in chunks
of cells that share a data sample; every worker loads each sample it is given once. The results
do not depend on which of the three ran them.

A ``kmeans`` suite measures ``objective`` (He et al. Eq. 10 after the last iteration) and
``objective_ratio``, its ratio to non-private Lloyd iterations from the same public starting
centres, drawn from the run's seed: every variant of a trial starts from the same centres.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import multiprocessing
import os
import pathlib
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import datasets
from .. import policies as pol
from .._csv import escape_row, unescape_cell
from .experiments import Experiment, experiment
from .suite import Suite, SuiteError

__all__ = ["Cell", "COLUMNS", "cells", "describe_failures", "run_suite", "read_rows"]

#: How ``jobs > 1`` starts its worker processes: "spawn" on every platform (macOS's and Windows'
#: default; Linux forks by default until Python 3.14, which warns when threads are running), so a
#: suite runs the same way everywhere and no worker inherits a parent's threads or locks.
START_METHOD = "spawn"

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
                        if (spec.policies is not None and policy not in spec.policies) or not spec.runs_on(domain):
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
        self.mechanisms: dict = {}  # one instance per (mechanism, policy)

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
            truth = self.experiment.truth(self.suite.workload, x, self.objects)
            self.data = {key: (x, truth)}  # one sample at a time: cells come grouped by it
        return self.data[key]

    @property
    def experiment(self) -> Experiment:
        return experiment(self.suite.workload["kind"])

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
            data_seed=cell.data_seed, policy=cell.policy, theta=pol.PolicySpec.parse(cell.policy).theta_on(x.shape),
            mechanism=spec.label, epsilon=cell.epsilon, epsilon_used=cell.epsilon * spec.epsilon_factor,
            trial=cell.trial, seed=int(seed.generate_state(1)[0]), status="ok",
        )
        row.update(self.experiment.describe(suite.workload, x, self.objects))

        def mechanism():  # one instance per (mechanism, policy): its bounded caches then hold that
            # policy's workloads and tree candidates only, and never thrash
            if (cell.mechanism, cell.policy) not in self.mechanisms:
                self.mechanisms[cell.mechanism, cell.policy] = spec.build()
            return self.mechanisms[cell.mechanism, cell.policy]

        try:
            self.experiment.run(row, suite.workload, x, truth, policy, spec, mechanism, seed, self.objects)
        except (ValueError, TypeError) as err:  # the mechanism refuses this policy or data
            row["status"] = f"error: {type(err).__name__}: {err}".replace("\n", " ")
        return row


_LOCAL = threading.local()  # a worker thread's context, kept between the chunks of one suite


def _run_chunk(suite: Suite, data_dir, chunk: list[Cell]) -> list[dict]:
    """Run ``chunk`` in a pool process or a Dask worker thread, reusing that thread's caches
    (data sample, policies, mechanisms) while the suite and data directory stay the same."""
    held = getattr(_LOCAL, "context", None)
    if held is None or held[0] != (suite, data_dir):
        held = _LOCAL.context = ((suite, data_dir), _Context(suite, data_dir))
    return [held[1].run(cell) for cell in chunk]


def _chunks(todo: list[Cell], size: int = 64) -> list[list[Cell]]:
    """Cells grouped by data sample, so each worker loads and samples each dataset once."""
    groups: dict = {}
    for c in todo:
        groups.setdefault((c.dataset, c.scale, c.data_seed), []).append(c)
    return [g[i : i + size] for g in groups.values() for i in range(0, len(g), size)]


def _client(scheduler):
    """A ``distributed.Client`` for ``scheduler`` and whether this run opened it (and closes it)."""
    try:
        import distributed
    except ImportError:
        raise ImportError(
            "running a suite on a Dask scheduler needs the distributed package: pip install 'blowfish_te[distributed]'"
        ) from None
    if isinstance(scheduler, distributed.Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler:
        raise TypeError(f"scheduler must be an address such as 'tcp://127.0.0.1:8786' or a distributed.Client, got {scheduler!r}")
    return distributed.Client(scheduler), True


def _run_on_client(client, suite: Suite, data_dir, chunks: list, record) -> None:
    """Spread ``chunks`` over the client's workers and record each as it finishes."""
    import distributed

    futures = []
    try:
        # sent once, not with every chunk; a fresh key (hash=False), because a content-hashed key
        # that an earlier run on the same cluster is still releasing can vanish under this run
        shared = client.scatter(suite, broadcast=True, hash=False)
        futures = [client.submit(_run_chunk, shared, data_dir, chunk, pure=False) for chunk in chunks]
        for future in distributed.as_completed(futures):
            record(future.result())
    finally:
        client.cancel([f for f in futures if not f.done()])


def describe_failures(rows: list[dict], shown: int = 3, width: int = 120) -> str | None:
    """One line on the rows whose status is an error: how many of all, and the distinct messages,
    most frequent first, with their counts (at most ``shown`` of them, each cut to ``width``
    characters); None when every row is ok."""
    errors = Counter(r["status"].removeprefix("error:").strip() for r in rows if str(r["status"]).startswith("error"))
    if not errors:
        return None
    failed = sum(errors.values())
    parts = [f"{n}x {msg if len(msg) <= width else msg[: width - 3] + '...'}" for msg, n in errors.most_common(shown)]
    if len(errors) > shown:
        parts.append(f"and {len(errors) - shown} more distinct error(s)")
    return f"{failed} of {len(rows)} cells failed: " + "; ".join(parts)


def read_rows(path: str | pathlib.Path) -> list[dict]:
    """Rows of a ``results.csv``, with numbers parsed back (empty fields become None) and text
    as it was before it was escaped for spreadsheets."""
    numeric = {"scale", "data_seed", "theta", "queries", "epsilon", "epsilon_used", "trial", "seed", "mse",
               "scaled_l2", "expected_mse", "stretch", "objective", "objective_ratio", "runtime_s"}
    rows = []
    with open(path, newline="") as f:
        for written in csv.DictReader(f):
            row = {k: unescape_cell(v) for k, v in written.items()}
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
    out_dir: str | pathlib.Path,
    data_dir: str | pathlib.Path | None = None,
    jobs: int = 1,
    resume: bool = True,
    progress: Callable[[int, int], None] | None = None,
    scheduler: str | Any | None = None,
) -> list[dict]:
    """Run every cell of ``suite`` not yet in ``out_dir/results.csv`` and return all rows.

    Writes ``results.csv`` (tidy, sorted by cell), ``results.parquet`` when pyarrow is installed
    (``pip install blowfish_te[evaluation]``), ``summary.csv`` and ``summary.md``. ``progress`` is
    called with (cells done, cells in all) as cells finish.

    ``scheduler``: the address of a Dask distributed scheduler (``"tcp://host:8786"``) or a
    ``distributed.Client``, to run the cells on its workers instead of here (with ``jobs=1``).
    The workers need blowfish_te and read the datasets from ``data_dir`` (else
    ``$BLOWFISH_TE_DATA`` as set here), an absolute path they must see too; built-in datasets
    need no folder.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if scheduler is not None and jobs != 1:
        raise ValueError(f"give a scheduler or jobs > 1, not both (got jobs={jobs}): the scheduler's workers run the cells")
    if data_dir is None:
        data_dir = os.environ.get(datasets.DATA_DIR_ENV)
    if data_dir is not None:  # the same folder for every process and worker, whatever its directory
        data_dir = str(pathlib.Path(data_dir).expanduser().absolute())
    if scheduler is None:
        return _run(suite, pathlib.Path(out_dir), data_dir, jobs, resume, progress, None)
    client, opened = _client(scheduler)  # connect before touching earlier results
    try:
        return _run(suite, pathlib.Path(out_dir), data_dir, jobs, resume, progress, client)
    finally:
        if opened:
            client.close()


def _run(suite: Suite, out: pathlib.Path, data_dir, jobs: int, resume: bool, progress, client) -> list[dict]:
    from .summary import summarize, write_summary

    started = time.perf_counter()
    done = _check_resume(out, suite, resume)
    todo = [c for c in cells(suite) if c.key(suite) not in done]
    total = len(todo) + len(done)
    results = out / "results.csv"
    chunks = _chunks(todo)
    with open(results, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if not done:
            writer.writeheader()
        finished = len(done)

        def record(rows):
            nonlocal finished
            writer.writerows(map(escape_row, rows))
            f.flush()
            finished += len(rows)
            if progress:
                progress(finished, total)

        if client is not None:
            if chunks:
                _run_on_client(client, suite, data_dir, chunks, record)
        elif jobs == 1:
            context = _Context(suite, data_dir)
            for chunk in chunks:
                record([context.run(c) for c in chunk])
        else:
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(START_METHOD)) as pool:
                for rows in pool.map(functools.partial(_run_chunk, suite, data_dir), chunks):
                    record(rows)
    order = {c.key(suite): i for i, c in enumerate(cells(suite))}
    rows = sorted((r for r in read_rows(results) if r["key"] in order), key=lambda r: order[r["key"]])
    with open(results, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(map(escape_row, rows))
    _write_parquet(rows, out / "results.parquet")
    write_summary(summarize(rows), out)
    _add_wall_time(out / "suite.json", time.perf_counter() - started, "scheduler" if client is not None else f"jobs={jobs}")
    return rows


def _add_wall_time(meta_path: pathlib.Path, seconds: float, workers: str) -> None:
    """Add this run's wall-clock time to ``suite.json`` (resumed runs add up), with how it ran."""
    meta = json.loads(meta_path.read_text())
    meta["cpus"] = os.cpu_count()
    meta["wall_s"] = round(meta.get("wall_s", 0.0) + seconds, 3)
    meta["workers"] = sorted(set(meta.get("workers", [])) | {workers})
    meta_path.write_text(json.dumps(meta, indent=2))


def _write_parquet(rows: list[dict], path: pathlib.Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # optional extra
        return
    pq.write_table(pa.Table.from_pylist(rows), path)
