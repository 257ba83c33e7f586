"""Speed of tree embeddings: building trees and measuring the exact stretch on 10^6-cell policies.

Run: ``python benchmarks/bench_trees.py``, or with the others through ``benchmarks/run.py``.
Target: stretch under 2 s each.
"""

from __future__ import annotations

import argparse
import time

from _measure import Recorder, add_options

from blowfish_te import policies, trees


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    record = Recorder(parser.parse_args().json)

    def timed(label: str, fn, target: str = ""):
        start = time.perf_counter()
        out = fn()
        seconds = record(label, time.perf_counter() - start, "s")
        print(f"{label:<62} {seconds:>7.2f} s   {target}", flush=True)
        return out

    def stretch(label: str, s) -> None:
        record(f"{label}: maximum stretch", s.maximum, "hops")
        record(f"{label}: mean stretch", s.mean, "hops")
        print(f"    maximum {s.maximum}, mean {s.mean:.3f}")

    threshold = policies.threshold(10**6, 16)
    hub = timed("hub(10**6, 16): build", lambda: trees.hub(10**6, 16))
    stretch("threshold(10**6, 16) in the hub tree",
            timed("stretch of threshold(10**6, 16) [16M edges] in the hub tree", lambda: trees.stretch(threshold, hub), "< 2 s"))
    line = trees.line(10**6)
    stretch("threshold(10**6, 16) in the line tree",
            timed("stretch of threshold(10**6, 16) in the line tree", lambda: trees.stretch(threshold, line), "< 2 s"))

    grid = policies.grid((1024, 1024))
    for name, build in [("comb", lambda: trees.comb((1024, 1024))), ("snake", lambda: trees.snake((1024, 1024))),
                        ("bfs", lambda: trees.bfs(grid))]:
        tree = timed(f"{name} tree of grid((1024, 1024)): build", build)
        stretch(f"grid((1024, 1024)) in the {name} tree",
                timed(f"stretch of grid((1024, 1024)) [2M edges] in the {name} tree", lambda: trees.stretch(grid, tree), "< 2 s"))


if __name__ == "__main__":
    main()
