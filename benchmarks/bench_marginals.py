"""Marginals of a 10⁹-cell domain straight from records: plan, count (one DuckDB scan with a
grouping set per marginal) and release all 2-way marginals of the built-in census-like records
(ten attributes, :data:`blowfish_te.datasets.CENSUS_ATTRIBUTES`), never building the grid.

    python benchmarks/bench_marginals.py                 # 10^7 records, unbounded DP and attribute
    python benchmarks/bench_marginals.py --quick         # 10^5 records

The records are written to a Parquet file by one process; each release runs in a fresh process
that reports its wall-clock time per step and its own peak memory (VmHWM on Linux).
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

_WRITE = r"""
import sys
import pyarrow as pa, pyarrow.parquet as pq
from blowfish_te import datasets
pq.write_table(pa.table(datasets.census_records(int(sys.argv[2]), rng=0)), sys.argv[1])
"""

_RELEASE = r"""
import json, sys, time
from _measure import peak_mb
from blowfish_te import datasets, io, plan, policies, workloads
path, policy_name, mechanism = sys.argv[1:4]
domain = datasets.census_domain()
start = time.perf_counter()
workload = workloads.all_marginals(domain.shape, 2)
policy = policies.unbounded(domain.shape) if policy_name == "unbounded" else policies.attribute(domain.shape)
chosen = plan(workload, policy, 1.0, mechanism)
planned = time.perf_counter()
counted = io.marginal_counts(path, domain, chosen.marginals_read())
counting = time.perf_counter()
release = chosen.release(counted.counts, rng=0)
done = time.perf_counter()
print(json.dumps({"plan_s": planned - start, "count_s": counting - planned, "release_s": done - counting,
                  "total_s": done - start, "peak_mb": peak_mb(), "rows": counted.rows, "counted": counted.counted,
                  "chosen": release.mechanism, "rmse": chosen.chosen.expected_mse ** 0.5, "queries": workload.num_queries,
                  "tables": len(chosen.marginals_read())}))
"""


def _child(code: str, *args: str) -> str:
    here = str(pathlib.Path(__file__).resolve().parent)  # the child imports _measure from here
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000, help="records to generate (default 10^7)")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    n = 100_000 if args.quick else args.records
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "census.parquet"
        _child(_WRITE, str(path), str(n))
        print(f"{n} census-like records, 10 attributes, a grid of 10^9 cells; all 2-way marginals, ε = 1")
        print("| policy | mechanism | tables counted | plan s | count s | release s | total s | peak MB | records counted | RMSE per query |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for policy in ("unbounded", "attribute"):
            out = json.loads(_child(_RELEASE, str(path), policy, "auto"))
            assert out["rows"] == out["counted"] == n, out
            print(f"| {policy} | {out['chosen']} | {out['tables']} | {out['plan_s']:.2f} | {out['count_s']:.2f} | "
                  f"{out['release_s']:.2f} | {out['total_s']:.2f} | {out['peak_mb']:.0f} | {out['counted']} | {out['rmse']:.1f} |")
            record(f"{policy} total", out["total_s"], "s")
            record(f"{policy} peak", out["peak_mb"], "MB")
            record(f"{policy} rmse", out["rmse"], "rmse")


if __name__ == "__main__":
    main()
