"""Data-dependent releases on DPBench's cells: against the plain release, against their own
partition branch, against the noise-free partition, and against DPComp side by side.

Run: ``python benchmarks/datadependent_report.py --data-dir ../shared/datasets/dpbench
[--dpcomp RESULTS [--dpcomp-exclude NAMES]] [--seeds 10] [--workers 2] [--only 1d,2d] [--json FILE]
[--export-cells DIR] [--results FILE | --from-results FILE]`` (or set $BLOWFISH_TE_DATA).

Cells, as DPBench samples them (``datasets.dpbench_sample``, seed 0): 1-D, 4096 cells, every
shape at 10³, 10⁵ and 10⁷ records × ε ∈ {0.01, 0.1}, the 4096 cells (histogram) and the 4096
prefix sums; 2-D, 128², every shape at 10⁴ and 10⁶ records × ε ∈ {0.01, 0.1}, DPBench's 2000
rectangles (seed 0). Every mechanism runs under unbounded DP on the same cells with ``--seeds``
trials; trial t of a cell draws from ``SeedSequence([t, crc32(cell)])``, so trials are
independent across data sets. Errors are RMSE per query; ratios are of means over trials.

Printed per cell: the plain release's RMSE (the analytic error of ``auto``'s strategy), each
mechanism's mean RMSE over it, the best of ours, and — with ``--dpcomp`` — DPComp's best algorithm
and the ratio of ours to it. For the mechanisms with a private check: how many trials partitioned,
and the decision cost (the worst trial's route over the better of the plain route and the
mechanism's own partition branch, each forced on the same trials and charged its mean error over
them; the plain route is the analytic error of ``auto``'s strategy except on histograms of DAWA
and partition-then-transform, whose plain route smooths the Laplace counts, and on 1-D prefixes,
whose answers the releases make consistent); how many cells lie
above 1.10 × the plain release by more than two standard errors of the mean. ``--partitions``
adds, for DAWA, the error of the drawn partition (bias + the release's noise over its buckets) over the
noise-free partition's at the same price.

``adaptive`` is set against the best single mechanism of each cell, and against the floor of any
choice that reads the same noisy features (:func:`choice_floor`): where the features cannot tell
cells apart, no model can choose each cell's best mechanism. With the histograms at hand (a run,
or ``--from-results`` with ``--data-dir``), each check gets the floor of any check at its share
of ε (:func:`decision_floor`, group privacy).

``--export-cells DIR`` writes the cells (``cells.json``, each histogram as ``.npy``, the
rectangles as ``rects128.npz``) for running DPComp on the same data outside this repository;
``--dpcomp`` reads that run's per-trial results (JSON list or JSON lines of ``{cell, algorithm,
seed, rmse}``); ``--dpcomp-exclude`` names the algorithms left out of DPComp's best; by default those
whose releases are not ε-DP as published (:data:`DPCOMP_NOT_PRIVATE`): its DAWA, whose partition
is not ε₁-DP, its EFPA, which releases Fourier phases exactly (docs/theory.md, "Where DPComp's
DAWA partition is not ε₁-DP" and "Where DPComp's EFPA is not ε-DP"), and the variants that read
the true record total. ``--results FILE`` keeps every trial;
``--from-results FILE`` prints the summary of such a file without running anything.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import time
import zlib
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _measure import Recorder, add_options
from train_selection import exact_features, feature_distance, some_trial_wrong

import blowfish_te as bt
from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms.partition_then_transform import public_total
from blowfish_te.mechanisms.plain import STAGE_TWO, aggregation_gain, best_linear, best_plan_under, lowest_error, plain_strategy, workload_class
from blowfish_te.partitions import noise_free_partition, price_factor
from blowfish_te.selection import cost_share, total_share
from blowfish_te.smoothing import consistent_prefix_answers
from blowfish_te.workloads import BucketWorkload

K_1D = 4096
SHAPE_2D = (128, 128)
SCALES = {1: (10**3, 10**5, 10**7), 2: (10**4, 10**6)}
EPSILONS = (0.01, 0.1)
#: Mechanisms per dimension; the first ones carry a private check and must stay near the plain release.
CHECKED = {1: ("dawa", "partition_then_transform", "privtree"), 2: ("dawa", "agrid", "privtree", "ugrid")}
OTHERS = {1: ("adaptive", "uniform", "ahp"), 2: ("adaptive", "uniform")}
#: Under the Blowfish policies (``--policy blowfish``: line in 1-D, grid:1 in 2-D) the registered
#: mechanisms that serve them: the native partition-then-transform and ``adaptive``.
CHECKED_BLOWFISH = ("partition_then_transform",)
OTHERS_BLOWFISH = ("adaptive",)
NATIVE = ("partition_then_transform", "adaptive")


def cells(data_dir, only) -> list[dict]:
    out = []
    for ndim in (1, 2):
        if f"{ndim}d" not in only:
            continue
        folder = pathlib.Path(data_dir) / ("1D" if ndim == 1 else "2D")
        for path in sorted(folder.glob("*.npy")):
            for scale in SCALES[ndim]:
                for eps in EPSILONS:
                    for kind in (("identity", "prefix") if ndim == 1 else ("rects",)):
                        out.append(dict(id=f"{ndim}d/{path.stem}/{scale}/{kind}/{eps}", dim=ndim, shape_path=str(path),
                                        scale=scale, eps=eps, workload=kind))
    return out


def workload_of(cell):
    if cell["workload"] == "identity":
        return wl.identity(K_1D)
    if cell["workload"] == "prefix":
        return wl.prefix(K_1D)
    return wl.dpbench_ranges(SHAPE_2D, 2000, rng=0)


def data_of(cell) -> np.ndarray:
    return datasets.dpbench_sample(np.load(cell["shape_path"]), cell["scale"], domain=K_1D if cell["dim"] == 1 else SHAPE_2D,
                                   rng=0).reshape(-1)


def seed_of(cell, trial: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([trial, zlib.crc32(cell["id"].encode())]))


def policy_of(ndim: int, kind: str):
    """Unbounded DP, or the Blowfish policy the report runs under ``--policy blowfish``."""
    shape = (K_1D,) if ndim == 1 else SHAPE_2D
    if kind == "dp":
        return policies.unbounded(shape)
    return policies.line(K_1D) if ndim == 1 else policies.grid(SHAPE_2D)


def release(name: str, w, x, eps: float, gen, policy, candidates=()) -> tuple[np.ndarray, str | None]:
    """(answers, the candidate ``adaptive`` ran — one of ``candidates``, or "plain" for its plain
    release, named after "ran" in its choice —, None for the others)."""
    if name in NATIVE:
        out = bt.answer(w, x.reshape(policy.shape), policy, eps, name, rng=gen)
        route = None
        if name == "adaptive":
            ran = out.choice.rsplit("ran ", 1)[-1].split(" ")[0] if "ran " in out.choice else ""
            route = ran if ran in candidates else "plain"
        return np.asarray(out.answers), route
    return np.asarray(M.get_mechanism(name).run(w, x, eps, gen)), None


def partition_branch(name: str, w, x, eps: float, gen, policy) -> np.ndarray:
    """The mechanism's data-dependent branch without its check, at the whole ε, its buckets
    priced by N·ε/K as the checked release prices them (histogram-like workloads only), its
    answers to prefixes made consistent as the release makes them."""
    scale = x.sum() * eps / x.size if workload_class(w) == "cells" else None
    if name == "dawa":
        mech = M.DAWA()
        ratio = mech.split(w)[0]
        answers = mech.partitioned(w, x, ratio * eps, (1 - ratio) * eps, gen, scale=scale)
    elif name == "partition_then_transform":
        mech = M.PartitionThenTransform()
        split = mech.split(w, policy)
        answers = mech.partitioned(w, x, policy, eps, split * eps, gen, "", scale=scale).answers
    else:
        answers = type(M.get_mechanism(name))(select=False).run(w, x, eps, gen)
    return consistent_prefix_answers(w.query_bounds(), np.asarray(answers, dtype=np.float64), public_total(policy, x))


def plain_branch(name: str, w, x, eps: float, gen, policy) -> np.ndarray | None:
    """The checked release's plain route, forced, from the same generator: its check's draws,
    then the plain release at the rest — smoothed, with the check's noisy total, where the release
    smooths; prefix answers made consistent as the release makes them. Histogram-like and 1-D
    prefix workloads of DAWA, partition-then-transform and PrivTree (elsewhere the plain route is
    the analytic error of ``auto``'s strategy): None otherwise."""
    bounds = w.query_bounds()
    prefixes = bounds is not None and len(w.domain) == 1 and not np.any(bounds[0])
    if name not in ("dawa", "partition_then_transform", "privtree") or not (prefixes or workload_class(w) == "cells"):
        return None
    if name == "privtree":
        if not prefixes:
            return None
        mech = M.PrivTree()
        decision = mech.check(w, x, eps, gen)
        answers = plain_strategy(mech, w).run(w, x, eps - decision.spent, gen)
    elif name == "dawa":
        mech = M.DAWA()
        answers = mech.release_plain(w, x, eps, gen, mech.check(w, x, eps, gen))
    else:
        mech = M.PartitionThenTransform()
        decision = mech.check(w, x, eps, gen, policy)
        if decision is None:
            return None
        answers = mech.release_plain(w, x, policy, eps, gen, decision, "").answers
    return consistent_prefix_answers(w.query_bounds(), np.asarray(answers, dtype=np.float64), public_total(policy, x))


def decision_of(name: str, w, x, eps: float, gen, policy) -> str | None:
    """The route the checked release takes with this generator (its first draws)."""
    if name == "partition_then_transform":
        decision = M.PartitionThenTransform().check(w, x, eps, gen, policy)
        return None if decision is None else decision.route
    decision = M.get_mechanism(name).check(w, x, eps, gen)
    return None if decision is None else decision.route


def adaptive_candidates(w, policy) -> list[str]:
    """The data-dependent candidates ``adaptive`` chooses among for this workload and policy
    (none where its first candidate would not partition the workload: then it is the plain release)."""
    adaptive = M.get_mechanism("adaptive")
    dependents = adaptive.candidates(w, policy)[0]
    if not (policy.is_unbounded_dp or dependents[0].partition_share(w, policy) > 0):
        return []
    return [m.name for m in dependents]


def partition_quality(w, x, eps: float, seeds: int, cell) -> dict:
    """DAWA's drawn partitions against the noise-free one at the same price: error = bias +
    the release's noise over the buckets (the stage-two strategy's analytic error). The
    noise-free reference is DAWA's optimum over intervals of its layout; the drawn partitions are
    the ones the release draws (intervals, or on a grid the deviation quadtree)."""
    mech = M.DAWA()
    ratio, penalty = mech.split(w)
    eps1, eps2 = ratio * eps, (1 - ratio) * eps
    cells_order = mech.layout(w.domain)
    scale = x.sum() * eps / x.size if workload_class(w, aggregation_gain(w)) == "cells" else None  # priced as released
    factor = price_factor(scale)
    max_length = None if factor == 1 else x.size
    truth = np.asarray(w.matvec(x), dtype=np.float64)

    def error(labels) -> float:
        reduced = BucketWorkload(w, labels)
        bias = np.asarray(reduced.matvec(np.bincount(labels, weights=x))) - truth
        return (float(bias @ bias) + lowest_error(reduced, STAGE_TWO).expected_error(reduced, eps2)) / w.num_queries

    def in_grid_order(labels_in_order) -> np.ndarray:
        labels = np.empty(x.size, dtype=np.int64)
        labels[cells_order] = labels_in_order
        return labels

    def reference(guarded_at) -> float:
        return error(in_grid_order(noise_free_partition(x[cells_order], eps2, penalty=penalty * factor,
                                                        max_length=max_length, guarded_at=guarded_at)))

    star = reference(None)
    # the guards' price without noise: the reference of the drawn intervals (a tree has no guards)
    guarded = reference(eps1) if mech.partition_kind(w.domain) == "intervals" else None
    drawn = [error(mech.partition_labels(w, x, eps1, eps2, seed_of(cell, t), scale)) for t in range(seeds)]
    return dict(noise_free=star, guarded=guarded, drawn=float(np.mean(drawn)))


def measure_cell(job) -> dict:
    cell, seeds, with_partitions, kind = job
    ndim = cell["dim"]
    policy = policy_of(ndim, kind)  # one object: its plans are cached per policy
    w = workload_of(cell)
    x = data_of(cell)
    eps = cell["eps"]
    truth = np.asarray(w.matvec(x), dtype=np.float64)
    if kind == "dp":
        plain = float(np.sqrt(best_linear(w).expected_error(w, eps) / w.num_queries))
    else:  # auto's analytic error under the policy (per query, at ε = 1)
        plain = float(np.sqrt(best_plan_under(w, policy)[1].expected_mse) / eps)
    checked, others = (CHECKED[ndim], OTHERS[ndim]) if kind == "dp" else (CHECKED_BLOWFISH, OTHERS_BLOWFISH)
    out = dict(cell=cell["id"], policy=policy.name, plain=plain, runs={}, branch={}, decisions={}, seconds={}, routes={},
               candidates=adaptive_candidates(w, policy), features=exact_features(x, ndim, eps))
    for name in checked + others:
        rmse, secs, routes = [], [], []
        for t in range(seeds):
            started = time.perf_counter()
            answers, route = release(name, w, x, eps, seed_of(cell, t), policy, out["candidates"])
            secs.append(time.perf_counter() - started)
            rmse.append(float(np.sqrt(np.mean((answers - truth) ** 2))))
            routes.append(route)
        out["runs"][name], out["seconds"][name] = rmse, secs
        if name == "adaptive":
            out["routes"][name] = routes
        if name in checked:
            out["decisions"][name] = [decision_of(name, w, x, eps, seed_of(cell, t), policy) for t in range(seeds)]
            out["branch"][name] = [float(np.sqrt(np.mean((partition_branch(name, w, x, eps, seed_of(cell, t), policy) - truth) ** 2)))
                                   for t in range(seeds)]
            plains = [plain_branch(name, w, x, eps, seed_of(cell, t), policy) for t in range(seeds)]
            if all(p is not None for p in plains):
                out.setdefault("plain_branch", {})[name] = [float(np.sqrt(np.mean((p - truth) ** 2))) for p in plains]
    if with_partitions:
        out["partitions"] = partition_quality(w, x, eps, seeds, cell)
    return out


#: DPComp algorithms whose releases are not ε-DP as published, left out of DPComp's best unless
#: ``--dpcomp-exclude`` says otherwise (the arguments are in docs/theory.md).
DPCOMP_NOT_PRIVATE = {
    "DAWA": "its partition scores single cells without noise and clips the other scores",
    "DAWA_r0.25": "the same partition as DAWA",
    "DAWA_r0.5": "the same partition as DAWA",
    "EFPA": "it releases the phases of its kept Fourier coefficients exactly",
    "MWEM": "it reads the true record total",
    "MWEM*": "it reads the true record total",
    "AHP*": "it reads the true record total",
}


def read_dpcomp(path, exclude=()) -> dict[str, tuple[str, float]]:
    """{cell: (algorithm, mean RMSE)} of DPComp's best algorithm per cell, the algorithms named in
    ``exclude`` left out."""
    text = pathlib.Path(path).read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines() if line.strip()]
    runs = collections.defaultdict(dict)
    for r in rows:
        if r.get("error") is None and r.get("rmse") is not None and r["algorithm"] not in exclude:
            runs[(r["cell"], r["algorithm"])][r["seed"]] = r["rmse"]
    best = {}
    for (cell, algorithm), by_seed in runs.items():
        mean = float(np.mean(list(by_seed.values())))
        if cell not in best or mean < best[cell][1]:
            best[cell] = (algorithm, mean)
    return best


