"""1- and 2-way marginals of product domains of 10¹⁰–10¹² cells, never building the grid: the
workload, the plan (``auto`` under unbounded DP, an empty strategy cache) and the release from
the marginal tables the plan reads (10⁵ records spread at random over each table). The shapes are
those HDMM (McKenna, Miklau, Hay, Machanavajjhala, VLDB 2018) was run on side by side: its
marginals template optimised them in 1.7, 0.06 and 8.7 s with peaks of 72, 65 and 111 MB (numpy
1.26, scipy 1.10, one BLAS thread; times without imports; 85.6, 76.5 and 124.7 MB on numpy 2.4 and
scipy 1.17), and its mechanism cannot release them (it needs the histogram).

    python benchmarks/bench_large_marginals.py            # 10^10 and 10^12 cells
    python benchmarks/bench_large_marginals.py --quick    # 10^6 cells

Each shape runs in a fresh process that reports its wall-clock time per step and its own peak
memory (VmHWM on Linux), beside the same process's peak after ``import numpy, scipy.sparse``
and after importing the library and the modules a plan loads (the marginal optimiser needs no
``scipy.optimize``): the plan's time is then its own, as HDMM's times are without imports.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from _measure import Recorder, add_options

#: name → shape: 10¹⁰ cells in ten attributes of ten values, 10¹² in six of 100 and in twelve of ten.
SHAPES = {"10x10": (10,) * 10, "100x6": (100,) * 6, "10x12": (10,) * 12}
QUICK_SHAPES = {"10x6": (10,) * 6}

_CHILD = r"""
import itertools, json, sys, time
from _measure import peak_mb
import numpy, scipy.sparse
anchor_mb = peak_mb()
start = time.perf_counter()
from blowfish_te import plan, policies, workloads
from blowfish_te.workloads import MarginalCounts
import blowfish_te.mechanisms.marginal, blowfish_te.strategies.store  # what a plan loads: its time is the imports'
imported = time.perf_counter()
imports_mb = peak_mb()
shape = tuple(json.loads(sys.argv[1]))
d = len(shape)
workload = workloads.marginals(shape, [(a,) for a in range(d)] + list(itertools.combinations(range(d), 2)))
built = time.perf_counter()
chosen = plan(workload, policies.unbounded(shape), 1.0, "auto")
planned = time.perf_counter()
rng = numpy.random.default_rng(0)
tables = {}
for subset in chosen.marginals_read():  # counts of 10^5 records spread at random over each table's cells
    sizes = tuple(shape[a] for a in subset)
    cells = int(numpy.prod(sizes))
    tables[tuple(subset)] = rng.multinomial(100_000, numpy.full(cells, 1.0 / cells)).reshape(sizes)
counts = MarginalCounts(shape, tables)
counted = time.perf_counter()
release = chosen.release(counts, rng=0)
done = time.perf_counter()
assert release.answers.shape == (workload.num_queries,) and numpy.isfinite(release.answers).all()
print(json.dumps({"import_s": imported - start, "workload_s": built - imported, "plan_s": planned - built,
                  "release_s": done - counted, "total_s": (done - start) - (counted - planned), "peak_mb": peak_mb(),
                  "anchor_mb": anchor_mb, "imports_mb": imports_mb, "chosen": release.mechanism, "queries": workload.num_queries,
                  "tables": len(tables), "rmse": chosen.chosen.expected_mse ** 0.5}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    here = str(pathlib.Path(__file__).resolve().parent)  # the child imports _measure from here
    print("all 1- and 2-way marginals, unbounded DP, ε = 1, auto; every step in a fresh process with an empty strategy cache")
    print("| shape | cells | queries | chosen | tables read | import s | workload s | plan s | release s | total s "
          "| peak MB | numpy+scipy MB | imports MB | RMSE per query |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, shape in (QUICK_SHAPES if args.quick else SHAPES).items():
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "BLOWFISH_TE_CACHE_DIR": cache,
                   "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
            done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(shape)], capture_output=True, text=True,
                                  check=True, env=env)
        out = json.loads(done.stdout)
        cells = 1
        for k in shape:
            cells *= k
        print(f"| {name} | {cells:.0e} | {out['queries']} | {out['chosen']} | {out['tables']} | {out['import_s']:.2f} | "
              f"{out['workload_s']:.2f} | {out['plan_s']:.2f} | {out['release_s']:.2f} | {out['total_s']:.2f} | "
              f"{out['peak_mb']:.0f} | {out['anchor_mb']:.0f} | {out['imports_mb']:.0f} | {out['rmse']:.1f} |")
        record(f"{name} total", out["total_s"], "s")
        record(f"{name} peak", out["peak_mb"], "MB")
        record(f"{name} rmse", out["rmse"], "rmse")


if __name__ == "__main__":
    main()
