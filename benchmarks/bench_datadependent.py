"""Speed of the data-dependent algorithms (data-dependent issue, item 5).

Run: ``python benchmarks/bench_datadependent.py``. Best of three runs on a synthetic histogram.
"""

from __future__ import annotations

from bench_core import best_of  # sibling script: run from benchmarks/ or as python benchmarks/...

from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.partitions import dawa_partition, matching_partition, noisy_pairing_partition


def main() -> None:
    k = 4096
    x = datasets.synthetic(k, 100_000, rng=0)
    w = wl.prefix(k)
    rows = [
        ("DAWA run (partition + GreedyH), K = 4096", best_of(3, lambda: M.DAWA().run(w, x, 0.1, rng=1)), "< 1 s"),
        ("DAWA partition only, K = 4096", best_of(3, lambda: dawa_partition(x, 0.025, 0.075, rng=1)), ""),
        ("noisy pairing partition, K = 4096", best_of(3, lambda: noisy_pairing_partition(x, policies.line(k), 0.05, 0.05, rng=1)), "< 0.5 s"),
        ("MWEM (T = 10), K = 4096", best_of(3, lambda: M.MWEM().run(w, x, 0.1, rng=1)), "< 2 s"),
        ("AHP, K = 4096", best_of(3, lambda: M.AHP().run(w, x, 0.1, rng=1)), "< 2 s"),
    ]
    big = 10**6
    xb = datasets.synthetic(big, 10**7, rng=0)
    line = policies.line(big)
    rows.append(("noisy pairing partition, K = 10^6", best_of(1, lambda: noisy_pairing_partition(xb, line, 0.05, 0.05, rng=1)), "< 10 s"))
    for small in (128, 256):
        xs = datasets.synthetic(small, 10_000, rng=0)
        rows.append((f"seed's exact matching partition, K = {small}", best_of(1, lambda: matching_partition(xs, 0.05, 0.05, rng=1)), ""))
    for label, seconds, target in rows:
        print(f"{label:<46} {seconds:8.3f} s   {target}")


if __name__ == "__main__":
    main()