def export(cell_list, folder) -> None:
    folder = pathlib.Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rects = wl.dpbench_ranges(SHAPE_2D, 2000, rng=0)
    np.savez(folder / "rects128.npz", lo=np.asarray(rects.lo), hi=np.asarray(rects.hi))
    listed = []
    for cell in cell_list:
        path = folder / "data" / (cell["id"].replace("/", "_") + ".npy")
        x = data_of(cell)
        np.save(path, x if cell["dim"] == 1 else x.reshape(SHAPE_2D))
        listed.append(dict(id=cell["id"], dim=cell["dim"], shape=[K_1D] if cell["dim"] == 1 else list(SHAPE_2D),
                           workload=cell["workload"], x_path=str(path), eps=cell["eps"], scale=cell["scale"],
                           **({"rects_path": str(folder / "rects128.npz")} if cell["dim"] == 2 else {})))
    (folder / "cells.json").write_text(json.dumps(listed, indent=1))
    print(f"wrote {len(listed)} cells to {folder}")


def branch_errors(plain: float, branch, plain_runs=None) -> tuple[float, float]:
    """(the partition branch's mean error over the trials, the plain route's: the mean of
    ``plain_runs`` where the route was forced on every trial, else the analytic ``plain``)."""
    return float(np.mean(branch)), float(np.mean(plain_runs)) if plain_runs else plain


