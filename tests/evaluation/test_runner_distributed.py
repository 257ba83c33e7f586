"""Suites on a Dask distributed cluster (``run_suite(scheduler=...)``, ``bench --scheduler``): the
same table as one process, rows recorded as chunks finish, and resumable across the two."""

import sys

import pytest
from click.testing import CliRunner

from blowfish_te.cli import main
from blowfish_te.evaluation import cells, parse_suite, read_rows, run_suite

try:
    import distributed
except ImportError:  # the optional extra
    distributed = None

needs_distributed = pytest.mark.skipif(
    distributed is None, reason="the distributed package is not installed (pip install 'blowfish_te[distributed]')"
)


def _suite(**changes):
    """Three data samples (three chunks), a forest and a cyclic policy, a data-dependent mechanism
    at ε/2 through a spanning tree: every part of a cell's seeding and routing."""
    raw = {
        "name": "toy_dask", "description": "a toy suite for the cluster", "master_seed": 11, "trials": 2,
        "epsilons": [0.5, 1.0], "policies": ["unbounded", "line", "threshold:3"],
        "data": {"datasets": ["synthetic-1d"], "domain": 32, "scales": [400], "data_seeds": 3},
        "workload": {"kind": "random_ranges", "queries": 30, "seed": 2},
        "mechanisms": ["identity", {"name": "hb", "policies": ["unbounded", "line"]},
                       {"name": "dawa", "tree": "hub", "epsilon_factor": 0.5}],
        **changes,
    }
    return parse_suite(raw)


def _table(path) -> list[dict]:
    """Every column of results.csv but the runtime."""
    return [{k: v for k, v in row.items() if k != "runtime_s"} for row in read_rows(path / "results.csv")]


@pytest.fixture(scope="module")
def cluster():
    if distributed is None:
        pytest.skip("the distributed package is not installed (pip install 'blowfish_te[distributed]')")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as connected:
        yield connected


class _Stop(Exception):
    """Stands for an interruption (Ctrl-C, a lost allocation) after some rows were written."""


def _stop_after(rows: int):
    def progress(done, total):
        if done >= rows:
            raise _Stop

    return progress


@pytest.mark.slow
@needs_distributed
def test_a_cluster_gives_the_table_of_one_process(tmp_path, cluster, client):
    suite = _suite()
    local = run_suite(suite, tmp_path / "local")
    assert len(local) == len(cells(suite)) == 3 * (3 + 2 + 3) * 2 * 2 and all(r["status"] == "ok" for r in local)
    seen = []
    run_suite(suite, tmp_path / "client", scheduler=client, progress=lambda done, total: seen.append((done, total)))
    run_suite(suite, tmp_path / "address", scheduler=cluster.scheduler_address)
    assert _table(tmp_path / "client") == _table(tmp_path / "address") == _table(tmp_path / "local")
    # rows were recorded chunk by chunk (one chunk per data sample here), not all at the end
    assert [done for done, _ in seen] == [32, 64, 96] and {total for _, total in seen} == {96}
    assert client.submit(sum, [1, 2]).result() == 3  # a client we pass in stays open: it is ours to close


@pytest.mark.slow
@needs_distributed
def test_a_run_resumes_across_one_process_and_the_cluster(tmp_path, client):
    suite = _suite()
    run_suite(suite, tmp_path / "full")
    out = tmp_path / "mixed"
    with pytest.raises(_Stop):  # interrupted after the first chunk, in this process
        run_suite(suite, out, progress=_stop_after(1))
    assert len(read_rows(out / "results.csv")) == 32
    seen = []
    run_suite(suite, out, scheduler=client, progress=lambda done, total: seen.append(done))
    assert seen[0] > 32 and seen[-1] == len(cells(suite))
    assert _table(out) == _table(tmp_path / "full")
    # and the other way: interrupted on the cluster, finished in this process
    back = tmp_path / "back"
    with pytest.raises(_Stop):
        run_suite(suite, back, scheduler=client, progress=_stop_after(1))
    assert 0 < len(read_rows(back / "results.csv")) < len(cells(suite))
    run_suite(suite, back)
    assert _table(back) == _table(tmp_path / "full")


@needs_distributed
def test_bench_runs_on_a_scheduler(tmp_path, cluster):
    suite = tmp_path / "mini.toml"
    suite.write_text(
        'name = "mini"\ndescription = "a mini suite"\nepsilons = [0.5, 1.0]\npolicies = ["line", "threshold:2"]\n'
        'trials = 2\n[data]\ndatasets = ["synthetic-1d"]\ndomain = 16\n[workload]\nkind = "prefix"\n'
        '[[mechanisms]]\nname = "identity"\n[[mechanisms]]\nname = "dawa"\ntree = "hub"\n'
    )
    result = CliRunner().invoke(main, ["bench", str(suite), "--out", str(tmp_path / "dask"), "--no-plot",
                                       "--scheduler", cluster.scheduler_address])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(main, ["bench", str(suite), "--out", str(tmp_path / "here"), "--no-plot"]).exit_code == 0
    assert _table(tmp_path / "dask") == _table(tmp_path / "here") and len(_table(tmp_path / "here")) == 16


@needs_distributed
def test_a_scheduler_must_be_an_address_or_a_client(tmp_path):
    with pytest.raises(TypeError, match="scheduler must be an address"):
        run_suite(_suite(), tmp_path, scheduler=8786)


def test_a_scheduler_excludes_a_process_pool(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        run_suite(_suite(), tmp_path, jobs=2, scheduler="tcp://127.0.0.1:8786")
    result = CliRunner().invoke(main, ["bench", "dpbench_1d_prefix", "--tiny", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 2 and "--scheduler and --jobs > 1 are mutually exclusive" in result.output


@pytest.mark.slow
def test_without_distributed_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'blowfish_te\[distributed\]'"):
        run_suite(_suite(), tmp_path / "out", scheduler="tcp://127.0.0.1:8786")
    assert not (tmp_path / "out").exists()  # refused before any earlier results were touched
    result = CliRunner().invoke(main, ["bench", "dpbench_1d_prefix", "--tiny", "--out", str(tmp_path / "cli"),
                                       "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.splitlines()[-1].endswith("needs the distributed package: pip install 'blowfish_te[distributed]'")
