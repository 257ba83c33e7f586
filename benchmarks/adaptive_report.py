"""Data-dependent releases against the plain release, as DPBench measures them: across scales and ε.

Run: ``python benchmarks/adaptive_report.py --data-dir ../shared/datasets/dpbench [--extra-dir DIR]
[--seeds 5] [--workers 2] [--only hist,ranges,2d,speed]`` (or set $BLOWFISH_TE_DATA). ``--extra-dir``
adds every ``.npy`` histogram under it (1-D of 4096 cells, 2-D of 256²), e.g. DPComp's data files
that are not among the shared ones. Without any data directory the tables use the built-in
synthetic shapes.

Every shape is sampled with ``datasets.dpbench_sample`` (seed 0) at each scale; per-cell MSE is the
mean over seeds, divided by the plain release's analytic error:

- 1-D histograms (4096 cells), scales 10³/10⁵/10⁷ × ε 0.001/0.01/0.1: ``dawa`` and DAWA without its
  private check (``select=False``: the algorithm before the check existed) over Identity under
  unbounded DP; ``partition_then_transform`` and its unchecked twin over Transformed+Laplace under
  ``line``; ``adaptive`` over the better of its candidates under both. Flags: ``>1.15`` (loses to
  the plain release), ``win×r`` (where the unchecked release won, ratio <= 0.5, the checked one is
  r > 1.1 times it).
- 1-D prefixes and 2000 random ranges, scales 10⁵/10⁷, ε = 0.1: the same checks.
- 2-D, 128², 2000 DPBench random rectangles, scales 10⁴/10⁶, ε 0.01/0.1: ``ugrid``, ``agrid``, ``privtree``,
  ``dawa`` and ``adaptive`` over Identity under unbounded DP; ``adaptive`` under ``grid:1`` over the
  best linear strategy of ``auto``.
- speed: DAWA under ``line`` against unbounded DP at K = 4096; ``adaptive`` against the mechanism
  it ran plus its feature step.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _measure import Recorder, add_options

import blowfish_te as bt
from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.mechanisms import Adaptive, PartitionThenTransform
from blowfish_te.selection import choose
from blowfish_te.smoothing import CellNoise, smooth

K = 4096
SHAPE_2D = (128, 128)


def shapes(data_dir, extra_dir, ndim: int) -> dict[str, np.ndarray]:
    """Shapes by name: the DPBench folder's, then the extra folder's, else built-in synthetic ones."""
    out = {}
    sub = "1D" if ndim == 1 else "2D"
    for folder in (data_dir, extra_dir):
        if folder is None:
            continue
        for path in sorted(pathlib.Path(folder).rglob("*.npy")):
            x = np.load(path, allow_pickle=False)
            if x.ndim == ndim and (folder == extra_dir or path.parent.name == sub):
                counts = np.rint(x).astype(np.int64)
                if counts.sum() > 0 and path.stem not in out:
                    out[path.stem] = counts
    if not out:
        out = {"synthetic-1d": datasets.load("synthetic-1d")} if ndim == 1 else {"synthetic-2d": datasets.load("synthetic-2d")}
    return out


def mse(mechanism, workload, x, policy, epsilon, seeds) -> float:
    truth = workload @ np.asarray(x).ravel()
    return float(np.mean([np.mean((bt.answer(workload, x, policy, epsilon, mechanism, rng=s).answers - truth) ** 2)
                          for s in range(seeds)]))


def flags(new: float, today: float, reference: float = 1.0) -> str:
    out = []
    if new > 1.15 * reference:
        out.append(">1.15")
    if today <= 0.5 * reference and new > 1.1 * today:
        out.append(f"win×{new / today:.2f}")
    return " ".join(out)


FAST = Adaptive(budget=0)


def histogram_cell(task):
    name, shape, scale, eps, seeds = task
    x = datasets.dpbench_sample(shape, scale, rng=0)
    w = wl.identity(x.size)
    unbounded, line = policies.unbounded(x.size), policies.line(x.size)
    identity, transformed = 2 / eps**2, bt.answer(w, x, line, eps, "identity", rng=0).expected_mse
    return name, scale, eps, _dependent(w, x, unbounded, line, eps, seeds, identity, transformed)


def _dependent(w, x, unbounded, line, eps, seeds, identity, transformed) -> dict:
    """DAWA under unbounded DP, partition-then-transform under line (each with and without its
    check) and adaptive under both, over the plain release of their policy."""
    return {
        "dawa": mse("dawa", w, x, unbounded, eps, seeds) / identity,
        "dawa0": mse(M.DAWA(select=False), w, x, unbounded, eps, seeds) / identity,
        "ptt": mse("partition_then_transform", w, x, line, eps, seeds) / transformed,
        "ptt0": mse(PartitionThenTransform(select=False), w, x, line, eps, seeds) / transformed,
        "ad_dp": mse(FAST, w, x, unbounded, eps, seeds) / identity,
        "ad_line": mse(FAST, w, x, line, eps, seeds) / transformed,
    }


def ranges_cell(task):
    name, shape, scale, eps, seeds, kind = task
    x = datasets.dpbench_sample(shape, scale, rng=0)
    w = wl.prefix(x.size) if kind == "prefix" else wl.random_ranges(x.size, 2000, rng=0)
    unbounded, line = policies.unbounded(x.size), policies.line(x.size)
    identity = bt.plan(w, unbounded, eps, "identity").chosen.expected_mse
    transformed = bt.plan(w, line, eps, "identity").chosen.expected_mse
    plain = M.Auto(budget=0)  # adaptive's data-independent candidate, measured on the same seeds
    r = {
        "plain_dp": mse(plain, w, x, unbounded, eps, seeds) / identity,
        "plain_line": mse(plain, w, x, line, eps, seeds) / transformed,
        **_dependent(w, x, unbounded, line, eps, seeds, identity, transformed),
    }
    return name, scale, eps, kind, r


def grid_cell(task):
    name, shape, scale, eps, seeds = task
    x = datasets.dpbench_sample(shape, scale, domain=SHAPE_2D, rng=0)
    w = wl.dpbench_ranges(SHAPE_2D, 2000, rng=0)
    unbounded, grid = policies.unbounded(SHAPE_2D), policies.grid(SHAPE_2D)
    identity = bt.answer(w, x, unbounded, eps, "identity", rng=0).expected_mse
    r = {m: mse(m, w, x, unbounded, eps, seeds) / identity for m in ("ugrid", "agrid", "privtree", "dawa")}
    r["adaptive"] = mse(FAST, w, x, unbounded, eps, seeds) / identity
    best = bt.plan(w, grid, eps, M.Auto(budget=0)).chosen
    r["grid1"] = mse(FAST, w, x, grid, eps, seeds) / best.expected_mse
    r["grid1_best"] = f"{best.mechanism.name} ({best.route})"
    return name, scale, eps, r


def run(tasks, function, workers):
    if workers <= 1:
        return [function(t) for t in tasks]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(function, tasks))


#: The measurements kept for benchmarks/run.py (``--json``); set by main.
record = Recorder(None)


def report_histograms(shapes_1d, seeds, workers) -> None:
    print("## 1-D histograms (4096 cells): MSE over the plain release\n")
    print("dawa, dawa without check (today) over Identity (unbounded DP); ptt and its unchecked twin over "
          "Transformed+Laplace (line); adaptive over the better of its candidates (the unchecked data-dependent "
          "release, the plain one).\n")
    print("| shape | scale | ε | dawa | today | ptt | today | adaptive DP | adaptive line | flags |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tasks = [(n, s, scale, eps, seeds) for n, s in shapes_1d.items() for scale in (10**3, 10**5, 10**7) for eps in (0.001, 0.01, 0.1)]
    count = 0
    for name, scale, eps, r in run(tasks, histogram_cell, workers):
        ad_dp, ad_line = r["ad_dp"] / min(r["dawa0"], 1.0), r["ad_line"] / min(r["ptt0"], 1.0)
        f = " ".join(x for x in (flags(r["dawa"], r["dawa0"]), flags(r["ptt"], r["ptt0"]),
                                 ">1.15 adaptive" if max(ad_dp, ad_line) > 1.15 else "") if x)
        count += bool(f)
        for key, value in (("dawa", r["dawa"]), ("ptt", r["ptt"]), ("adaptive DP", ad_dp), ("adaptive line", ad_line)):
            record(f"histogram, {name}, scale {scale:.0e}, ε {eps:g}: {key} MSE over the plain release", value, "ratio")
        print(f"| {name} | {scale:.0e} | {eps:g} | {r['dawa']:.4f} | {r['dawa0']:.4f} | {r['ptt']:.4f} | {r['ptt0']:.4f} | "
              f"{ad_dp:.2f} | {ad_line:.2f} | {f} |", flush=True)
    print(f"\n{count} of {len(tasks)} cells flagged.\n")


def report_ranges(shapes_1d, seeds, workers) -> None:
    print("## 1-D prefixes and 2000 random ranges, ε = 0.1: MSE over Identity (DP) / Transformed+Laplace (line)\n")
    print("adaptive over the better of its candidates: the unchecked data-dependent release and auto's plain one "
          "(both measured on the same seeds).\n")
    print("| workload | shape | scale | dawa | today | ptt | today | adaptive DP | adaptive line | flags |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tasks = [(n, s, scale, 0.1, seeds, kind) for kind in ("prefix", "ranges") for n, s in shapes_1d.items() for scale in (10**5, 10**7)]
    for name, scale, _eps, kind, r in run(tasks, ranges_cell, workers):
        ad_dp = r["ad_dp"] / min(r["dawa0"], r["plain_dp"])
        ad_line = r["ad_line"] / min(r["ptt0"], r["plain_line"])
        f = " ".join(x for x in (flags(r["dawa"], r["dawa0"]), flags(r["ptt"], r["ptt0"]),
                                 ">1.15 adaptive" if max(ad_dp, ad_line) > 1.15 else "") if x)
        for key, value in (("dawa", r["dawa"]), ("ptt", r["ptt"]), ("adaptive DP", ad_dp), ("adaptive line", ad_line)):
            record(f"{kind}, {name}, scale {scale:.0e}: {key} MSE over the plain release", value, "ratio")
        print(f"| {kind} | {name} | {scale:.0e} | {r['dawa']:.4f} | {r['dawa0']:.4f} | {r['ptt']:.4f} | {r['ptt0']:.4f} | "
              f"{ad_dp:.2f} | {ad_line:.2f} | {f} |", flush=True)
    print()


def report_grids(shapes_2d, seeds, workers) -> None:
    print("## 2-D, 128², 2000 DPBench random rectangles: MSE over Identity's analytic error (unbounded DP); adaptive under grid:1 "
          "over the best linear strategy\n")
    print("| shape | scale | ε | ugrid | agrid | privtree | dawa | adaptive | adaptive grid:1 (best linear) |")
    print("|---|---|---|---|---|---|---|---|---|")
    tasks = [(n, s, scale, eps, seeds) for n, s in shapes_2d.items() for scale in (10**4, 10**6) for eps in (0.01, 0.1)]
    for name, scale, eps, r in run(tasks, grid_cell, workers):
        for key in ("ugrid", "agrid", "privtree", "dawa", "adaptive", "grid1"):
            record(f"2-D, {name}, scale {scale:.0e}, ε {eps:g}: {key} MSE over Identity", r[key], "ratio")
        print(f"| {name} | {scale:.0e} | {eps:g} | {r['ugrid']:.3f} | {r['agrid']:.3f} | {r['privtree']:.3f} | {r['dawa']:.3f} | "
              f"{r['adaptive']:.3f} | {r['grid1']:.3f} ({r['grid1_best']}) |", flush=True)
    print()


def seconds(function, repeats=5) -> float:
    function()  # warm caches (plans, strategies)
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def report_speed(shapes_1d) -> None:
    print("## Speed (K = 4096, histogram, seconds per release, warm)\n")
    print("| shape | scale | ε | dawa DP | dawa line | line / DP | adaptive DP | features | what it ran | ran alone | "
          "adaptive / (ran + features) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    w = wl.identity(K)
    unbounded, line = policies.unbounded(K), policies.line(K)
    for name, shape in list(shapes_1d.items())[:4]:
        for scale, eps in ((10**5, 0.01), (10**7, 0.01)):
            x = datasets.dpbench_sample(shape, scale, rng=0)
            dp = seconds(lambda: bt.answer(w, x, unbounded, eps, "dawa", rng=1))
            ln = seconds(lambda: bt.answer(w, x, line, eps, "dawa", rng=1))
            ad = seconds(lambda: bt.answer(w, x, unbounded, eps, FAST, rng=1))
            features = seconds(lambda: choose(x, eps, np.random.default_rng(1)))
            decision = choose(x, eps, np.random.default_rng(1))
            rest = eps - decision.spent
            if decision.route == "partition":
                ran, alone = "dawa", seconds(lambda: M.DAWA(select=False).partitioned(w, x, 0.25 * rest, 0.75 * rest,
                                                                                       np.random.default_rng(1)))
            else:
                smoothed = decision.route == "smooth"
                ran = "identity" + (" + smoothing" if smoothed else "")
                noise = CellNoise("independent", 2 / rest**2, K)
                alone = seconds(lambda: (lambda cells: smooth(cells, noise) if smoothed else cells)(
                    bt.answer(w, x, unbounded, rest, "identity", rng=1).answers))
            for key, value in (("dawa DP", dp), ("dawa line", ln), ("adaptive DP", ad)):
                record(f"speed, {name}, scale {scale:.0e}, ε {eps:g}: {key} warm release", value, "s")
            print(f"| {name} | {scale:.0e} | {eps:g} | {dp:.3f} | {ln:.3f} | {ln / dp:.2f} | {ad:.3f} | {features:.3f} | {ran} | "
                  f"{alone:.3f} | {ad / (alone + features):.2f} |", flush=True)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get(datasets.DATA_DIR_ENV))
    parser.add_argument("--extra-dir", default=None, help="more .npy histograms (1-D 4096 cells, 2-D 256²)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", default="hist,ranges,2d,speed")
    add_options(parser)
    args = parser.parse_args()
    global record
    record = Recorder(args.json)
    if args.data_dir is not None:
        datasets.data_dir(args.data_dir)  # a clear error when the folder does not exist
    parts = set(args.only.split(","))
    shapes_1d = shapes(args.data_dir, args.extra_dir, 1)
    shapes_1d = {n: s for n, s in shapes_1d.items() if s.size == K}
    if "hist" in parts:
        report_histograms(shapes_1d, args.seeds, args.workers)
    if "ranges" in parts:
        report_ranges(shapes_1d, args.seeds, args.workers)
    if "2d" in parts:
        shapes_2d = {n: s for n, s in shapes(args.data_dir, args.extra_dir, 2).items() if s.shape in ((256, 256), (128, 128))}
        report_grids(shapes_2d, args.seeds, args.workers)
    if "speed" in parts:
        report_speed(shapes_1d)


if __name__ == "__main__":
    main()