def decision_cost(plain: float, branch, decisions, plain_runs=None) -> float:
    """The worst trial's decision over the better route, in expected errors: a trial that
    partitioned is charged the partition branch's mean error over the trials, one that did not
    the plain route's — the mean of ``plain_runs``, the plain route forced on every trial, where
    given (histograms of DAWA and PtT, whose plain route is smoothed, and 1-D prefixes, whose
    answers are made consistent), else the analytic plain error —, so the draws' own spread (large on prefixes: one noise path runs through every
    query) is not mistaken for a bad choice."""
    partition, unpartitioned = branch_errors(plain, branch, plain_runs)
    better = min(unpartitioned, partition)
    costs = [(partition if d == "partition" else unpartitioned) / better for d in decisions if d is not None]
    return max(costs) if costs else 1.0


def summarise(results, dpcomp, recorder) -> None:
    print(f"\n{'cell':34s} {'plain':>8s}  mechanisms / plain (partitioned trials)  best-of-ours  DPComp best   ours/DPComp")
    ratios_dp, limits = [], collections.defaultdict(list)
    worst_decision = collections.defaultdict(lambda: (0.0, ""))
    for r in results:
        plain = r["plain"]
        means = {name: float(np.mean(v)) for name, v in r["runs"].items()}
        parts = []
        for name, mean in means.items():
            text = f"{name[:8]} {mean / plain:5.2f}"
            if name in r["decisions"] and r["decisions"][name][0] is not None:
                text += f"({sum(d == 'partition' for d in r['decisions'][name])})"
            parts.append(text)
            if name in r["branch"]:
                spread = float(np.std(r["runs"][name], ddof=1)) / np.sqrt(len(r["runs"][name])) if len(r["runs"][name]) > 1 else 0.0
                limits[name].append((mean / plain, r["cell"], (mean - 2 * spread) / plain))
                cost = decision_cost(plain, r["branch"][name], r["decisions"][name],
                                     r.get("plain_branch", {}).get(name))
                if cost > worst_decision[name][0]:
                    worst_decision[name] = (cost, r["cell"])
        best_name = min(means, key=means.get)
        best = min(means[best_name], plain)
        line = f"{r['cell']:34s} {plain:8.4g}  {'  '.join(parts)}  {best:8.4g}"
        if dpcomp and r["cell"] in dpcomp:
            algorithm, theirs = dpcomp[r["cell"]]
            ratios_dp.append(best / theirs)
            line += f"  {algorithm[:12]:12s} {theirs:8.4g}  {best / theirs:5.2f}"
            recorder(f"{r['cell']} ours/dpcomp", best / theirs, "ratio")
        print(line)
    print("\nChecked mechanisms against the plain release (target <= 1.10 in every cell):")
    for name, values in limits.items():
        worst = max(values)
        above = sum(low > 1.10 for _, _, low in values)
        print(f"  {name:26s} cells <= 1.10: {sum(v <= 1.10 for v, _, _ in values)}/{len(values)} ({above} above by more than"
              f" 2 standard errors); worst {worst[0]:.3f} ({worst[1]}); worst decision {worst_decision[name][0]:.2f}"
              f" ({worst_decision[name][1]})")
        recorder(f"{name} worst over plain", worst[0], "ratio")
    if ratios_dp:
        ratios_dp = np.array(ratios_dp)
        print(f"\nBest of ours against DPComp's best: <= 1 in {np.mean(ratios_dp <= 1):.0%} of {ratios_dp.size} cells, "
              f"median {np.median(ratios_dp):.3f}, worst {ratios_dp.max():.3f}")
    parts = [r for r in results if "partitions" in r]
    if parts:
        print("\nDAWA's drawn partition over the noise-free partition at the same price (error = bias + noise of the release);"
              "\nfor intervals split into the guards' price without noise (guarded/noise-free) and where the noise"
              "\nplaces boundaries (drawn/guarded):")
        for r in parts:
            q = r["partitions"]
            line = f"  {r['cell']:34s} noise-free {q['noise_free']:10.4g}  drawn/noise-free {q['drawn'] / q['noise_free']:7.2f}"
            if q.get("guarded") is not None:
                line += f"  guarded/noise-free {q['guarded'] / q['noise_free']:7.2f}  drawn/guarded {q['drawn'] / q['guarded']:6.2f}"
            print(line)


