"""Strategy-library report: peer regression targets (item 6) and the headline table (item 8).

Run: ``python benchmarks/strategy_report.py --data-dir ../shared/datasets/dpbench`` (or set
$BLOWFISH_TE_DATA). For each workload × policy × mechanism: the automatic route choice, its analytic
per-query RMSE, the ratio of its expected MSE to the SVD lower bound of W P_G, and the measured
per-query RMSE over seeded trials on each dataset.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from blowfish_te import answer, datasets, plan, policies
from blowfish_te import workloads as wl
from blowfish_te.bounds import lower_bound
from blowfish_te.mechanisms import get_mechanism

TARGETS = {"identity": "≈ 640 (analytic)", "hb": "≈ 149 (analytic)", "privelet": "≈ 226", "h2": "215–230", "greedyh": "210–234"}


def measured_rmse(workload, x, policy, epsilon, mechanism, trials, tree=None, route="auto") -> float:
    truth = workload @ x
    errors = [np.mean((answer(workload, x, policy, epsilon, mechanism, rng=t, route=route, tree=tree).answers - truth) ** 2)
              for t in range(trials)]
    return math.sqrt(float(np.mean(errors)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--datasets", nargs="+", default=["HEPTH", "SEARCHLOGS"])
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--mechanisms", nargs="+", default=["identity", "laplace", "h2", "hb", "privelet", "greedyh", "optimized"])
    parser.add_argument("--thetas", nargs="+", type=int, default=[4, 16, 64])
    parser.add_argument("--skip-regression", action="store_true")
    parser.add_argument("--regression-only", action="store_true")
    args = parser.parse_args()
    eps, k = args.epsilon, 4096
    data = {name: datasets.load(name, args.data_dir) for name in args.datasets}

    if not args.skip_regression:
        w, x = wl.prefix(k), data[args.datasets[0]]
        print(f"## Regression: {args.datasets[0]}, {k} cells, eps = {eps}, all prefix queries, unbounded DP\n")
        print(f"| mechanism | analytic RMSE | measured RMSE ({args.trials} trials) | peer target |")
        print("|---|---|---|---|")
        for name in ["identity", "hb", "h2", "privelet", "greedyh"]:
            analytic = math.sqrt(get_mechanism(name).expected_error(w, eps) / k)
            measured = measured_rmse(w, x, policies.unbounded(k), eps, name, args.trials)
            print(f"| {name} | {analytic:.1f} | {measured:.1f} | {TARGETS[name]} |", flush=True)
        root = get_mechanism("hb").__class__(root=True)
        print(f"| hb (with root) | {math.sqrt(root.expected_error(w, eps) / k):.1f} | | ≈ 157 (analytic) |\n", flush=True)
    if args.regression_only:
        return

    workloads_ = {"prefix": wl.prefix(k), "2000 random ranges": wl.random_ranges(k, 2000, rng=0)}
    policy_list = [policies.unbounded(k), policies.line(k)] + [policies.threshold(k, t) for t in args.thetas]
    for wname, w in workloads_.items():
        print(f"## {wname}, {k} cells, eps = {eps}: per-query RMSE (automatic route), expected MSE / SVD bound of W P_G\n")
        header = "| policy | bound RMSE | mechanism | route | analytic RMSE | × bound | " + " | ".join(
            f"{d} measured" for d in args.datasets) + " |"
        print(header)
        print("|" + "---|" * (header.count("|") - 1))
        for policy in policy_list:
            start = time.perf_counter()
            bound = lower_bound(w, eps, policy) / w.num_queries
            for name in args.mechanisms:
                chosen = plan(w, policy, eps, name).chosen
                tree = chosen.tree if chosen.route == "transform" and chosen.tree is not policy else None
                route = "exact" if chosen.route == "exact" else "auto"
                measured = [measured_rmse(w, data[d], policy, eps, name, args.trials, tree=tree, route=route) for d in args.datasets]
                print(f"| {policy.name} | {math.sqrt(bound):.1f} | {name} | {chosen.label} | {math.sqrt(chosen.expected_mse):.1f} | "
                      f"{chosen.expected_mse / bound:.2f} | " + " | ".join(f"{v:.1f}" for v in measured) + " |", flush=True)
            print(f"<!-- {policy.name}: {time.perf_counter() - start:.0f} s -->", flush=True)
        print()


if __name__ == "__main__":
    main()
