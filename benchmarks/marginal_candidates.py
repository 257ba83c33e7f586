"""Strategies over cells against strategies over marginals, on marginal workloads: for each
domain × k-way × policy, every candidate ``auto`` would weigh without its marginals rule (plan
and analytic error, ε = 1), each case in a fresh process with an empty strategy cache.

Printed per case: the best strategy over cells (identity, the hierarchies, ``optimized``) over
the best strategy that answers marginals structurally (``laplace``, ``marginals``,
``marginals_optimized``), and the seconds each group took to plan. ``auto`` compares only the
second group on marginals; this is the measurement behind that rule.

    python benchmarks/marginal_candidates.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _measure import Recorder, add_options

SHAPES = ["2x2x2", "3x3x3x3", "4x4x4x4x4", "10x10x10", "6x6x6x6", "2x5x10x10", "8x8x8x8", "2x2x2x2x2x2x2x2x2x2",
          "4x4x4x4x4x4"]
QUICK = ["2x2x2", "3x3x3x3", "10x10x10"]


def one_case(shape_text: str, k: int, policy_name: str) -> dict:
    """Every candidate's per-query MSE and planning seconds, and whether it answers marginals structurally."""
    from blowfish_te import policies
    from blowfish_te import workloads as wl
    from blowfish_te.mechanisms import get_mechanism
    from blowfish_te.mechanisms.auto import analytic_mechanisms
    from blowfish_te.routes import plan_routes

    shape = tuple(int(s) for s in shape_text.split("x"))
    workload = wl.all_marginals(shape, k)
    policy = policies.unbounded(shape) if policy_name == "unbounded" else policies.attribute(shape)
    out = {}
    for name in [*analytic_mechanisms(), "optimized"]:
        mech = get_mechanism(name)
        started = time.perf_counter()
        try:
            mse = plan_routes(workload, policy, 1.0, mech, "auto").chosen.expected_mse
        except (ValueError, TypeError, NotImplementedError):
            continue  # not for this domain or policy (the ordered mechanisms)
        out[name] = (mse, time.perf_counter() - started, mech.handles_large_domain(workload))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs=3, metavar=("SHAPE", "K", "POLICY"), help=argparse.SUPPRESS)
    add_options(parser)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case[0], int(args.case[1]), args.case[2])))
        return
    recorder = Recorder(args.json)
    ratios = []
    print(f"{'domain':22s} {'k':>2s} {'policy':10s} {'best over cells':>26s} {'best over marginals':>30s} {'ratio':>7s}"
          f" {'s cells':>8s} {'s marginals':>11s}")
    for policy_name in ("unbounded", "attribute"):
        for shape in QUICK if args.quick else SHAPES:
            for k in (1, 2, 3):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, BLOWFISH_TE_CACHE_DIR=cache, OPENBLAS_NUM_THREADS="1")
                    done = subprocess.run([sys.executable, __file__, "--case", shape, str(k), policy_name], env=env,
                                          capture_output=True, text=True, check=True)
                res = json.loads(done.stdout)
                cells = {n: v for n, v in res.items() if not v[2] and v[0] is not None}
                marg = {n: v for n, v in res.items() if v[2] and v[0] is not None}
                best_c, best_m = min(cells, key=lambda n: cells[n][0]), min(marg, key=lambda n: marg[n][0])
                ratio = cells[best_c][0] / marg[best_m][0]
                ratios.append(ratio)
                print(f"{shape:22s} {k:2d} {policy_name:10s} {best_c:>14s} {cells[best_c][0]:11.5g} "
                      f"{best_m:>19s} {marg[best_m][0]:10.5g} {ratio:7.3f} {sum(v[1] for v in cells.values()):8.2f}"
                      f" {sum(v[1] for v in marg.values()):11.2f}")
                recorder(f"{shape} k={k} {policy_name} cells/marginals", ratio, "ratio")
    print(f"\nbest over cells / best over marginals: {min(ratios):.3f}–{max(ratios):.3f} over {len(ratios)} cases "
          f"({sum(r < 1 - 1e-9 for r in ratios)} below 1)")


if __name__ == "__main__":
    main()
