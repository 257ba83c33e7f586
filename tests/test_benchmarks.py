"""The benchmark scripts measure what they say they measure."""

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))


@pytest.mark.skipif(not pathlib.Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_bench_io_reports_the_child_s_own_peak_memory_not_the_parent_s(tmp_path):
    import bench_io

    path = tmp_path / "ages.csv"
    path.write_text("age\n" + "\n".join(map(str, range(100))) + "\n")
    ballast = np.ones(400 * 2**20 // 8)  # the parent's peak reaches 400 MB more than the child will use
    result = bench_io._measure("csv", path, "io")
    assert result["n"] == 100 and result["peak_mb"] < 400, result
    del ballast
