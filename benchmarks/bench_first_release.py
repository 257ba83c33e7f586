"""First (cold, fresh process) and warm release times of the linear mechanisms.

Each configuration runs in its own Python process, so "first" includes planning the route (the
analytic errors of every candidate) and building strategies, but not the imports: the package
loads its modules on first use, so a release of the same mechanism and policy on a tiny domain
runs before the timer (timed apart, as "modules loaded"), and planning for that domain is not
shared with the measured one:

    python benchmarks/bench_first_release.py [--k 4096] [--shape 128] [--large]

``--large`` adds one release each of identity under ``line`` and HB under ``unbounded`` on 2^24
cells with 10,000 random ranges, with the process's peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

from _measure import Recorder, add_options

SCRIPT = """
import json, sys, time
import numpy as np
from _measure import peak_mb
import blowfish_te as bt
mechanism, spec, shape = sys.argv[1], sys.argv[2], tuple(int(s) for s in sys.argv[3].split("x"))
large = shape[0] > 2**20
x = np.random.default_rng(0).integers(0, 50, shape).ravel()
if large:
    w = bt.workloads.random_ranges(shape[0], 10_000, rng=0)
else:
    w = bt.workloads.prefix(shape) if len(shape) == 1 else bt.workloads.dpbench_ranges(shape, 2000, rng=0)
policy = bt.policies.from_spec(spec, shape)
tiny = (8,) * len(shape)
start = time.perf_counter()
tiny_w = bt.workloads.prefix(tiny) if len(tiny) == 1 else bt.workloads.dpbench_ranges(tiny, 20, rng=0)
bt.answer(tiny_w, np.ones(tiny, dtype=np.int64).ravel(), bt.policies.from_spec(spec, tiny), 1.0, mechanism, rng=0)
loading = time.perf_counter() - start
start = time.perf_counter()
release = bt.answer(w, x, policy, 1.0, mechanism, rng=0)
first = time.perf_counter() - start
if large:
    print(json.dumps({"first": first, "loading": loading, "peak_mb": peak_mb(), "route": release.route}))
    sys.exit()
start = time.perf_counter()
for seed in range(20):
    bt.answer(w, x, policy, 1.0, mechanism, rng=seed)
warm = (time.perf_counter() - start) / 20
print(json.dumps({"first": first, "loading": loading, "warm": warm, "route": release.route}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--shape", type=int, default=128, help="side of the 2-D grid")
    parser.add_argument("--large", action="store_true", help="also 2^24 cells, 10,000 ranges (minutes, several GB)")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    runs = [(m, p, str(args.k)) for p in ("unbounded", "line") for m in ("identity", "hb", "h2", "privelet", "greedyh")]
    runs += [(m, p, f"{args.shape}x{args.shape}") for p in ("unbounded", "grid:1") for m in ("hb", "quadtree", "privelet")]
    if args.large:
        runs += [("identity", "line", str(2**24)), ("hb", "unbounded", str(2**24))]
    here = str(pathlib.Path(__file__).resolve().parent)
    for mechanism, spec, shape in runs:
        out = subprocess.run([sys.executable, "-c", SCRIPT, mechanism, spec, shape], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])})
        if out.returncode:
            print(f"{mechanism} {spec} {shape}: failed: {out.stderr.strip().splitlines()[-1]}", flush=True)
            continue
        r = json.loads(out.stdout)
        case = f"{mechanism} under {spec} on {shape}"
        record(f"{case}: modules loaded (a release on 8 cells a side)", r["loading"], "s")
        if "warm" in r:
            record(f"{case}: first release", r["first"], "s")
            record(f"{case}: warm release", r["warm"], "s")
            print(f"{mechanism:<10} {spec:<10} {shape:>8}  first {r['first']:6.2f} s  warm {r['warm'] * 1000:7.2f} ms  "
                  f"modules {r['loading']:5.2f} s  "
                  f"route {r['route']}", flush=True)
        else:
            record(f"{case}: first release", r["first"], "s")
            record(f"{case}: peak memory", r["peak_mb"], "MB")
            print(f"{mechanism:<10} {spec:<10} {shape:>8}  first {r['first']:6.2f} s  peak {r['peak_mb'] / 1024:5.2f} GB  "
                  f"route {r['route']}", flush=True)


if __name__ == "__main__":
    main()