def features_apart(a, b) -> float:
    """The total variation distance (an upper bound) between the noisy features ``adaptive`` reads —
    DAWA's check features at DAWA's shares of ε — on result rows ``a`` and ``b``
    (``train_selection.feature_distance``)."""
    cells = K_1D if a["cell"].startswith("1d") else SHAPE_2D[0] * SHAPE_2D[1]
    return feature_distance(a["features"], b["features"], "dawa", cells)


def anything_apart(data: dict, share: float):
    """The distance between what any (share·ε)-DP computation reads on two cells of one ε (each
    cell's histogram in ``data``): group privacy over the ‖x_i − x_j‖₁ records that turn one into
    the other bounds the likelihood ratio of every output by e^(share·ε·‖x_i − x_j‖₁), so the total
    variation distance by tanh(share·ε·‖x_i − x_j‖₁/2). Cells of different ε are told apart."""
    def apart(a, b) -> float:
        eps = float(a["cell"].rsplit("/", 1)[1])
        if eps != float(b["cell"].rsplit("/", 1)[1]):
            return 1.0
        return float(np.tanh(share * eps * np.abs(data[a["cell"]] - data[b["cell"]]).sum() / 2))
    return apart


def choice_floor(results, apart=features_apart) -> dict[tuple[int, str], float]:
    """Per (dimension, workload) of the cells where ``adaptive`` reads DAWA's check features
    (unbounded DP), the least worst ratio to the best single mechanism that any choice can reach
    whose view of two cells i and j is at total variation distance at most t_ij = ``apart``(i, j):
    by default the noisy features themselves (:func:`features_apart`), or what any computation at
    a share of ε can read (:func:`anything_apart`). Such a choice's distributions over the
    candidates on i and j are at most t_ij apart, so the linear program min τ subject to
    Σ_c p_ic·err_ic ≤ τ·best_i, Σ_c p_ic = 1, p ≥ 0, ½Σ_c |p_ic − p_jc| ≤ t_ij bounds it from below.
    The candidates are every single mechanism at the full ε (none of it spent on reading) and the
    plain route at its better of the analytic error and the forced, consistent one; the errors
    are the trials' means, so the bound carries their sampling error."""
    from itertools import combinations

    from scipy import sparse
    from scipy.optimize import linprog

    groups: dict = collections.defaultdict(list)
    for r in results:
        if "features" in r and r.get("candidates", [None])[0] == "dawa":
            groups[int(r["cell"][0]), r["cell"].split("/")[3]].append(r)
    out = {}
    for group, rows in groups.items():
        names = sorted(set.intersection(*(set(r["runs"]) for r in rows)) - {"adaptive"})
        errors = []
        for r in rows:
            forced = r.get("plain_branch", {}).get("dawa")
            plain = min(r["plain"], float(np.mean(forced))) if forced else r["plain"]
            means = [float(np.mean(r["runs"][n])) for n in names]
            errors.append(np.array(means + [plain]) / min(means + [r["plain"]]))
        ratio = np.array(errors)
        n, m = ratio.shape
        pairs = [(i, j, t) for i, j in combinations(range(n), 2) if (t := apart(rows[i], rows[j])) < 1 - 1e-9]
        size = n * m + 1 + len(pairs) * m  # p, τ, the bounds d on |p_i − p_j|
        entries: list[tuple[int, int, float]] = []  # (row, column, value) of the inequalities, sparse
        limits = [0.0] * n
        for i in range(n):  # Σ_c p_ic·ratio_ic − τ ≤ 0
            entries += [(i, i * m + c, ratio[i, c]) for c in range(m)] + [(i, n * m, -1.0)]
        for k, (i, j, t) in enumerate(pairs):
            d = n * m + 1 + k * m
            for c in range(m):
                for sign in (1.0, -1.0):  # ±(p_ic − p_jc) − d_c ≤ 0
                    row = len(limits)
                    entries += [(row, i * m + c, sign), (row, j * m + c, -sign), (row, d + c, -1.0)]
                    limits.append(0.0)
            entries += [(len(limits), d + c, 1.0) for c in range(m)]  # Σ_c d_c ≤ 2t
            limits.append(2 * t)
        at_row, at_column, values = zip(*entries)
        upper = sparse.csr_matrix((values, (at_row, at_column)), shape=(len(limits), size))
        equal = sparse.csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), np.arange(n * m))), shape=(n, size))
        objective = np.zeros(size)
        objective[n * m] = 1.0
        solution = linprog(objective, A_ub=upper, b_ub=limits, A_eq=equal, b_eq=np.ones(n), bounds=(0, None), method="highs")
        out[group] = float(solution.x[n * m])
    return out


