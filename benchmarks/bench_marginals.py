"""Marginals of a 10⁹- or 10¹²-cell domain straight from records: plan, count (one DuckDB scan
with a grouping set per marginal) and release all 2-way marginals of the built-in census-like
records (ten attributes, :data:`blowfish_te.datasets.CENSUS_ATTRIBUTES`, and with ``--cells 1e12``
two more: state and industry), never building the grid.

    python benchmarks/bench_marginals.py                 # 10^7 records, unbounded DP and attribute
    python benchmarks/bench_marginals.py --cells 1e12    # the same over 10^12 cells
    python benchmarks/bench_marginals.py --quick         # 10^5 records
    python benchmarks/bench_marginals.py --formats csv   # from a CSV file only

The records are written to a Parquet file and a CSV file (``--formats``) by one process; each
release runs in a fresh process that reports its wall-clock time per step and its own peak memory
(VmHWM on Linux). The anchor is DuckDB's own ``GROUP BY GROUPING SETS`` over the same file and the
same marginals (its reader typing the columns), in a fresh process too: the count's time and memory
are reported as ratios to it.
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

from blowfish_te import datasets

#: The attributes of each domain: the census-like ten (10⁹ cells), and two more (10¹²).
DOMAINS = {"1e9": {}, "1e12": {"state": 50, "industry": 20}}

_WRITE = r"""
import json, sys
import pyarrow as pa, pyarrow.csv as pcsv, pyarrow.parquet as pq
from blowfish_te import datasets
attributes = {**datasets.CENSUS_ATTRIBUTES, **json.loads(sys.argv[3])}
table = pa.table(datasets.census_records(int(sys.argv[2]), rng=0, attributes=attributes))
pq.write_table(table, sys.argv[1] + ".parquet")
if sys.argv[4] == "1":
    pcsv.write_csv(table, sys.argv[1] + ".csv")
"""

_RELEASE = r"""
import json, sys, time
from _measure import peak_mb
from blowfish_te import datasets, io, plan, policies, workloads
path, policy_name, mechanism, extra = sys.argv[1:5]
domain = datasets.census_domain({**datasets.CENSUS_ATTRIBUTES, **json.loads(extra)})
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
                  "tables": len(chosen.marginals_read()), "marginals": chosen.marginals_read()}))
"""

_DUCKDB = r"""
import json, sys, time
from _measure import peak_mb
import duckdb
path, columns, marginals = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
sets = ", ".join("(" + ", ".join(columns[a] for a in m) + ")" for m in marginals)
start = time.perf_counter()
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.sql(f"SELECT GROUPING_ID({', '.join(columns)}) AS g, {', '.join(columns)}, count(*) AS n "
               f"FROM {'read_csv' if path.endswith('.csv') else 'read_parquet'}('{path}') GROUP BY GROUPING SETS ({sets})").fetchnumpy()
print(json.dumps({"count_s": time.perf_counter() - start, "peak_mb": peak_mb(), "groups": len(rows["n"])}))
"""


def _child(code: str, *args: str) -> str:
    here = str(pathlib.Path(__file__).resolve().parent)  # the child imports _measure from here
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000, help="records to generate (default 10^7)")
    parser.add_argument("--cells", choices=sorted(DOMAINS), default="1e9", help="the grid's size (default 1e9)")
    parser.add_argument("--formats", default="parquet,csv", help="comma list of record files to count from (default parquet,csv)")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    n = 100_000 if args.quick else args.records
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - {"parquet", "csv"}:
        parser.error(f"--formats must list parquet and/or csv, got {args.formats!r}")
    with tempfile.TemporaryDirectory() as folder:
        stem = pathlib.Path(folder) / "census"
        extra = json.dumps(DOMAINS[args.cells])
        _child(_WRITE, str(stem), str(n), extra, "1" if "csv" in formats else "0")
        columns = json.dumps([*datasets.CENSUS_ATTRIBUTES, *DOMAINS[args.cells]])
        print(f"{n} census-like records, {len(json.loads(columns))} attributes, a grid of {args.cells} cells; "
              "all 2-way marginals, ε = 1; DuckDB's own GROUPING SETS over the same marginals as the anchor")
        print("| file | policy | mechanism | tables counted | plan s | count s | count / DuckDB | release s | total s "
              "| peak MB | peak / DuckDB's | records counted | RMSE per query |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for form in formats:
            path = f"{stem}.{form}"
            # the default's names stay those of earlier runs (Parquet over 10⁹ cells)
            label = ("" if args.cells == "1e9" else f"{args.cells} ") + ("" if form == "parquet" else f"{form} ")
            for policy in ("unbounded", "attribute"):
                out = json.loads(_child(_RELEASE, path, policy, "auto", extra))
                assert out["rows"] == out["counted"] == n, out
                anchor = json.loads(_child(_DUCKDB, path, columns, json.dumps(out["marginals"])))
                print(f"| {form} | {policy} | {out['chosen']} | {out['tables']} | {out['plan_s']:.2f} | {out['count_s']:.2f} | "
                      f"{out['count_s'] / anchor['count_s']:.2f} | {out['release_s']:.2f} | {out['total_s']:.2f} | "
                      f"{out['peak_mb']:.0f} | {out['peak_mb'] / anchor['peak_mb']:.2f} | {out['counted']} | {out['rmse']:.1f} |")
                record(f"{label}{policy} total", out["total_s"], "s")
                record(f"{label}{policy} count over DuckDB", out["count_s"] / anchor["count_s"], "ratio")
                record(f"{label}{policy} peak", out["peak_mb"], "MB")
                record(f"{label}{policy} rmse", out["rmse"], "rmse")


if __name__ == "__main__":
    main()
