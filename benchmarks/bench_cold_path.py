"""The cold path and the large path of a release, against what they cannot beat.

Cold: a first Identity release of the identity workload at K = 4096 under ``line`` in a fresh
process, imports included, against ``python -c "import numpy, scipy.sparse"`` in the same run
(medians of ``--repeats`` processes each), and the call itself (the first ``answer`` after the
imports: planning, transform, noise). Then the same release with the default mechanism, ``auto``,
which plans every candidate route under ``line`` (an empty strategy cache).

Large (``--large``): Identity under ``line`` and HB under ``unbounded`` on 2^24 cells with 10,000
random ranges, each in a fresh process: the release's time against adding Laplace noise to an
array of that size, and its peak memory in arrays of that size (the process's peak resident set,
and the peak's growth during the release).

Every module is measured from compiled bytecode, as ``pip install`` leaves a package: one
unmeasured run of each command first writes the bytecode of everything it imports (numpy and scipy
too) under a temporary ``PYTHONPYCACHEPREFIX``, so nothing is written into the checkout measured.
``--large`` records each release's seconds, its Laplace-add anchor and its peak memory.

    python benchmarks/bench_cold_path.py [--repeats 7] [--large]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _measure import Recorder, add_options

FIRST = """
import sys, time
start = time.perf_counter()
import numpy as np
import blowfish_te as bt
mechanism = None if sys.argv[1] == "default" else sys.argv[1]
x = np.random.default_rng(0).integers(0, 50, 4096)
workload, policy, answer = bt.workloads.identity(4096), bt.policies.line(4096), bt.answer  # imports done
call = time.perf_counter()
answer(workload, x, policy, 1.0, mechanism, rng=0)
end = time.perf_counter()
print(end - call)
"""

LARGE = """
import resource, sys, time
import numpy as np
import blowfish_te as bt
mechanism, spec = sys.argv[1], sys.argv[2]
k = 2**24
array_gb = k * 8 / 2**30
x = np.random.default_rng(0).integers(0, 50, k)
workload = bt.workloads.random_ranges(k, 10_000, rng=0)
policy = bt.policies.from_spec(spec, k)
gen = np.random.default_rng(1)
start = time.perf_counter()
noisy = x + gen.laplace(0.0, 1.0, k)
add = time.perf_counter() - start
del noisy
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
start = time.perf_counter()
release = bt.answer(workload, x, policy, 1.0, mechanism, rng=0)
took = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"{mechanism:<9} {spec:<10} release {took:6.2f} s = {took / add:5.1f} x Laplace-add ({add * 1000:.0f} ms); "
      f"peak {peak / array_gb:5.1f} arrays ({peak:.2f} GB), grew {max(peak - before, 0) / array_gb:4.1f} arrays; route {release.route}")
print(took, add, peak)
"""


def _seconds(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--large", action="store_true", help="also 2^24 cells, 10,000 ranges (a minute, a few GB)")
    add_options(parser)
    args = parser.parse_args()
    record = Recorder(args.json)
    with tempfile.TemporaryDirectory() as prefix, tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": prefix}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        anchor = ["-c", "import numpy, scipy.sparse"]
        for mechanism, label in (("identity", "Identity release"), ("default", "release with the default mechanism (auto)")):
            release = ["-c", FIRST, mechanism]
            _seconds(anchor, env), _seconds(release, env)  # unmeasured: the bytecode of every module imported
            base, first, calls = [], [], []
            for run in range(args.repeats):  # interleaved, so that both see the same machine load
                base.append(_seconds(anchor, env))
                # every auto plan from an empty strategy cache, as a new user's first
                run_env = {**env, "BLOWFISH_TE_CACHE_DIR": os.path.join(cache, f"{mechanism}{run}")}
                start = time.perf_counter()
                out = subprocess.run([sys.executable, *release], check=True, capture_output=True, text=True, env=run_env)
                first.append(time.perf_counter() - start)
                calls.append(float(out.stdout))
            b, f, c = statistics.median(base), statistics.median(first), statistics.median(calls)
            if mechanism == "identity":
                record("import numpy, scipy.sparse in a fresh process", b, "s")
            record(f"first {label} at K = 4096 in a fresh process, imports included", f, "s")
            record(f"first {label} at K = 4096: the call", c, "s")
            print(f"import numpy, scipy.sparse: {b * 1000:.0f} ms; first {label} at K = 4096 under line in a fresh "
                  f"process: {f * 1000:.0f} ms = {f / b:.2f} x; the call itself {c * 1000:.1f} ms")
        if args.large:
            for mechanism, spec in (("identity", "line"), ("hb", "unbounded")):
                out = subprocess.run([sys.executable, "-c", LARGE, mechanism, spec], capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(f"{mechanism} {spec}: failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}", flush=True)
                    continue
                text, numbers = out.stdout.strip().rsplit("\n", 1)
                took, add, peak = map(float, numbers.split())
                case = f"2^24 cells, 10,000 ranges, {mechanism} under {spec}"
                record(f"{case}: release", took, "s")
                record(f"{case}: adding Laplace noise to the histogram", add, "s")
                record(f"{case}: peak memory", peak * 1024, "MB")
                print(text, flush=True)


if __name__ == "__main__":
    main()
