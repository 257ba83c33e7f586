"""Speed of the strategy library.

Run: ``python benchmarks/bench_mechanisms.py [--skip-optimized]``. Times one full ``run`` (strategy,
measurement, least squares, answers) on prefix workloads; "cold" includes building the strategy,
"warm" reuses it (strategies are cached per domain or workload).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _measure import Recorder, add_options, best_of

from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl


def clock(fn) -> float:
    return best_of(1, fn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-optimized", action="store_true")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    rng = np.random.default_rng(0)
    cases = [
        ("1-D, K = 4096", wl.prefix(4096), 0.1, [M.Identity(), M.H2(), M.HB(), M.Privelet()]),
        ("1-D, K = 2^20", wl.prefix(2**20), 5.0, [M.Identity(), M.H2(), M.HB(), M.Privelet()]),
        ("2-D, 1024 x 1024", wl.dpbench_ranges((1024, 1024), 2000, rng=0), 5.0, [M.HB(), M.QuadTree(), M.Privelet()]),
    ]
    for label, w, target, mechs in cases:
        x = rng.integers(0, 10, w.size)
        for mech in mechs:
            cold = record(f"{label}, {mech.name}: cold run", clock(lambda: mech.run(w, x, 0.1, rng=1)), "s")
            warm = record(f"{label}, {mech.name}: warm run", clock(lambda: mech.run(w, x, 0.1, rng=2)), "s")
            print(f"{label:<18} {mech.name:<10} cold {cold:7.3f} s  warm {warm:7.3f} s   target < {target} s", flush=True)
    w = wl.prefix(4096)
    x = rng.integers(0, 10, 4096)
    greedy = M.GreedyH()
    cold = record("1-D, K = 4096, greedyh: cold run", clock(lambda: greedy.run(w, x, 0.1, rng=1)), "s")
    warm = record("1-D, K = 4096, greedyh: warm run", clock(lambda: greedy.run(w, x, 0.1, rng=2)), "s")
    print(f"{'1-D, K = 4096':<18} {'greedyh':<10} cold {cold:7.3f} s  warm {warm:7.3f} s   target < 2 s", flush=True)
    if args.skip_optimized:
        return
    best_fixed = min((m.expected_error(w, 0.1), m.name) for m in [M.Identity(), M.H2(), M.HB(), M.Privelet(), greedy])
    optimized = M.Optimized()
    seconds = record("1-D, K = 4096, optimized: cold run", clock(lambda: optimized.run(w, x, 0.1, rng=1)), "s")
    error = optimized.expected_error(w, 0.1)
    record("1-D, K = 4096, optimized: per-query RMSE at ε = 0.1", math.sqrt(error / 4096), "rmse")
    print(f"{'1-D, K = 4096':<18} {'optimized':<10} cold {seconds:7.3f} s   target < 60 s; per-query RMSE "
          f"{math.sqrt(error / 4096):.1f} vs best fixed ({best_fixed[1]}) {math.sqrt(best_fixed[0] / 4096):.1f}")


if __name__ == "__main__":
    main()