def check_share(name: str, cell_id: str, x: np.ndarray) -> float:
    """The share of ε that ``name``'s check spends on the cell (its first trial's draws): what its
    decision reads, as a fraction of ε."""
    ndim, _, _, kind, eps = cell_id.split("/")
    cell = dict(workload=kind, dim=int(ndim[0]))
    if name == "partition_then_transform":
        decision = M.PartitionThenTransform().check(workload_of(cell), x, float(eps), seed_of(dict(id=cell_id), 0),
                                                    policy_of(cell["dim"], "dp"))
    else:
        decision = M.get_mechanism(name).check(workload_of(cell), x, float(eps), seed_of(dict(id=cell_id), 0))
    return 0.0 if decision is None else decision.features.spent / float(eps)


def opposite_pairs(rows, name: str):
    """Pairs (the smaller wrong-branch cost, the fewer trials, row a, row b) of ``name``'s cells
    whose better branches differ (:func:`branch_errors`; :func:`decision_cost`'s units)."""
    sides = []
    for r in rows:
        partition, plain = branch_errors(r["plain"], r["branch"][name], r.get("plain_branch", {}).get(name))
        sides.append((partition < plain, max(partition, plain) / min(partition, plain), len(r["decisions"][name])))
    for i, (side_i, cost_i, n_i) in enumerate(sides):
        for j in range(i + 1, len(rows)):
            side_j, cost_j, n_j = sides[j]
            if side_i != side_j:
                yield min(cost_i, cost_j), min(n_i, n_j), rows[i], rows[j]


