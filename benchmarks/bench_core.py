"""Speed of the core: policy construction, the tree transform, W_G and sensitivities.

Run: ``python benchmarks/bench_core.py`` (add ``--repeat N`` for more repetitions), or with the
others through ``benchmarks/run.py``. Prints the best wall-clock time of each step.
"""

from __future__ import annotations

import argparse

import numpy as np
from _measure import Recorder, add_options, best_of

from blowfish_te import policies, sensitivity, transform
from blowfish_te import workloads as wl
from blowfish_te.transform import TreeTransform


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    add_options(parser)
    args = parser.parse_args()
    r, record = args.repeat, Recorder(args.json)

    def row(name, seconds, target=""):
        record(name, seconds, "s")
        print(f"{name:<58} {seconds * 1000:>10.1f} ms   {target}", flush=True)

    k = 10**6
    row("threshold(10**6, 16): build", best_of(r, lambda: policies.threshold(k, 16)), "< 1 s")
    row("threshold(10**6, 16): build + list 16M edges", best_of(r, lambda: policies.threshold(k, 16).edges), "< 1 s")
    row("grid((1024, 1024)): build", best_of(r, lambda: policies.grid((1024, 1024))), "< 1 s")
    row("grid((1024, 1024)): build + list 2M edges", best_of(r, lambda: policies.grid((1024, 1024)).edges), "< 1 s")

    x = np.random.default_rng(0).integers(0, 100, k)
    line = policies.line(k)
    row("line(10**6): transform setup (BFS + triangular solves)", best_of(r, lambda: TreeTransform(line)))
    tree = transform(line)
    t_cumsum = best_of(20, lambda: np.cumsum(x))
    t_xg = best_of(20, lambda: tree.data(x))
    row("numpy.cumsum of 10**6 counts", t_cumsum)
    row("line(10**6): x_G (validation included)", t_xg, f"{t_xg / t_cumsum:.1f}x cumsum (target <= 5x)")

    rng = np.random.default_rng(1)
    parent = (rng.random(k - 1) * np.arange(1, k)).astype(np.int64)  # random recursive tree
    labels = rng.permutation(k)
    random_tree = policies.from_edges(k, np.stack([labels[1:], labels[parent]], axis=1))
    t_setup = best_of(r, lambda: TreeTransform(random_tree))
    rtree = transform(random_tree)
    t_data = best_of(r, lambda: rtree.data(x))
    row("random tree, 10**6 cells: transform setup", t_setup)
    row("random tree, 10**6 cells: x_G", t_data)
    row("random tree, 10**6 cells: setup + x_G", t_setup + t_data, "< 1 s")
    row("random tree, 10**6 cells: reconstruct x from x_G", best_of(r, lambda: rtree.reconstruct(rtree.data(x), rtree.totals(x))))

    ranges = wl.random_ranges(k, 2000, rng=2)
    row("W_G, 2000 random ranges, line(10**6): sparse form", best_of(r, lambda: tree.workload(ranges).tosparse()), "< 0.5 s")
    w_g = tree.workload(ranges)
    row("W_G, 2000 random ranges, line(10**6): one W_G @ x_G", best_of(r, lambda: w_g @ tree.data(x)))
    row("W_G, 2000 random ranges, line(10**6): ||W_G||_F^2", best_of(r, lambda: tree.workload(ranges).frobenius_sq()))

    kk = 4096
    for w in [wl.identity(kk), wl.prefix(kk), wl.all_ranges(kk), wl.random_ranges(kk, 2000, rng=3)]:
        row(f"sensitivity({w.name}, complete(4096))", best_of(1, lambda: sensitivity(w, policies.complete(kk))))
    dense = wl.from_matrix(wl.prefix(kk).tosparse())
    row("sensitivity(matrix prefix(4096), complete(4096))", best_of(1, lambda: sensitivity(dense, policies.complete(kk))))
    row("sensitivity(random_ranges(10**6, 2000), threshold(10**6, 16))",
        best_of(1, lambda: sensitivity(ranges, policies.threshold(k, 16))))


if __name__ == "__main__":
    main()
