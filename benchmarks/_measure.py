"""What every benchmark script shares: its timers, its ``--quick`` and ``--json`` options, and one
record per measurement.

A script keeps printing its own table for a reader; each number worth comparing between commits is
also passed to :class:`Recorder`, which, under ``benchmarks/run.py`` (``--json FILE``), appends
``{"script", "case", "value", "unit"}`` to FILE as one JSON line. Units say which way is worse:
seconds (``s``) and megabytes (``MB``) are noisy measurements, every other unit (an RMSE, a ratio to
a bound, a count) is a deterministic result.
"""

from __future__ import annotations

import atexit
import json
import pathlib
import sys
import time


def add_options(parser) -> None:
    """``--quick`` (small sizes, for comparing commits in minutes) and ``--json FILE``."""
    parser.add_argument("--quick", action="store_true", help="small sizes: minutes for the whole set (benchmarks/run.py)")
    parser.add_argument("--json", type=pathlib.Path, help="append every measurement to this file as a JSON line")


def best_of(repeat: int, fn) -> float:
    """The least wall-clock seconds of ``repeat`` calls (the least disturbed by other work)."""
    times = []
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def timed(fn) -> tuple[float, float]:
    """(wall-clock, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def peak_mb() -> float:
    """This process's own peak resident memory in MB: VmHWM on Linux (``ru_maxrss`` would include
    the peak of a parent that forked it), ``ru_maxrss`` elsewhere."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource

        scale = 2**20 if sys.platform == "darwin" else 2**10  # bytes on macOS, KB elsewhere
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


#: The case every recording script adds as it exits: its process's own peak resident memory.
PEAK_CASE = "process peak memory"
_PEAK_RECORDED: set = set()


class Recorder:
    """``record(case, value, unit)``: one measurement of this script, kept for benchmarks/run.py;
    with a file, the process's own peak memory (:func:`peak_mb`) is recorded as it exits."""

    def __init__(self, json_path: pathlib.Path | None, script: str | None = None):
        self.path = json_path
        self.script = script or pathlib.Path(sys.argv[0]).stem
        if json_path is not None and (json_path, self.script) not in _PEAK_RECORDED:
            _PEAK_RECORDED.add((json_path, self.script))
            atexit.register(lambda: self(PEAK_CASE, peak_mb(), "MB"))

    def __call__(self, case: str, value: float, unit: str) -> float:
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"script": self.script, "case": case, "value": float(value), "unit": unit}) + "\n")
        return value
