"""The first ``auto`` plan in a fresh process with an empty user cache, as a new user meets it.

Standard workloads (their choices ship with the package) under the standard policies, and
workloads nobody stored (prefixes and 2,000 random ranges under ``threshold:64``, DPBench's
rectangles drawn with another seed): the seconds of ``blowfish_te.plan(..., mechanism="auto")``
alone (the modules are loaded before the timer by a plan on 16 cells), then a second process on
the same, now filled, cache. Each line also gives the ratio to ``import numpy, scipy.sparse`` in
a fresh process, measured in the same run:

    python benchmarks/bench_first_plan.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from _measure import Recorder, add_options

SCRIPT = """
import sys, time
import numpy as np
import blowfish_te as bt
from blowfish_te.strategies.standard import standard_workloads
bt.plan(bt.workloads.prefix(16), bt.policies.line(16), 1.0, mechanism="auto")  # modules loaded
name, spec = sys.argv[1], sys.argv[2]
if name in standard_workloads():
    workload = standard_workloads()[name]()
elif name.startswith("dpbench@"):
    side, seed = (int(v) for v in name[len("dpbench@"):].split(":"))
    workload = bt.workloads.dpbench_ranges((side, side), 2000, rng=seed)
else:
    workload = bt.workloads.from_spec(name, 4096)
size = workload.domain if len(workload.domain) > 1 else workload.size
policy = bt.policies.from_spec(spec, size)
start = time.perf_counter()
chosen = bt.plan(workload, policy, 1.0, mechanism="auto")
print(time.perf_counter() - start, chosen._label(chosen.chosen))
"""

STANDARD = [("prefix:4096", "line"), ("all_ranges:4096", "line"), ("prefix:4096", "unbounded"),
             ("all_ranges:4096", "unbounded"), ("dpbench_ranges:2000@128x128", "unbounded"),
             ("dpbench_ranges:2000@128x128", "grid:1")]
UNSTORED = [("prefix", "threshold:64"), ("random_ranges:2000", "threshold:64"), ("dpbench@64:1", "grid:1"),
            ("dpbench@128:1", "unbounded")]
QUICK = [("prefix:1024", "line"), ("dpbench_ranges:2000@64x64", "grid:1"), ("dpbench@64:1", "unbounded")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, scipy.sparse"], check=True)
    anchor = time.perf_counter() - start
    print(f"import numpy, scipy.sparse in a fresh process: {anchor:.2f} s")
    for name, spec in QUICK if args.quick else STANDARD + UNSTORED:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "BLOWFISH_TE_CACHE_DIR": cache, "OPENBLAS_NUM_THREADS": "1"}
            for run in ("first", "again"):
                out = subprocess.run([sys.executable, "-c", SCRIPT, name, spec], capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(f"{name} under {spec}: failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
                    break
                seconds, label = out.stdout.strip().split(" ", 1)
                seconds = float(seconds)
                record(f"{name} under {spec}: {run} auto plan", seconds, "s")
                print(f"{name:<30} {spec:<13} {run:<6} {seconds:7.2f} s = {seconds / anchor:6.1f} x imports  -> {label}")


if __name__ == "__main__":
    main()
