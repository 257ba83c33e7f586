"""Anuarbek's Fig. 4: histogram workload under the line policy on the seven 4096-cell datasets.

Run: ``python benchmarks/anuarbek_fig4.py --data-dir ../shared/datasets/dpbench [--trials 5]``.
Prints mean per-query MSE ± 95% confidence interval per dataset, ε and method, whether
DAWA-partition + Transformed beats DAWA, and the effect of ``epsilon_split``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from blowfish_te import answer, datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl

DATASETS = ["ADULT", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"]
K = 4096


def methods(split: float):
    unbounded, line = policies.unbounded(K), policies.line(K)
    return {
        "Laplace (ε/2-DP)": lambda x, e, t: answer(wl.identity(K), x, unbounded, e / 2, "identity", rng=t),
        "DAWA (ε/2-DP)": lambda x, e, t: answer(wl.identity(K), x, unbounded, e / 2, M.DAWA(0.25), rng=t),
        "Transformed+Laplace": lambda x, e, t: answer(wl.identity(K), x, line, e, "identity", rng=t),
        f"DAWA-partition+Transformed ({split})": lambda x, e, t: answer(wl.identity(K), x, line, e, M.PartitionThenTransform("dawa", split), rng=t),
        "Matching+Transformed": lambda x, e, t: answer(wl.identity(K), x, line, e, M.PartitionThenTransform("noisy_pairing"), rng=t),
    }


def measure(run, x, epsilon, trials):
    errors = np.array([np.mean((run(x, epsilon, 1000 * t + 7).answers - x) ** 2) for t in range(trials)])
    return errors.mean(), 1.96 * errors.std(ddof=1) / math.sqrt(trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    args = parser.parse_args()
    names = list(methods(0.5))
    print("| dataset | ε | " + " | ".join(names) + " | DAWA+T < DAWA? |")
    print("|---|---|" + "---|" * (len(names) + 1))
    fails = 0
    split_rows = []
    for name in DATASETS:
        x = datasets.load(name, args.data_dir)
        for eps in args.epsilons:
            results = {m: measure(run, x, eps, args.trials) for m, run in methods(0.5).items()}
            ours, dawa = results["DAWA-partition+Transformed (0.5)"][0], results["DAWA (ε/2-DP)"][0]
            fails += ours >= dawa
            cells = " | ".join(f"{mean:.4g} ± {ci:.2g}" for mean, ci in results.values())
            print(f"| {name} | {eps} | {cells} | {'yes' if ours < dawa else '**no**'} |", flush=True)
            split_rows.append((name, eps, {s: measure(methods(s)[f'DAWA-partition+Transformed ({s})'], x, eps, args.trials)[0]
                                           for s in (0.25, 0.75)} | {0.5: ours}))
    print(f"\nDAWA-partition+Transformed (split 0.5) fails to beat DAWA in {fails} of {len(DATASETS) * len(args.epsilons)} cells.\n")
    print("| dataset | ε | split 0.25 | split 0.5 | split 0.75 | best |")
    print("|---|---|---|---|---|---|")
    for name, eps, row in split_rows:
        best = min(row, key=row.get)
        print(f"| {name} | {eps} | {row[0.25]:.4g} | {row[0.5]:.4g} | {row[0.75]:.4g} | {best} |")


if __name__ == "__main__":
    main()
