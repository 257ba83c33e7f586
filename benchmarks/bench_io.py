"""Records to a histogram: time and peak memory of ``io.histogram`` (DuckDB) against DuckDB's own
GROUP BY on the same file, for CSV and Parquet, and an end-to-end release under ``line``.

    python benchmarks/bench_io.py --records 10000000            # CSV and Parquet, 100 bins
    python benchmarks/bench_io.py --records 100000000 --parquet-only --release

Every measurement runs in a fresh process and reports its own peak memory (VmHWM on Linux; the
inherited ru_maxrss would report the parent's peak).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
from _measure import Recorder, add_options

_CHILD = r"""
import json, sys, time
import numpy as np
from _measure import peak_mb
kind, path, what = sys.argv[1:4]
start = time.perf_counter()
if what == "io":
    from blowfish_te import io
    x = io.histogram(path, io.IntegerRange("age", 0, 99)).counts
elif what == "release":
    from blowfish_te import answer, io, policies, workloads
    x = io.histogram(path, io.IntegerRange("age", 0, 99)).counts
    answer(workloads.prefix(100), x, policies.line(100), 1.0, rng=0)
else:
    import duckdb
    reader = "read_csv" if kind == "csv" else "read_parquet"
    rows = duckdb.sql(f"SELECT age, count(*) FROM {reader}('{path}') GROUP BY age").fetchall()
    x = np.zeros(100, dtype=np.int64)
    for age, n in rows:
        x[age] = n
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb(), "n": int(x.sum())}))
"""


def _measure(kind: str, path: pathlib.Path, what: str) -> dict:
    here = str(pathlib.Path(__file__).resolve().parent)  # the child imports _measure from here
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path), what], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])})
    return json.loads(out.stdout)


def _write(folder: pathlib.Path, n: int, parquet_only: bool) -> dict[str, pathlib.Path]:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    gen = np.random.default_rng(0)
    files = {"parquet": folder / "ages.parquet"}
    if not parquet_only:
        files["csv"] = folder / "ages.csv"
    writer = pq.ParquetWriter(files["parquet"], pa.schema([("age", pa.int64())]))
    csv_out = open(files["csv"], "wb") if "csv" in files else None
    block = 10_000_000
    for start in range(0, n, block):
        table = pa.table({"age": gen.integers(0, 100, min(block, n - start))})
        writer.write_table(table)
        if csv_out:
            pcsv.write_csv(table, csv_out, pcsv.WriteOptions(include_header=start == 0))
    writer.close()
    if csv_out:
        csv_out.close()
    return files


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temporary folder)")
    ap.add_argument("--parquet-only", action="store_true")
    ap.add_argument("--release", action="store_true", help="also time histogram + prefix release under line(100)")
    add_options(ap)
    args = ap.parse_args(argv)
    record = Recorder(args.json)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = time.perf_counter()
        files = _write(pathlib.Path(tmp), args.records, args.parquet_only)
        sizes = {k: p.stat().st_size / 2**20 for k, p in files.items()}
        print(f"{args.records:,} records written in {time.perf_counter() - start:.1f} s: "
              + ", ".join(f"{k} {v:.0f} MB" for k, v in sizes.items()))
        print("| file | what | seconds | peak MB |\n|---|---|---|---|")
        for kind, path in files.items():
            for what in ("io", "duckdb") + (("release",) if args.release else ()):
                r = _measure(kind, path, what)
                assert r["n"] == args.records, r
                label = {"io": "io.histogram", "duckdb": "DuckDB GROUP BY", "release": "histogram + release (line)"}[what]
                record(f"{label}, {kind}, {args.records} records", r["seconds"], "s")
                record(f"{label}, {kind}, {args.records} records: peak memory", r["peak_mb"], "MB")
                print(f"| {kind} | {label} | {r['seconds']:.2f} | {r['peak_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
