"""Run the benchmark scripts as one set, record their measurements with the commit, and compare
two records.

    python benchmarks/run.py --quick --out bench-new.json                 # every script, small sizes
    python benchmarks/run.py bench_core bench_trees --out core.json       # some scripts, full sizes
    python benchmarks/run.py --quick --repeats 3 --out new.json --compare old.json   # and compare
    python benchmarks/run.py --compare old.json new.json                  # compare two records

Each script runs ``--repeats`` times, each time in a fresh process (its own peak memory, no shared
caches) with ``--json``; the record holds, per case, the median of the runs and their spread
(least and largest), per script the machine's load average before each run and the process's own
peak resident memory (its own VmHWM, recorded as it exits: never the runner's), and the commit
(and whether the tree was modified), the machine and the versions. A comparison lists every case
found in both records with the ratio of the medians new / old and flags a change only when it is
beyond the tolerance of its unit — 25 % for seconds and megabytes, 1 % for deterministic results
(errors, ratios to bounds, counts) — and, for the noisy units of records with repeats, only when
every new run is beyond every old one by that tolerance too (the new least over the old largest,
or the new largest under the old least): a first release that takes 0.4 s in one fresh process
and 1.3 s in the next must not be read as a regression, nor a change of less than 10 ms; two
records of one commit compare clean. Scripts that need the DPBench data get
``--data-dir``; without it they use their built-in or synthetic data.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from _measure import PEAK_CASE

HERE = pathlib.Path(__file__).resolve().parent
#: Every script, with its arguments under ``--quick`` (small sizes) and whether it reads --data-dir.
SCRIPTS: dict[str, tuple[list[str], bool]] = {
    "bench_core": (["--repeat", "1"], False),
    "bench_trees": ([], False),
    "bench_secure": (["--draws", "100000"], False),
    "bench_mechanisms": (["--skip-optimized"], False),
    "bench_first_release": ([], False),
    "bench_first_plan": (["--quick"], False),
    "bench_cold_path": (["--repeats", "3"], False),
    "bench_io": (["--records", "1000000"], False),
    "bench_marginals": (["--records", "1000000"], False),
    "bench_large_marginals": ([], False),
    "marginals_report": ([], False),
    "marginal_candidates": (["--quick"], False),
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
#: Timings that differ by less than this are never flagged: a 4096-cell release of 0.6 ms took
#: 1.0 ms in every one of three fresh processes a minute later, with nothing changed.
SECONDS_FLOOR = 0.01


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
        scripts: dict = SCRIPTS, repeats: int = 1) -> dict:
    """The record of running ``names`` (scripts of ``folder``) ``repeats`` times each: the
    environment, every case's median and spread, and per script its status, seconds, load
    averages and peak memory."""
    record = {**_environment(), "quick": quick, "repeats": repeats, "scripts": {}, "measurements": []}
    for name in names:
        runs, loads, peaks, status, seconds = [], [], [], "ok", 0.0
        for _ in range(repeats):
            loads.append(round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None)
            found, status, took = _run_once(name, quick, data_dir, timeout, folder, scripts)
            seconds += took
            peaks += [m["value"] for m in found if m["case"] == PEAK_CASE]
            if status != "ok":
                break
            runs.append(found)
        cases = _summarised(runs)
        record["scripts"][name] = {"status": status, "seconds": round(seconds, 1), "measurements": len(cases),
                                   "load": loads, "peak_mb": max(peaks, default=None)}
        record["measurements"] += cases
        print(f"{name:<22} {status:<10.60} {seconds:7.1f} s  {len(cases)} measurements", file=sys.stderr, flush=True)
    return record


def _run_once(name: str, quick: bool, data_dir: str | None, timeout: float, folder: pathlib.Path,
              scripts: dict) -> tuple[list[dict], str, float]:
    """(measurements, status, seconds) of one run of script ``name`` in a fresh process."""
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
    return found, status, seconds


def _summarised(runs: list[list[dict]]) -> list[dict]:
    """One measurement per (case, unit) over the runs: the median value, and the least and the
    largest as its spread, in the order of the first run."""
    values: dict[tuple, list[float]] = {}
    first: dict[tuple, dict] = {}
    for found in runs:
        for m in found:
            key = (m["script"], m["case"], m["unit"])
            first.setdefault(key, m)
            values.setdefault(key, []).append(float(m["value"]))
    return [{**first[key], "value": statistics.median(v), "spread": [min(v), max(v)], "runs": len(v)}
            for key, v in values.items()]


def compare(old: dict, new: dict, tolerance_noisy: float = 0.25, tolerance_exact: float = 0.01) -> tuple[str, int]:
    """A markdown table of every case in both records (new / old, their medians), and the number
    of cases worse beyond the tolerance of their unit and, for noisy units measured with repeats,
    outside both records' spread (larger is worse for every unit recorded)."""
    before = {(m["script"], m["case"], m["unit"]): m for m in old["measurements"]}
    lines = [f"old {old['commit'][:10]}{' (modified)' if old.get('modified') else ''} → new {new['commit'][:10]}"
             f"{' (modified)' if new.get('modified') else ''}", "",
             "| script | case | unit | old | new | new / old | |", "|---|---|---|---|---|---|---|"]
    worse = 0
    for m in new["measurements"]:
        key = (m["script"], m["case"], m["unit"])
        if key not in before:
            continue
        o = before[key]
        a, b = o["value"], m["value"]
        ratio = b / a if a else (1.0 if b == a else float("inf"))
        noisy = m["unit"] in NOISY_UNITS
        tolerance = tolerance_noisy if noisy else tolerance_exact
        up, down = ratio > 1 + tolerance, ratio < 1 - tolerance
        if m["unit"] == "s" and abs(b - a) < SECONDS_FLOOR:  # below the noise of one fresh process to the next
            up = down = False
        if noisy and "spread" in m and "spread" in o and min(m.get("runs", 1), o.get("runs", 1)) > 1:
            up = up and m["spread"][0] > o["spread"][1] * (1 + tolerance)  # every new run beyond every old one
            down = down and m["spread"][1] < o["spread"][0] * (1 - tolerance)
        flag = "worse" if up else ("better" if down else "")
        worse += flag == "worse"
        spread = f" ({m['spread'][0]:.3g}–{m['spread'][1]:.3g})" if m.get("runs", 1) > 1 else ""
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {a:.4g} | {b:.4g}{spread} | {ratio:.3f} | {flag} |")
    gone = sorted(set(before) - {(m["script"], m["case"], m["unit"]) for m in new["measurements"]})
    if gone:
        lines += ["", f"{len(gone)} case(s) of the old record are not in the new one: " + "; ".join(f"{s}: {c}" for s, c, _ in gone[:10])]
    loads = [x for s in new.get("scripts", {}).values() for x in s.get("load") or [] if x is not None]
    if loads:
        lines += ["", f"load average before the new runs: {min(loads):g}–{max(loads):g} on {new.get('cpus')} CPUs"]
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
    parser.add_argument("--repeats", type=int, default=1, help="runs of each script, each in a fresh process (median and spread)")
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
        if args.repeats < 1:
            parser.error(f"--repeats must be at least 1, got {args.repeats}")
        new = run(args.scripts or list(SCRIPTS), args.quick, args.data_dir, args.timeout, repeats=args.repeats)
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