def checked_groups(results) -> dict[tuple[str, int, str], list]:
    """The unbounded-DP result rows of every checked mechanism, by (name, dimension, workload)."""
    groups: dict = collections.defaultdict(list)
    for r in results:
        if not r.get("policy", "unbounded").startswith("unbounded"):
            continue
        for name, decisions in r["decisions"].items():
            if decisions and decisions[0] is not None and name in r["branch"]:
                groups[name, int(r["cell"][0]), r["cell"].split("/")[3]].append(r)
    return groups


def decision_floor(results, data: dict, shares: dict, probability: float = 0.9) -> dict[tuple[str, int, str], tuple]:
    """Per (checked mechanism, dimension, workload) under unbounded DP, a cost that any check
    spending the mechanism's share of ε (``shares[(name, ndim, kind)]``) reaches on some trial of
    the report with at least ``probability``, whatever it reads — the twins of
    ``train_selection.twins`` with group privacy (:func:`anything_apart`) for the features' noise.

    Take two cells of one ε whose better branches differ (:func:`opposite_pairs`), at total
    variation distance t for any (share·ε)-DP reading. A check errs on some trial of one of them
    with at least the probability of ``train_selection.some_trial_wrong`` (the trials are
    independent), and a trial on the worse branch costs at least the smaller of the two
    wrong-branch costs. Returns (that cost, the probability, the two cells) of the costliest pair
    reached with ``probability``, or (1.0, 1.0, "", "") when none is."""
    out = {}
    for key, rows in checked_groups(results).items():
        apart, best = anything_apart(data, shares[key]), (1.0, 1.0, "", "")
        for cost, trials, a, b in opposite_pairs(rows, key[0]):
            if cost > best[0] and (reached := some_trial_wrong(apart(a, b), trials)) >= probability:
                best = (cost, reached, a["cell"], b["cell"])
        out[key] = best
    return out


