"""Speed of the data-dependent algorithms, and their partitions next to the noiseless twins.

Run: ``python benchmarks/bench_datadependent.py --data-dir ../shared/datasets/dpbench`` (or set
$BLOWFISH_TE_DATA; without data only the synthetic rows run). Best of ``--repeat`` warm runs
(strategies and workload probes are cached per workload object, as in an experiment); the cold
first call is printed too. Targets: DAWA < 0.2 s and AHP < 0.05 s per run at K = 4096.
"""

from __future__ import annotations

import argparse

from _measure import Recorder, add_options, best_of

from blowfish_te import datasets, policies
from blowfish_te import mechanisms as M
from blowfish_te import workloads as wl
from blowfish_te.partitions import dawa_partition, matching_partition, noisy_pairing_partition

ONE_D = ["ADULT", "HEPTH", "INCOME", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS"]


def timed(fn) -> float:
    return best_of(1, fn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    add_options(parser)
    args = parser.parse_args()
    r, record = args.repeat, Recorder(args.json)
    k = 4096
    prefix, histogram = wl.prefix(k), wl.identity(k)
    found = datasets.available(args.data_dir)
    named = {name: datasets.load(name, args.data_dir) for name in ONE_D if found.get(name) == (k,)}
    data = {"synthetic": datasets.synthetic(k, 100_000, rng=0), **named}

    print(f"{'dataset':<11} {'workload':<9} {'DAWA cold':>10} {'DAWA warm':>10} {'AHP warm':>9} {'partition':>10}")
    for name, x in data.items():
        for label, w in (("prefix", prefix), ("histogram", histogram)):
            dawa, ahp = M.DAWA(), M.AHP()
            cold = record(f"{name}, {label}: DAWA cold", timed(lambda: dawa.run(w, x, 0.1, rng=0)), "s")
            warm = record(f"{name}, {label}: DAWA warm", best_of(r, lambda: dawa.run(w, x, 0.1, rng=1)), "s")
            ahp_warm = record(f"{name}, {label}: AHP warm", best_of(r, lambda: ahp.run(w, x, 0.1, rng=1)), "s")
            ratio, penalty = dawa.split(w)
            part = record(f"{name}, {label}: DAWA partition", best_of(
                r, lambda: dawa_partition(x, ratio * 0.1, (1 - ratio) * 0.1, rng=1, penalty=penalty)), "s")
            print(f"{name:<11} {label:<9} {cold * 1e3:>8.0f}ms {warm * 1e3:>8.0f}ms {ahp_warm * 1e3:>7.1f}ms {part * 1e3:>8.1f}ms",
                  flush=True)

    x = data["synthetic"]
    seconds = best_of(r, lambda: noisy_pairing_partition(x, policies.line(k), 0.05, 0.05, rng=1))
    print(f"noisy pairing partition, K = 4096: {record('noisy pairing partition, K = 4096', seconds, 's'):.3f} s")
    seconds = best_of(1, lambda: M.MWEM().run(prefix, x, 0.1, rng=1))
    print(f"MWEM (T = 10), K = 4096: {record('MWEM (T = 10), K = 4096', seconds, 's'):.3f} s")
    big = 2**16
    xb = datasets.synthetic(big, 10**7, rng=0)
    seconds = best_of(1, lambda: dawa_partition(xb, 0.025, 0.075, rng=1))
    print(f"DAWA partition, K = 2^16: {record('DAWA partition, K = 2^16', seconds, 's'):.3f} s")
    xs = datasets.synthetic(256, 10_000, rng=0)
    seconds = best_of(1, lambda: matching_partition(xs, 0.05, 0.05, rng=1))
    print(f"Anuarbek's exact matching partition, K = 256: {record('exact matching partition, K = 256', seconds, 's'):.3f} s")


if __name__ == "__main__":
    main()
