"""Cold time and peak memory of one 2-D release per mechanism (a fresh process each, so the time
includes planning and building strategies, not the import): 2000 DPBench random rectangles, ε = 0.1.

    python benchmarks/bench_spatial.py [--shapes 128 256] [--policies unbounded grid:1]
                                       [--data-dir ../shared/datasets/dpbench] [--dataset SF-CABS-E]

The data is a DPBench 2-D histogram summed down to each shape when ``--data-dir`` holds it, else
a synthetic one. Record models (ugrid, agrid) run under unbounded DP only; data-dependent mechanisms
on a cyclic policy run on its BFS spanning tree.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

from _measure import Recorder, add_options

MECHANISMS = ("identity", "hb", "quadtree", "privelet", "greedyh", "ugrid", "agrid", "privtree", "dawa")
RECORD_MODELS = ("ugrid", "agrid")

SCRIPT = """
import json, pathlib, sys, time
from _measure import peak_mb
import numpy as np
import blowfish_te as bt
from blowfish_te import datasets
mechanism, spec, side, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
shape = (side, side)
if path.exists():
    x = datasets.coarsen(np.load(path), shape).ravel()
else:
    x = datasets.synthetic_2d(shape, 1_000_000, rng=0).ravel()
w = bt.workloads.dpbench_ranges(shape, 2000, rng=0)
policy = bt.policies.from_spec(spec, shape)
linear = isinstance(bt.mechanisms.get_mechanism(mechanism), bt.mechanisms.LinearMechanism)
tree = None if linear or policy.is_forest else "bfs"  # data-dependent on a cyclic policy: a spanning tree
start = time.perf_counter()
release = bt.answer(w, x, policy, 0.1, mechanism, rng=0, tree=tree)
seconds = time.perf_counter() - start
rmse = float(np.sqrt(np.mean((release.answers - w.matvec(x)) ** 2)))
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb(), "route": release.route, "rmse": rmse}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--policies", nargs="+", default=["unbounded"])
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS))
    parser.add_argument("--data-dir", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets" / "dpbench")
    parser.add_argument("--dataset", default="SF-CABS-E")
    add_options(parser)
    args = parser.parse_args()
    record, here = Recorder(args.json), str(pathlib.Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}  # the child imports _measure
    path = args.data_dir / "2D" / f"{args.dataset}.npy"
    print(f"data: {path if path.exists() else 'synthetic (no ' + str(path) + ')'}")
    for side in args.shapes:
        for spec in args.policies:
            for mechanism in args.mechanisms:
                if mechanism in RECORD_MODELS and spec != "unbounded":
                    continue
                out = subprocess.run([sys.executable, "-c", SCRIPT, mechanism, spec, str(side), str(path)], check=True,
                                     capture_output=True, text=True, env=env)
                r = json.loads(out.stdout)
                case = f"{mechanism} under {spec} on {side}x{side}"
                record(f"{case}: first release", r["seconds"], "s")
                record(f"{case}: peak memory", r["peak_mb"], "MB")
                print(f"{mechanism:<9} {spec:<10} {side:>4}²  first {r['seconds']:6.2f} s  peak {r['peak_mb']:6.0f} MB  "
                      f"route {r['route']:<9} one-run RMSE {r['rmse']:8.1f}", flush=True)


if __name__ == "__main__":
    main()
