"""Speed of the secure samplers: exact discrete Laplace (Canonne, Kamath, Steinke 2020), our vectorised builtin sampler and OpenDP.

Run: ``python benchmarks/bench_secure.py`` (``--draws N``, default 10**6). Prints the wall-clock
and CPU time of N draws of DLap(10/3) per backend (and of DLap(1/4) and DLap(10^4) with the
builtin one), of the lattice release of N real values, and, for comparison, of numpy's
floating-point Laplace (the fast, unhardened path). The samplers are single-threaded, so on a
busy machine the CPU time is the fairer figure.
"""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
from _measure import Recorder, add_options, timed

from blowfish_te.secure import discrete_laplace, lattice_laplace, opendp_available


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10**6)
    add_options(parser)
    args = parser.parse_args()
    n, record = args.draws, Recorder(args.json)
    values = np.random.default_rng(0).normal(0.0, 100.0, n)
    backends = ["builtin", "opendp"] if opendp_available() else ["builtin"]
    rows = [("numpy Generator.laplace (floating point, not hardened)", timed(lambda: np.random.default_rng(0).laplace(0.0, 3.0, n)))]
    for scale in (Fraction(1, 4), Fraction(10**4)):
        rows.append((f"discrete_laplace({scale}), builtin", timed(lambda: discrete_laplace(scale, n, "builtin"))))
    for backend in backends:
        rows.append((f"discrete_laplace(10/3), {backend}", timed(lambda: discrete_laplace(Fraction(10, 3), n, backend))))
        rows.append((f"lattice_laplace(scale 0.7, Δ 2), {backend}", timed(lambda: lattice_laplace(values, 0.7, 2.0, backend))))
    print(f"{n} draws")
    for name, (wall, cpu) in rows:
        record(f"{name}: CPU per draw", cpu / n, "s")
        print(f"{name:<58} wall {wall:>7.2f} s   CPU {cpu:>7.2f} s   {cpu / n * 1e6:>6.2f} µs/draw (CPU)")


if __name__ == "__main__":
    main()