def least_share(rows, name: str, data: dict, target: float, probability: float = 0.9) -> float:
    """The least share of ε below which :func:`decision_floor` of ``name``'s ``rows`` stays above
    ``target``: a pair of cells ‖x − y‖₁ = D records apart over n trials each is reached while
    t = tanh(s·ε·D/2) ≤ t* = 2(1 − probability)^(1/(2n)) − 1 (``some_trial_wrong`` ≥ probability),
    that is for s ≤ 2·atanh(t*)/(ε·D); the largest such s over the pairs costing more than
    ``target``. Infinite when two identical histograms differ in their better branch."""
    share = 0.0
    for cost, trials, a, b in opposite_pairs(rows, name):
        eps = float(a["cell"].rsplit("/", 1)[1])
        limit = 2 * (1 - probability) ** (1 / (2 * trials)) - 1
        if cost <= target or limit <= 0 or eps != float(b["cell"].rsplit("/", 1)[1]):
            continue
        records = float(np.abs(data[a["cell"]] - data[b["cell"]]).sum())
        share = max(share, np.inf if records == 0 else 2 * float(np.arctanh(limit)) / (eps * records))
    return share


def summarise_decision_floors(results, data: dict, recorder) -> None:
    """:func:`decision_floor` for every checked mechanism, each at its check's share of ε (the
    largest over the group's cells, read from one trial's check: :func:`check_share`), and where
    it is above 1.2 the share that would bring it there (:func:`least_share`)."""
    groups = checked_groups([r for r in results if r["cell"] in data])
    shares = {key: max(check_share(key[0], r["cell"], data[r["cell"]]) for r in rows) for key, rows in groups.items()}
    floors = decision_floor([r for rows in groups.values() for r in rows], data, shares)
    if not floors:
        return
    print("\nDecisions no check can avoid (group privacy: whatever it reads with its share of ε, some trial of the"
          "\nreport costs at least this over the better branch, with the probability given):")
    for key, (cost, reached, a, b) in sorted(floors.items()):
        name, ndim, kind = key
        pair = f" ({a.split('/', 1)[1]} vs {b.split('/', 1)[1]}, probability {reached:.3f})" if a else ""
        print(f"  {name:26s} {ndim}-D {kind:8s} share {shares[key]:.1%}: {cost:.2f}{pair}")
        recorder(f"{name} {ndim}-D {kind} decision floor", cost, "ratio")
        if cost > 1.2:
            print(f"  {'':26s} at most 1.2 only above a share of {least_share(groups[key], name, data, 1.2):.1%} of ε")


