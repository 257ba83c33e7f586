"""Speed of tree embeddings: building trees and measuring the exact stretch on 10^6-cell policies.

Run: ``python benchmarks/bench_trees.py``. Target: stretch under 2 s each.
"""

from __future__ import annotations

import time

from blowfish_te import policies, trees


def timed(label: str, fn, target: str = ""):
    start = time.perf_counter()
    out = fn()
    print(f"{label:<62} {time.perf_counter() - start:>7.2f} s   {target}", flush=True)
    return out


def main() -> None:
    threshold = policies.threshold(10**6, 16)
    hub = timed("hub(10**6, 16): build", lambda: trees.hub(10**6, 16))
    s = timed("stretch of threshold(10**6, 16) [16M edges] in the hub tree", lambda: trees.stretch(threshold, hub), "< 2 s")
    print(f"    maximum {s.maximum}, mean {s.mean:.3f}, histogram {s.histogram.tolist()}")
    line = trees.line(10**6)
    s = timed("stretch of threshold(10**6, 16) in the line tree", lambda: trees.stretch(threshold, line), "< 2 s")
    print(f"    maximum {s.maximum}, mean {s.mean:.3f}")

    grid = policies.grid((1024, 1024))
    for name, build in [("comb", lambda: trees.comb((1024, 1024))), ("snake", lambda: trees.snake((1024, 1024))),
                        ("bfs", lambda: trees.bfs(grid))]:
        tree = timed(f"{name} tree of grid((1024, 1024)): build", build)
        s = timed(f"stretch of grid((1024, 1024)) [2M edges] in the {name} tree", lambda: trees.stretch(grid, tree), "< 2 s")
        print(f"    maximum {s.maximum}, mean {s.mean:.3f}")


if __name__ == "__main__":
    main()
