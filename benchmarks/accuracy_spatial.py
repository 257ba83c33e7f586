"""Per-dataset accuracy of the 2-D mechanisms on the DPBench 2-D histograms (Hay et al. 2016):
per-query RMSE over 2000 DPBench random rectangles at ε = 0.1 under unbounded DP, averaged over seeds.

    python benchmarks/accuracy_spatial.py [--data-dir ../shared/datasets/dpbench] [--side 128]
                                          [--seeds 10] [--scale N] [--mechanisms hb agrid ...]

Without ``--scale`` each dataset keeps its own record count (summed down to side × side); with it,
N records are sampled from the dataset's distribution (DPBench's scale), one sample per seed.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
from _measure import Recorder, add_options

import blowfish_te as bt
from blowfish_te import datasets

DATASETS = ("ADULT-2D", "BJ-CABS-E", "BJ-CABS-S", "GOWALLA", "SF-CABS-E", "SF-CABS-S", "TWITTER")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets" / "dpbench")
    parser.add_argument("--side", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--scale", type=int)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--mechanisms", nargs="+", default=["identity", "hb", "greedyh", "ugrid", "agrid", "privtree", "dawa"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    shape = (args.side, args.side)
    workload = bt.workloads.dpbench_ranges(shape, 2000, rng=0)
    policy = bt.policies.unbounded(shape)
    print("| dataset | N | " + " | ".join(args.mechanisms) + " |")
    print("|---" * (len(args.mechanisms) + 2) + "|")
    for name in args.datasets:
        raw = datasets.load(name, args.data_dir)
        samples = [datasets.coarsen(raw, shape).ravel()] * args.seeds if args.scale is None else [
            datasets.dpbench_sample(raw, args.scale, shape, rng=seed).ravel() for seed in range(args.seeds)]
        truths = [workload.matvec(x) for x in samples]
        cells = []
        for mechanism in args.mechanisms:
            start, errors = time.perf_counter(), []
            for seed, (x, truth) in enumerate(zip(samples, truths)):
                answers = bt.answer(workload, x, policy, args.epsilon, mechanism, rng=seed).answers
                errors.append(np.mean((answers - truth) ** 2))
            rmse = record(f"{name}, {args.side}², {mechanism}: per-query RMSE", np.sqrt(np.mean(errors)), "rmse")
            took = record(f"{name}, {args.side}², {mechanism}: seconds per release", (time.perf_counter() - start) / args.seeds, "s")
            cells.append(f"{rmse:.0f} ({took:.2f} s)")
        print(f"| {name} | {int(samples[0].sum())} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
