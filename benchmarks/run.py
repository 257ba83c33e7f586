"""Run the benchmark scripts as one set, record their measurements with the commit, and compare
two records.

    python benchmarks/run.py --quick --out bench-new.json                 # every script, small sizes
    python benchmarks/run.py bench_core bench_trees --out core.json       # some scripts, full sizes
    python benchmarks/run.py --quick --out new.json --compare old.json    # and compare with a record
    python benchmarks/run.py --compare old.json new.json                  # compare two records

Each script runs in a fresh process (its own peak memory, no shared caches) with ``--json``; the
record holds every measurement, the commit (and whether the tree was modified), the machine and
the versions. A comparison lists every case found in both records with the ratio new / old and
flags changes beyond the tolerance: 25 % for seconds and megabytes (noisy on a shared machine),
1 % for deterministic results (errors, ratios to bounds, counts). Scripts that need the DPBench
data get ``--data-dir``; without it they use their built-in or synthetic data.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
#: Every script, with its arguments under ``--quick`` (small sizes) and whether it reads --data-dir.
SCRIPTS: dict[str, tuple[list[str], bool]] = {
    "bench_core": (["--repeat", "1"], False),
    "bench_trees": ([], False),
    "bench_secure": (["--draws", "100000"], False),
    "bench_mechanisms": (["--skip-optimized"], False),
    "bench_first_release": ([], False),
    "bench_cold_path": (["--repeats", "3"], False),
    "bench_io": (["--records", "1000000"], False),
    "bench_marginals": (["--records", "1000000"], False),
    "marginals_report": ([], False),
    "bench_datadependent": (["--repeat", "1"], True),
    "bench_spatial": (["--shapes", "128", "--mechanisms", "hb", "quadtree", "ugrid"], True),
    "accuracy_spatial": (["--side", "64", "--seeds", "2", "--mechanisms", "hb", "agrid"], True),
    "datadependent_report": (["--quick"], True),
    "train_selection": (["--quick"], True),
    "cyclic_routes_2d": (["--sizes", "64"], False),
    "hub_reference": (["--trials", "20"], False),
    "laplace_gap": (["--cells", "4", "8", "--policies", "32:4", "--restarts", "1"], False),
    "audit_sweep": ([], False),
    "strategy_report": (["--only", "1d", "--cells", "256", "--trials", "2", "--weighted-steps", "2"], True),
}
NOISY_UNITS = {"s", "MB"}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def _environment() -> dict:
    import numpy
    import scipy

    return {"commit": _git("rev-parse", "HEAD") or "unknown", "modified": bool(_git("status", "--porcelain", "--", "blowfish_te")),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version(), "numpy": numpy.__version__,
            "scipy": scipy.__version__}


def run(names: list[str], quick: bool, data_dir: str | None, timeout: float, folder: pathlib.Path = HERE,
        scripts: dict = SCRIPTS) -> dict:
    """The record of running ``names`` (scripts of ``folder``): the environment, every
    measurement, and per script its status and seconds."""
    record = {**_environment(), "quick": quick, "scripts": {}, "measurements": []}
    for name in names:
        quick_args, reads_data = scripts[name]
        with tempfile.TemporaryDirectory() as scratch:
            out = pathlib.Path(scratch) / "measurements.jsonl"
            command = [sys.executable, str(folder / f"{name}.py"), "--json", str(out)] + (["--quick", *quick_args] if quick else [])
            if reads_data and data_dir:
                command += ["--data-dir", data_dir]
            start = time.perf_counter()
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=scratch,
                                      env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])})
                status = "ok" if done.returncode == 0 else f"failed: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}"
            except subprocess.TimeoutExpired:
                status = f"timed out after {timeout:g} s"
            seconds = time.perf_counter() - start
            found = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        record["scripts"][name] = {"status": status, "seconds": round(seconds, 1), "measurements": len(found)}
        record["measurements"] += found
        print(f"{name:<22} {status:<10.60} {seconds:7.1f} s  {len(found)} measurements", file=sys.stderr, flush=True)
    return record


def compare(old: dict, new: dict, tolerance_noisy: float = 0.25, tolerance_exact: float = 0.01) -> tuple[str, int]:
    """A markdown table of every case in both records (new / old), and the number of cases worse
    beyond the tolerance of their unit (larger is worse for every unit recorded)."""
    before = {(m["script"], m["case"], m["unit"]): m["value"] for m in old["measurements"]}
    lines = [f"old {old['commit'][:10]}{' (modified)' if old.get('modified') else ''} → new {new['commit'][:10]}"
             f"{' (modified)' if new.get('modified') else ''}", "",
             "| script | case | unit | old | new | new / old | |", "|---|---|---|---|---|---|---|"]
    worse = 0
    for m in new["measurements"]:
        key = (m["script"], m["case"], m["unit"])
        if key not in before:
            continue
        a, b = before[key], m["value"]
        ratio = b / a if a else (1.0 if b == a else float("inf"))
        tolerance = tolerance_noisy if m["unit"] in NOISY_UNITS else tolerance_exact
        flag = "worse" if ratio > 1 + tolerance else ("better" if ratio < 1 - tolerance else "")
        worse += flag == "worse"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {a:.4g} | {b:.4g} | {ratio:.3f} | {flag} |")
    gone = sorted(set(before) - {(m["script"], m["case"], m["unit"]) for m in new["measurements"]})
    if gone:
        lines += ["", f"{len(gone)} case(s) of the old record are not in the new one: " + "; ".join(f"{s}: {c}" for s, c, _ in gone[:10])]
    return "\n".join(lines), worse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", help=f"scripts to run (default: all): {', '.join(SCRIPTS)}")
    parser.add_argument("--quick", action="store_true", help="small sizes: the whole set in minutes")
    parser.add_argument("--data-dir", help="DPBench folder for the scripts that read it")
    parser.add_argument("--out", type=pathlib.Path, help="write the record (JSON) here")
    parser.add_argument("--compare", nargs="+", type=pathlib.Path, metavar="RECORD",
                        help="compare with this record (or, given two records and no scripts to run, compare them)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per script")
    args = parser.parse_args(argv)
    unknown = [name for name in args.scripts if name not in SCRIPTS]
    if unknown:
        parser.error(f"unknown script(s) {', '.join(unknown)}; scripts: {', '.join(SCRIPTS)}")
    if args.compare and len(args.compare) > 2:
        parser.error("--compare takes one record (to compare with this run) or two (old and new)")
    if args.compare and len(args.compare) == 2:
        if args.scripts or args.out:
            parser.error("--compare with two records compares them only: leave out the scripts and --out")
        old, new = (json.loads(path.read_text()) for path in args.compare)
    else:
        if args.out is not None and not args.out.parent.is_dir():
            parser.error(f"--out {args.out}: its folder does not exist")
        new = run(args.scripts or list(SCRIPTS), args.quick, args.data_dir, args.timeout)
        if args.out is not None:
            args.out.write_text(json.dumps(new, indent=1) + "\n")
        failed = {name: s["status"] for name, s in new["scripts"].items() if s["status"] != "ok"}
        for name, status in failed.items():
            print(f"{name}: {status}", file=sys.stderr)
        if not args.compare:
            return 1 if failed else 0
        old = json.loads(args.compare[0].read_text())
    table, worse = compare(old, new)
    print(table)
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
