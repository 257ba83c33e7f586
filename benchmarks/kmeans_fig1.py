"""The shape of He, Machanavajjhala, Ding (SIGMOD 2014) Fig. 1: the k-means objective of private
SuLQ k-means over the non-private one, against ε, for Laplace under DP (the complete graph),
He et al.'s Blowfish calibration (2θ on raw sums: not private) and the corrected one (centred
sums, sensitivity from the policy's edges, cross-boundary moves included); k = 4, 10 iterations.

    python benchmarks/kmeans_fig1.py --data-dir ../shared/datasets/dpbench --trials 20

Datasets: a skin-like synthetic sample (2 450 points, 1% of the skin data's size, in four
elongated clusters on a 64 × 64 grid) and TWITTER (DPBench, summed down to 64 × 64) when the data
directory has it. Policies G_{L1,θ} = ``grid(shape, θ)``. Prints the median ratio per cell.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from blowfish_te import datasets, kmeans, policies


def skin_like(shape=(64, 64), n=2450, rng=0) -> np.ndarray:
    gen = np.random.default_rng(rng)
    x = np.zeros(shape, dtype=np.int64)
    centres = np.array([[0.2, 0.3], [0.7, 0.2], [0.35, 0.75], [0.8, 0.7]]) * (np.array(shape) - 1)
    spread = np.array([[3.0, 8.0], [6.0, 3.0], [8.0, 4.0], [3.0, 3.0]])
    parts = gen.multinomial(n, [0.4, 0.25, 0.2, 0.15])
    for c, s, m in zip(centres, spread, parts):
        pts = np.clip(np.rint(gen.normal(c, s, size=(m, 2))), 0, np.array(shape) - 1).astype(int)
        np.add.at(x, (pts[:, 0], pts[:, 1]), 1)
    return x


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--epsilons", default="0.1,0.2,0.5,1.0")
    ap.add_argument("--thetas", default="2,8")
    args = ap.parse_args(argv)
    shape = (64, 64)
    data = {"skin-like": skin_like(shape)}
    if args.data_dir:
        try:
            data["TWITTER"] = datasets.coarsen(datasets.load("TWITTER", args.data_dir), shape)
        except (OSError, ValueError) as exc:
            print(f"TWITTER skipped: {exc}")
    epsilons = [float(e) for e in args.epsilons.split(",")]
    thetas = [int(t) for t in args.thetas.split(",")]
    print("| dataset | variant | " + " | ".join(f"ε={e:g}" for e in epsilons) + " |")
    print("|---|---|" + "---|" * len(epsilons))
    start = time.perf_counter()
    for name, x in data.items():
        variants = [("Laplace (DP)", policies.complete(shape), "exact")]
        for theta in thetas:
            variants += [(f"paper θ={theta} (not private)", policies.grid(shape, theta), "paper"),
                         (f"corrected θ={theta}", policies.grid(shape, theta), "exact")]
        for label, policy, how in variants:
            cells = []
            for eps in epsilons:
                ratios = []
                for t in range(args.trials):
                    init = np.random.default_rng(1000 + t).uniform(0, 1, size=(4, 2)) * (np.array(shape) - 1)
                    base = kmeans.lloyd(x, shape, centres=init).objective
                    run = kmeans.blowfish_kmeans(x, policy, eps, rng=t, sensitivity=how, centres=init)
                    ratios.append(run.objective / base)
                cells.append(f"{np.median(ratios):.2f}")
            print(f"| {name} | {label} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.trials} trials per cell, same starting centres for private and non-private runs; "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