def summarise_adaptive(results, dpcomp, recorder, data: dict | None = None) -> None:
    """``adaptive`` against the best single registered mechanism of each cell (the plain release's
    analytic error among them), its choice per trial, the per-trial spread, and the floors of
    :func:`choice_floor` (the one of any computation at the features' share of ε with ``data``,
    each cell's histogram by its id)."""
    rows = [r for r in results if "adaptive" in r["runs"] and "candidates" in r]
    if not rows:
        return
    print("\nadaptive against the best single mechanism (target: median <= 1.05, every cell <= 1.25); its choices per"
          "\ntrial; choice cost = the worst trial's chosen candidate (its mean error on the cell: a data-dependent"
          "\ncandidate's partition branch, or the plain route) over the cell's best candidate; per-trial spread = the"
          "\nworst trial's error over the best candidate's mean, and the same for the best single mechanism's own trials:")
    over_best, costs, spread, own_spread, vs_dpcomp = [], [], [], [], []
    for r in rows:
        plain = r["plain"]
        runs = r["runs"]
        singles = {name: float(np.mean(v)) for name, v in runs.items() if name != "adaptive"}
        singles["plain"] = plain
        best_single = min(singles, key=singles.get)
        adaptive = float(np.mean(runs["adaptive"]))
        plain_runs = next((r["plain_branch"][n] for n in ("dawa", "partition_then_transform") if n in r.get("plain_branch", {})), None)
        candidates = {"plain": float(np.mean(plain_runs)) if plain_runs else plain}
        candidates.update({n: float(np.mean(r["branch"][n])) for n in r["candidates"] if n in r["branch"]})
        best_candidate = min(candidates.values())
        routes = r["routes"]["adaptive"]
        cost = max(candidates.get(route, candidates["plain"]) for route in routes) / best_candidate
        worst_trial = max(runs["adaptive"]) / min(best_candidate, singles[best_single])
        own = max(runs[best_single]) / singles[best_single] if best_single in runs else 1.0
        over_best.append(adaptive / singles[best_single])
        costs.append(cost)
        spread.append(worst_trial)
        own_spread.append(own)
        chosen = ", ".join(f"{name} {count}" for name, count in collections.Counter(routes).most_common())
        line = (f"  {r['cell']:34s} adaptive/best {adaptive / singles[best_single]:5.2f} ({best_single[:10]})  ran: {chosen:22s}"
                f" choice cost {cost:5.2f}  spread {worst_trial:5.2f} (best single's own {own:5.2f})")
        if dpcomp and r["cell"] in dpcomp:
            vs_dpcomp.append(adaptive / dpcomp[r["cell"]][1])
            line += f"  /DPComp {vs_dpcomp[-1]:5.2f}"
        print(line)
    over_best, costs, spread, own_spread = map(np.array, (over_best, costs, spread, own_spread))
    print(f"adaptive over the best single mechanism: median {np.median(over_best):.3f}, worst {over_best.max():.3f}, "
          f"{int(np.sum(over_best > 1.25))} of {over_best.size} cells above 1.25")
    print(f"choice cost: worst {costs.max():.2f}, {int(np.sum(costs > 1.5))} cells above 1.5; per-trial spread above 1.5 in "
          f"{int(np.sum(spread > 1.5))} cells (the best single mechanism's own trials: {int(np.sum(own_spread > 1.5))})")
    recorder("adaptive over best single, median", float(np.median(over_best)), "ratio")
    recorder("adaptive over best single, worst", float(over_best.max()), "ratio")
    if vs_dpcomp:
        print(f"adaptive over DPComp's best: median {np.median(vs_dpcomp):.3f}, worst {max(vs_dpcomp):.3f}")
    for (ndim, kind), tau in sorted(choice_floor(rows).items()):
        print(f"{ndim}-D {kind}: no choice reading DAWA's check features is within {tau:.2f} times the best single "
              "mechanism in every cell (choice_floor)")
        recorder(f"{ndim}-D {kind} floor of any choice on the features over best single", tau, "ratio")
    if data:
        for ndim in sorted({int(r["cell"][0]) for r in rows}):
            k = K_1D if ndim == 1 else SHAPE_2D[0] * SHAPE_2D[1]
            share = total_share(k) + 2 * cost_share(k)  # what adaptive's features take
            of_dim = [r for r in rows if int(r["cell"][0]) == ndim]
            for (_, kind), tau in sorted(choice_floor(of_dim, anything_apart(data, share)).items()):
                print(f"{ndim}-D {kind}: no choice reading anything at all with {share:.1%} of ε is within {tau:.2f} "
                      "times the best single mechanism in every cell (group privacy)")
                recorder(f"{ndim}-D {kind} floor of any choice at adaptive's share over best single", tau, "ratio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("BLOWFISH_TE_DATA"))
    parser.add_argument("--dpcomp", default=None, help="DPComp's per-trial results on the exported cells")
    parser.add_argument("--dpcomp-exclude", default=",".join(DPCOMP_NOT_PRIVATE),
                        help="comma list of DPComp algorithms left out of its best (default: those not ε-DP as "
                             "published; give '' to count every one)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="1d,2d")
    parser.add_argument("--policy", choices=("dp", "blowfish"), default="dp",
                        help="unbounded DP (default), or the Blowfish policies line (1-D) and grid:1 (2-D)")
    parser.add_argument("--partitions", action="store_true", help="also DAWA's drawn partitions against the noise-free one")
    parser.add_argument("--export-cells", default=None)
    parser.add_argument("--results", type=pathlib.Path, default=None, help="write every trial's results here (JSON)")
    parser.add_argument("--from-results", type=pathlib.Path, default=None, help="summarise a --results file, run nothing")
    add_options(parser)
    args = parser.parse_args()
    excluded = sorted(filter(None, args.dpcomp_exclude.split(",")))
    dpcomp = read_dpcomp(args.dpcomp, set(excluded)) if args.dpcomp else None
    if dpcomp is not None and excluded:
        print("DPComp's best leaves out: " + "; ".join(f"{name} ({DPCOMP_NOT_PRIVATE.get(name, 'by request')})"
                                                       for name in excluded))
    if args.from_results:
        results = json.loads(args.from_results.read_text())
        data = None
        if args.data_dir is not None:  # the histograms, for the floor of any choice at adaptive's share
            listed = {c["id"]: c for c in cells(args.data_dir, ("1d", "2d"))}
            data = {r["cell"]: data_of(listed[r["cell"]]) for r in results if r["cell"] in listed}
        summarise(results, dpcomp, Recorder(args.json))
        if data:
            summarise_decision_floors(results, data, Recorder(args.json))
        summarise_adaptive(results, dpcomp, Recorder(args.json), data)
        return
    if args.data_dir is None:
        raise SystemExit("give --data-dir (the DPBench folder with 1D/ and 2D/) or set $BLOWFISH_TE_DATA")
    cell_list = cells(args.data_dir, args.only.split(","))
    if args.quick:
        cell_list = [c for c in cell_list if "/ADULT" in c["id"] or "/GOWALLA" in c["id"]]
        args.seeds = min(args.seeds, 3)
    if args.export_cells:
        export(cell_list, args.export_cells)
        return
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(measure_cell, [(c, args.seeds, args.partitions, args.policy) for c in cell_list]))
    if args.results:
        args.results.write_text(json.dumps(results))
    data = {c["id"]: data_of(c) for c in cell_list}
    summarise(results, dpcomp, Recorder(args.json))
    summarise_decision_floors(results, data, Recorder(args.json))
    summarise_adaptive(results, dpcomp, Recorder(args.json), data)


if __name__ == "__main__":
    main()
