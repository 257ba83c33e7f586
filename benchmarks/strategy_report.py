"""Strategy report: peer regression targets and the headline tables of strategies near the limit.

Run: ``python benchmarks/strategy_report.py [--data-dir ../shared/datasets/dpbench]`` (or set
$BLOWFISH_TE_DATA; without data the regression section is skipped and measured errors use a seeded
synthetic histogram — the error of a linear mechanism does not depend on the data).

Headline tables, 1-D (prefix and 2000 random ranges, K cells; all ranges under unbounded DP) and
2-D (2000 DPBench random rectangles on side² cells): every strategy × policy, with the route the planner chooses, the analytic per-query
RMSE, its ratio to two lower bounds on W P_G — the SVD bound (``bounds.lower_bound``) and the
column-weighted bound (``bounds.weighted_lower_bound``, where W P_G fits densely; any weighting
gives a valid bound, so fewer ascent steps only make it looser) — in MSE and in RMSE, the mean
measured per-query RMSE over seeded releases, and the planning time (the optimiser's time for
``optimized``, whose strategies are computed there, and the tuning time for
``ordered_hierarchical_tuned``; ``auto`` reuses strategies already cached). No Laplace strategy
can come within about π/2 of even the best convex bound: ``docs/theory.md`` gives the argument.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _measure import Recorder, add_options

from blowfish_te import datasets, plan, policies
from blowfish_te import workloads as wl
from blowfish_te.bounds import lower_bound, weighted_lower_bound
from blowfish_te.mechanisms import get_mechanism

TARGETS = {"identity": "≈ 640 (analytic)", "hb": "≈ 149 (analytic)", "privelet": "≈ 226", "h2": "215–230", "greedyh": "210–234"}
MECHANISMS_1D = ["identity", "hb", "h2", "privelet", "greedyh", "ordered_hierarchical", "ordered_hierarchical_tuned",
                 "optimized", "auto"]
MECHANISMS_2D = ["identity", "hb", "quadtree", "privelet", "greedyh", "optimized", "auto"]


#: The measurements kept for benchmarks/run.py (``--json``); set by main.
record = Recorder(None)


def measured_rmse(release_plan, x, trials) -> tuple[float, float]:
    """The root of the mean per-query MSE over seeded releases, and the relative standard error
    of that mean MSE (large where queries share noise: per-release errors are then skewed)."""
    truth = release_plan.workload @ x.ravel()
    errors = np.array([np.mean((release_plan.release(x, rng=t).answers - truth) ** 2) for t in range(trials)])
    spread = float(errors.std(ddof=1) / errors.mean() / math.sqrt(trials)) if trials > 1 else float("nan")
    return math.sqrt(float(errors.mean())), spread


def synthetic(shape, seed=0) -> np.ndarray:
    """A seeded skewed histogram of 10^6 records (the measured error of a linear mechanism does
    not depend on it)."""
    gen = np.random.default_rng(seed)
    weights = gen.pareto(1.5, size=int(np.prod(shape))) + 1e-3
    return gen.multinomial(10**6, weights / weights.sum()).reshape(shape).astype(np.int64)


def ratios(mse: float | None, bound: float | None) -> str:
    """``mse`` over ``bound`` in MSE, and in RMSE in brackets."""
    if mse is None or not bound:
        return "n/a"
    return f"{mse / bound:.2f} ({math.sqrt(mse / bound):.2f})"


def table(title, workload, policy_list, mechanisms, eps, x, trials, weighted_steps) -> None:
    print(f"## {title}\n")
    print("| policy | SVD bound RMSE | weighted bound RMSE | mechanism | route | analytic RMSE | × SVD bound, MSE (RMSE) "
          "| × weighted bound, MSE (RMSE) | measured RMSE (± s.e. of MSE) | plan time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for policy in policy_list:
        bound = lower_bound(workload, eps, policy) / workload.num_queries
        try:
            weighted = weighted_lower_bound(workload, eps, policy, steps=weighted_steps) / workload.num_queries
        except ValueError:  # W P_G too large to decompose densely
            weighted = None
        bounds = f"{math.sqrt(bound):.1f} | " + ("n/a" if weighted is None else f"{math.sqrt(weighted):.1f}")
        for name in mechanisms:
            start = time.perf_counter()
            try:
                chosen_plan = plan(workload, policy, eps, name)
            except (ValueError, TypeError) as err:
                print(f"| {policy.name} | {bounds} | {name} | n/a: {str(err).split(';')[0][:60]} | | | | | |")
                continue
            seconds = time.perf_counter() - start
            chosen = chosen_plan.chosen
            mse = chosen.expected_mse
            measured, spread = measured_rmse(chosen_plan, x, trials) if trials else (float("nan"), float("nan"))
            analytic = "n/a" if mse is None else f"{math.sqrt(mse):.1f}"
            case = f"{title}, {policy.name}, {name}"
            record(f"{case}: planning", seconds, "s")
            if mse is not None:
                record(f"{case}: analytic per-query RMSE", math.sqrt(mse), "rmse")
                record(f"{case}: MSE over the SVD bound", mse / bound, "ratio")
            print(f"| {policy.name} | {bounds} | {name} | {chosen.label} | {analytic} | {ratios(mse, bound)} | "
                  f"{ratios(mse, weighted)} | {measured:.1f} (± {100 * spread:.0f} %) | {seconds:.1f} |", flush=True)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--dataset", default="HEPTH", help="1-D dataset for the regression section and measured errors")
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--cells", type=int, default=4096, help="1-D domain size K")
    parser.add_argument("--sides", nargs="+", type=int, default=[64, 128], help="2-D domain sides")
    parser.add_argument("--thetas", nargs="+", type=int, default=[4, 16, 64])
    parser.add_argument("--only", choices=["regression", "1d", "2d"], default=None)
    parser.add_argument("--weighted-steps", type=int, default=20,
                        help="ascent steps of the weighted bound (each one SVD of the dense W P_G)")
    add_options(parser)
    args = parser.parse_args()
    global record
    record = Recorder(args.json)
    eps, k = args.epsilon, args.cells
    try:
        x1 = datasets.load(args.dataset, args.data_dir)
        if x1.size != k:
            x1 = x1.reshape(k, -1).sum(axis=1) if x1.size % k == 0 else synthetic((k,))
    except (OSError, ValueError):
        x1 = None

    if args.only in (None, "regression") and x1 is not None and k == 4096:
        w = wl.prefix(k)
        print(f"## Regression: {args.dataset}, {k} cells, eps = {eps}, all prefix queries, unbounded DP\n")
        print(f"| mechanism | analytic RMSE | measured RMSE ({args.trials} trials) | peer target |")
        print("|---|---|---|---|")
        for name in ["identity", "hb", "h2", "privelet", "greedyh"]:
            release_plan = plan(w, policies.unbounded(k), eps, name)
            analytic = math.sqrt(release_plan.chosen.expected_mse)
            print(f"| {name} | {analytic:.1f} | {measured_rmse(release_plan, x1, args.trials)[0]:.1f} | {TARGETS[name]} |", flush=True)
        root = get_mechanism("hb").__class__(root=True)
        print(f"| hb (with root) | {math.sqrt(root.expected_error(w, eps) / k):.1f} | | ≈ 157 (analytic) |\n", flush=True)

    if args.only in (None, "1d"):
        x = x1 if x1 is not None else synthetic((k,))
        policy_list = [policies.unbounded(k), policies.line(k)] + [policies.threshold(k, t) for t in args.thetas]
        for wname, w in {"prefix": wl.prefix(k), "2000 random ranges": wl.random_ranges(k, 2000, rng=0)}.items():
            table(f"1-D: {wname}, {k} cells, eps = {eps}", w, policy_list, MECHANISMS_1D, eps, x, args.trials, args.weighted_steps)
        table(f"1-D: all {k * (k + 1) // 2} ranges, {k} cells, eps = {eps}", wl.all_ranges(k), [policies.unbounded(k)],
              MECHANISMS_1D, eps, x, args.trials, args.weighted_steps)
    if args.only in (None, "2d"):
        for side in args.sides:
            shape = (side, side)
            policy_list = [policies.unbounded(shape), policies.complete(shape), policies.grid(shape, 1), policies.grid(shape, 4)]
            table(f"2-D: 2000 DPBench random rectangles, {side}×{side} cells, eps = {eps}", wl.dpbench_ranges(shape, 2000, rng=0),
                  policy_list, MECHANISMS_2D, eps, synthetic(shape), args.trials, args.weighted_steps)


if __name__ == "__main__":
    main()
