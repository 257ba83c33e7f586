"""Progress of long work: lines every few seconds outside a terminal, redrawn in place on one."""

import io as std_io
import json
import time

import pytest
from click.testing import CliRunner

from blowfish_te import io, progress
from blowfish_te.cli import main
from blowfish_te.io import engines
from blowfish_te.progress import Progress

pytestmark = pytest.mark.core


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(std_io.StringIO):
    def isatty(self):
        return True


def test_outside_a_terminal_a_line_every_interval_with_rate_and_time_left():
    clock, stream = Clock(), std_io.StringIO()
    with Progress("suite", total=12, unit="cells", stream=stream, clock=clock) as bar:
        for done in range(1, 13):
            clock.now += 1
            bar.update(done)
    lines = stream.getvalue().splitlines()
    assert lines == ["suite: 5 of 12 cells, 1 cells/s, ~7 s left, 5 s elapsed",
                     "suite: 10 of 12 cells, 1 cells/s, ~2 s left, 10 s elapsed",
                     "suite: 12 of 12 cells, 1 cells/s, ~0 s left, 12 s elapsed"]


def test_quick_or_quiet_work_writes_nothing():
    clock, stream = Clock(), std_io.StringIO()
    with Progress("quick", total=3, stream=stream, clock=clock) as bar:
        for done in range(3):
            clock.now += 1
            bar.update(done + 1)
    with Progress("quiet", total=100, stream=stream, clock=clock, enabled=False) as bar:
        for done in range(100):
            clock.now += 1
            bar.update(done + 1)
    assert stream.getvalue() == ""


def test_a_terminal_is_redrawn_in_place_and_fractions_show_as_percent():
    clock, stream = Clock(), Terminal()
    with Progress("counting", total=1.0, unit="%", stream=stream, clock=clock) as bar:
        for done in (0.25, 0.5):
            clock.now += 30
            bar.update(done)
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and "\n" not in text[:-1]
    assert "counting: 50%, ~1 min 00 s left, 1 min 00 s elapsed" in text


@pytest.mark.slow
def test_duckdb_progress_is_polled_while_the_query_runs():
    class Connection:
        def query_progress(self):
            return 40.0

    seen = []
    assert engines._reporting(Connection(), lambda: time.sleep(1.3) or "rows", seen.append) == "rows"
    assert len(seen) >= 2 and set(seen) == {0.4}
    assert engines._reporting(Connection(), lambda: "rows", None) == "rows"


@pytest.mark.slow
def test_the_real_duckdb_reports_progress_while_it_counts_a_large_csv(tmp_path, monkeypatch):
    """DuckDB measures a query's progress only with its progress bar enabled: a count polled every
    20 ms must report fractions on the way, and a caller's connection keeps its own settings."""
    duckdb = pytest.importorskip("duckdb")
    path, rows = tmp_path / "ages.csv", 10_000_000
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT (i * 7919) % 100 AS age FROM range({rows}) t(i)) TO '{path}' (HEADER)")
    monkeypatch.setattr(engines, "POLL_SECONDS", 0.02)
    if not hasattr(duckdb.DuckDBPyConnection, "query_progress"):
        pytest.skip(f"DuckDB {duckdb.__version__} cannot report a query's progress (the fallback is tested below)")
    seen = []
    started = time.monotonic()
    result = io.histogram(str(path), io.IntegerRange("age", 0, 99), progress=seen.append)
    took = time.monotonic() - started
    assert result.counts.sum() == rows and set(result.counts.tolist()) == {rows // 100}
    assert seen and all(0 < f <= 1 for f in seen) and any(f < 1 for f in seen), (took, seen)
    with duckdb.connect() as con:  # a caller's connection: measured during the count, then as it was
        con.execute("SET enable_progress_bar = false")
        assert engines._reporting(con, lambda: con.sql(f"SELECT count(*) FROM read_csv('{path}')").fetchall()[0][0],
                                  lambda f: None) == rows
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0] is False


@pytest.mark.slow
def test_a_duckdb_without_query_progress_counts_without_progress_and_says_so_once(monkeypatch, capsys):
    class Old:  # DuckDB 1.1.0: no query_progress
        def execute(self, sql):
            raise AssertionError("settings are not touched when progress cannot be read")

    class Broken:
        def execute(self, sql):
            return self

        def fetchall(self):
            return [[True]]

        def query_progress(self):
            raise RuntimeError("connection closed")

    engines._say_no_progress_once.cache_clear()
    seen = []
    assert engines._reporting(Old(), lambda: "rows", seen.append) == "rows"
    assert engines._reporting(Old(), lambda: "rows", seen.append) == "rows"
    assert capsys.readouterr().err.count("cannot report a query's progress") == 1 and seen == []
    hooked = []
    monkeypatch.setattr(engines.threading, "excepthook", hooked.append)
    assert engines._reporting(Broken(), lambda: time.sleep(0.8) or "rows", seen.append) == "rows"
    assert hooked == [] and seen == []  # a failing poll stops quietly: no thread traceback


def test_run_and_bench_report_progress_outside_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    records = tmp_path / "ages.csv"
    records.write_text("age\n" + "3\n" * 1000)
    counted = io.histogram

    def slow_histogram(*args, progress=None, **kwargs):
        progress(0.5)
        return counted(*args, **kwargs)

    monkeypatch.setattr(io, "histogram", slow_histogram)
    args = ["run", str(records), "--column", "age", "--lower", "0", "--upper", "9", "--epsilon", "1", "--seed", "0"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    size = records.stat().st_size / 1e6
    assert f"counting records: {size / 2:,.3g} of {size:,.3g} MB" in result.stderr
    assert json.loads(result.stdout)["answers"]
    assert "counting records" not in CliRunner().invoke(main, [*args, "--quiet"]).stderr
    suite = tmp_path / "mini.toml"
    suite.write_text('name = "mini"\ndescription = "d"\nepsilons = [1.0]\npolicies = ["line"]\ntrials = 2\n'
                     '[data]\ndatasets = ["synthetic-1d"]\ndomain = 16\n[workload]\nkind = "prefix"\n[[mechanisms]]\nname = "identity"\n')
    bench = CliRunner().invoke(main, ["bench", str(suite), "--out", str(tmp_path / "res"), "--no-plot"])
    assert bench.exit_code == 0, bench.output
    assert "mini: 2 of 2 cells" in bench.stderr
    quiet = CliRunner().invoke(main, ["bench", str(suite), "--out", str(tmp_path / "res2"), "--no-plot", "--quiet"])
    assert "cells" not in quiet.stderr


@pytest.mark.parametrize("seconds, text", [(5, "5 s"), (75, "1 min 15 s"), (7322, "2 h 02 min")])
def test_durations_read_naturally(seconds, text):
    assert progress._duration(seconds) == text
