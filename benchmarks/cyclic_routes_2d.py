"""Routes for 2-D grid policies: stretch of every candidate tree, expected error of every route for
2000 DPBench random rectangles, and the automatic choice.

Run: ``python benchmarks/cyclic_routes_2d.py [--sizes 64 256] [--fixture out.json]``.
The 64 × 64 rows (``--sizes 64 --fixture ...``) are the test fixture ``tests/fixtures/grid_routes_64.json``.
"""

from __future__ import annotations

import argparse
import json
import time

from _measure import Recorder, add_options

from blowfish_te import plan, policies, trees
from blowfish_te import workloads as wl

EPSILON = 1.0
QUERIES = 2000
SEED = 0


def report(size: int, theta: int) -> dict:
    shape = (size, size)
    policy = policies.grid(shape, theta)
    workload = wl.dpbench_ranges(shape, QUERIES, rng=SEED)
    start = time.perf_counter()
    candidates = trees.candidates(policy)
    stretches = {name: int(trees.stretch(policy, tree).maximum) for name, tree in candidates.items()}
    row = {"shape": list(shape), "theta": theta, "stretch": stretches, "routes": {}, "chosen": {}}
    for mechanism in ("identity", "laplace"):
        the_plan = plan(workload, policy, EPSILON, mechanism)
        row["routes"][mechanism] = {c.label: c.expected_mse for c in the_plan.considered if c.floor is None}
        row.setdefault("floors", {})[mechanism] = {c.label: c.floor for c in the_plan.considered if c.floor is not None}
        row["chosen"][mechanism] = the_plan.chosen.label
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--fixture", help="write the rows to this file")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    rows = []
    for size in args.sizes:
        for theta in (1, 4):
            row = report(size, theta)
            rows.append(row)
            record(f"grid(({size}, {size}), {theta}): planning", row["seconds"], "s")
            for mechanism, chosen in row["chosen"].items():
                record(f"grid(({size}, {size}), {theta}), {mechanism}: chosen route's MSE", row["routes"][mechanism][chosen], "mse")
            print(f"\n## grid(({size}, {size}), theta={theta}), {QUERIES} random rectangles, epsilon = {EPSILON} ({row['seconds']} s)")
            print("stretch: " + ", ".join(f"{k} {v}" for k, v in row["stretch"].items()))
            for mechanism, routes in row["routes"].items():
                print(f"{mechanism}: chosen {row['chosen'][mechanism]}")
                for label, mse in routes.items():
                    print(f"    {label:<70} {mse:>14.1f}")
                for label, floor in row["floors"][mechanism].items():
                    print(f"    {label:<70} skipped: per-query MSE >= {floor:.1f}")
    if args.fixture:
        with open(args.fixture, "w") as fh:
            json.dump(rows, fh, indent=1)  # key order is the ranking


if __name__ == "__main__":
    main()
