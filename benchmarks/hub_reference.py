"""Reference values of the hub tree (Haney, Machanavajjhala, Ding, PVLDB 2015) on threshold θ policies:
identity at ε/3 (stretch 3), ε = 1, 3000 random ranges.

Run: ``python benchmarks/hub_reference.py [--trials 200]``. Prints the analytic expected per-query
MSE and a seeded Monte-Carlo mean with its 95% confidence interval for k ∈ {1024, 4096}.
"""

from __future__ import annotations

import argparse

import numpy as np
from _measure import Recorder, add_options

from blowfish_te import answer, plan, policies
from blowfish_te import workloads as wl

REFERENCE = {4: 72, 16: 180, 64: 600}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    add_options(parser)
    args = parser.parse_args()
    trials, record = args.trials, Recorder(args.json)
    print(f"| theta | k | reference | analytic | Monte-Carlo mean ± 95% CI ({trials} trials) | auto choice |")
    print("|---|---|---|---|---|---|")
    for theta, ref in REFERENCE.items():
        for k in (1024, 4096):
            w, policy = wl.random_ranges(k, 3000, rng=k), policies.threshold(k, theta)
            x = np.random.default_rng(1).integers(0, 20, k)
            truth = w @ x
            analytic = plan(w, policy, 1.0, tree="hub").chosen.expected_mse
            mse = np.array([np.mean((answer(w, x, policy, 1.0, rng=t, tree="hub").answers - truth) ** 2) for t in range(trials)])
            half = 1.96 * mse.std(ddof=1) / np.sqrt(trials)
            auto = plan(w, policy, 1.0).chosen.label
            record(f"threshold({k}, {theta}), hub tree: analytic per-query MSE", analytic, "mse")
            print(f"| {theta} | {k} | {ref} | {analytic:.1f} | {mse.mean():.1f} ± {half:.1f} | {auto} |", flush=True)


if __name__ == "__main__":
    main()
