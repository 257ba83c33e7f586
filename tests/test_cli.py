import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import blowfish_te.cli as cli
from blowfish_te._csv import escape_cell, escape_row, unescape_cell
from blowfish_te.cli import main

pytestmark = pytest.mark.core


def _rows(output: str) -> dict:
    """Table rows of the demo: (policy, mechanism) -> (expected RMSE, measured RMSE)."""
    rows = {}
    for line in output.splitlines():
        m = re.match(r"(\S+)\s+(identity|laplace)\s+(transform|exact)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            rows[(m.group(1), m.group(2))] = (float(m.group(4)), float(m.group(5)))
    return rows


def test_demo_prints_blowfish_next_to_dp():
    result = CliRunner().invoke(main, ["demo", "--k", "50", "--queries", "300", "--show", "3", "--seed", "2"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert set(rows) == {("line(50)", "identity"), ("line(50)", "laplace"), ("complete(50)", "identity"), ("unbounded(50)", "identity")}
    blowfish, bounded = rows[("line(50)", "identity")], rows[("complete(50)", "identity")]
    assert blowfish[0] < bounded[0] / 3  # the line policy buys accuracy
    for expected, measured in rows.values():
        assert 0.3 * expected < measured < 3 * expected
    assert len(re.findall(r"^\[\d+, \d+\]", result.output, flags=re.M)) == 3


def test_demo_is_reproducible():
    args = ["demo", "--k", "30", "--queries", "50", "--seed", "7"]
    assert CliRunner().invoke(main, args).output == CliRunner().invoke(main, args).output


def test_bad_arguments_get_one_line_errors():
    for args, word in [(["demo", "--epsilon", "0"], "epsilon"), (["demo", "--k", "1"], "--k"), (["demo", "--epsilon", "x"], "epsilon")]:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2
        assert word in result.output


def test_module_entry_point_runs():
    out = subprocess.run(
        [sys.executable, "-m", "blowfish_te.cli", "demo", "--k", "20", "--queries", "20", "--show", "0"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "line(20)" in out


@pytest.mark.slow
def test_ctrl_c_exits_130_at_any_stage(tmp_path):
    """The console script interrupted while native code blocks (reading a FIFO nobody writes,
    as an engine counting records would): status 130 at once, no traceback."""
    import os
    import signal
    import time

    fifo = tmp_path / "counts.npy"
    os.mkfifo(fifo)
    script = "import sys; from blowfish_te.console import entry; sys.argv = ['blowfish-te'] + sys.argv[1:]; entry()"
    process = subprocess.Popen([sys.executable, "-c", script, "run", str(fifo), "--policy", "line", "--epsilon", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(2.0)  # loading, planning or blocked in the read: every stage must answer
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert b"interrupted" in err and b"Traceback" not in err


def test_the_console_script_reports_library_errors_in_one_line(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("1\n\n2\n")
    script = "import sys; from blowfish_te.console import entry; sys.argv = ['blowfish-te'] + sys.argv[1:]; entry()"
    done = subprocess.run([sys.executable, "-c", script, "run", str(path), "--policy", "line", "--epsilon", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"Error: {path}: line 2 is blank; a histogram CSV holds one count per field, "
                                                "one row of cells per line"]


@pytest.mark.slow
def test_strategies_lists_the_shipped_set_and_builds_into_a_folder(tmp_path):
    listed = CliRunner().invoke(main, ["strategies", "--list"])
    assert listed.exit_code == 0, listed.output
    lines = dict(line.split(None, 1) for line in listed.output.splitlines())
    assert lines["prefix:4096"].strip() == "shipped" and lines["dpbench_ranges:2000@128x128"].strip() == "shipped"
    assert lines["prefix:4096/auto/line"].strip() == "shipped"  # auto's choice under each standard policy
    assert lines["dpbench_ranges:2000@128x128/auto/grid:1"].strip() == "shipped"
    out = tmp_path / "made"
    built = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:256"])
    assert built.exit_code == 0, built.output
    assert [line.split()[:2] for line in built.output.splitlines()] == [
        ["prefix:256", "built"], ["prefix:256/auto/unbounded", "built"], ["prefix:256/auto/line", "built"]]
    files = sorted(out.iterdir())  # the strategy, auto's choices and what they planned (strategies, tuned settings)
    assert {f.suffix for f in files} == {".npz", ".json"} and len([f for f in files if f.suffix == ".json"]) >= 2
    again = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:256"])
    assert [line.split()[1] for line in again.output.splitlines()] == ["stored"] * 3 and sorted(out.iterdir()) == files
    bad = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:7"])
    assert bad.exit_code == 1 and bad.output.startswith("Error:") and "allowed: identity:256, prefix:256" in bad.output


def test_csv_cells_a_spreadsheet_would_run_are_escaped_and_numbers_kept():
    for text in ("=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "'quoted", "\t3"):
        assert escape_cell(text) == "'" + text and unescape_cell(escape_cell(text)) == text
    for value in ("-3.5", "+2", "-1e-3", "-inf", "plain", "", "a=b", -3.5, 7, None, True):
        assert escape_cell(value) == value and unescape_cell(escape_cell(value)) == value
    assert escape_row([0, "=1+1", -2.0, "-2"]) == [0, "'=1+1", -2.0, "-2"]
    assert escape_row({"label": "@x", "answer": -1.5}) == {"label": "'@x", "answer": -1.5}


def test_run_writes_csv_with_formulas_escaped_and_negative_answers_as_numbers(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", np.zeros(6, dtype=np.int64))
    args = ["run", str(tmp_path / "x.npy"), "--epsilon", "1", "--policy", "unbounded", "--seed", "0", "--format", "csv", "--output"]
    normal = tmp_path / "normal.csv"
    assert CliRunner().invoke(main, [*args, str(normal)]).exit_code == 0
    with open(normal, newline="") as f:
        text = f.read()
    cells = list(csv.reader(io.StringIO(text, newline="")))
    plain = io.StringIO(newline="")
    csv.writer(plain).writerows(cells)
    assert text == plain.getvalue()  # nothing escaped: the file csv.writer alone writes
    assert not any(cell.startswith("'") for row in cells for cell in row)
    answers = [float(row[2]) for row in cells[1:]]
    assert min(answers) < 0  # zero counts plus noise: negative answers, written as numbers

    labels = ["=cmd|' /C calc'!A0", "+x", "-0..-1", "@SUM(A1)", "-4", "5"]
    monkeypatch.setattr(cli, "_query_labels", lambda workload, domain: labels)
    escaped = tmp_path / "escaped.csv"
    assert CliRunner().invoke(main, [*args, str(escaped)]).exit_code == 0
    with open(escaped, newline="") as f:
        rows = list(csv.reader(f))
    assert [row[1] for row in rows[1:]] == ["'=cmd|' /C calc'!A0", "'+x", "'-0..-1", "'@SUM(A1)", "-4", "5"]
    assert [row[2] for row in rows] == [row[2] for row in cells]  # the answers, negative ones too, unchanged
    assert [row[3:] for row in rows] == [row[3:] for row in cells]


def _release(args, tmp_path):
    """Run ``blowfish-te run`` in ``tmp_path``; (exit code, parsed JSON or None, output)."""
    import json
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(main, ["run", *map(str, args), "--epsilon", "1", "--seed", "0", "--quiet"])
    finally:
        os.chdir(here)
    body = result.stdout if hasattr(result, "stdout") else result.output
    try:
        return result.exit_code, json.loads(body[body.index("{"):]), result.output
    except ValueError:
        return result.exit_code, None, result.output


def _records(tmp_path, name, rows, header="age,city,income"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


def test_run_counts_a_glob_and_a_folder_of_records_like_their_files(tmp_path):
    _records(tmp_path, "part_1.csv", ["3,NY,10.5", "5,SF,20"])
    _records(tmp_path, "part_2.csv", ["3,LA,35.2"])
    _records(tmp_path, "out/part_1.csv", ["3,NY,10.5", "5,SF,20"])
    _records(tmp_path, "out/part_2.csv", ["3,LA,35.2"])
    (tmp_path / "out" / "_SUCCESS").write_text("")  # what Spark writes beside its output
    args = ["--column", "age", "--lower", "0", "--upper", "9", "--policy", "unbounded"]
    code, by_glob, _ = _release(["part_*.csv", *args], tmp_path)
    assert code == 0
    code, by_folder, _ = _release(["out", *args], tmp_path)
    assert code == 0 and by_folder["answers"] == by_glob["answers"]  # same counts, same seed
    np.save(tmp_path / "hist.npy", np.array([0, 0, 0, 2, 0, 1, 0, 0, 0, 0]))  # the three records' histogram
    code, by_histogram, _ = _release(["hist.npy", "--policy", "unbounded"], tmp_path)
    assert code == 0 and by_histogram["answers"] == by_glob["answers"]  # every record of both files counted
    (tmp_path / "out" / "notes.txt").write_text("3\n")
    code, _, output = _release(["out", *args], tmp_path)
    assert code == 1 and "notes.txt" in output and "out/*.csv" in output
    code, _, output = _release(["nothing_*.csv", *args], tmp_path)
    assert code == 1 and "no file matches" in output
    code, _, output = _release(["part_*.csv", "--policy", "unbounded"], tmp_path)
    assert code == 1 and "need --column" in output


def test_run_releases_marginals_of_a_trillion_cell_grid_and_refuses_what_needs_its_histogram(tmp_path):
    """Six columns of 100 values: 10¹² cells, past any histogram. Marginals are planned, counted
    and released; a workload or a mechanism that needs the histogram is refused by name."""
    columns = [f"a{i}" for i in range(6)]
    rows = [",".join(str((7 * r + 13 * i) % 100) for i in range(6)) for r in range(50)]
    _records(tmp_path, "wide.csv", rows, header=",".join(columns))
    axes = [arg for c in columns for arg in ("--column", c, "--lower", "0", "--upper", "99")]
    code, out, _ = _release(["wide.csv", *axes, "--policy", "attribute", "--workload", "marginals:2", "--mechanism", "auto"],
                            tmp_path)
    assert code == 0 and len(out["answers"]) == 15 * 100**2
    assert out["plan"]["workload"] == "all 2-way marginals((100, 100, 100, 100, 100, 100))"
    for extra, named in ((["--policy", "unbounded", "--workload", "identity"], "workload 'identity'"),
                         (["--policy", "unbounded", "--workload", "marginals:2", "--mechanism", "identity"], "2147483648"),
                         (["--policy", "complete", "--workload", "marginals:2"], "policy 'complete'"),
                         (["--policy", "unbounded", "--workload", "marginals:2", "--mechanism", "laplace"],
                          "releases from the histogram")):
        code, _, output = _release(["wide.csv", *axes, *extra], tmp_path)
        assert code == 1 and named in output and "Traceback" not in output


def test_run_counts_category_and_real_columns_with_levels_and_bins(tmp_path):
    _records(tmp_path, "people.csv", ["3,NY,10.5", "5,SF,20", "3,LA,99.5", "4,NY,50"])
    code, out, _ = _release(["people.csv", "--column", "city", "--levels", "city=NY,SF,LA", "--column", "income",
                             "--bins", "income=0,10,50,100", "--column", "age", "--lower", "0", "--upper", "9",
                             "--policy", "unbounded", "--workload", "marginals:1"], tmp_path)
    assert code == 0
    assert out["plan"]["workload"] == "all 1-way marginals((3, 3, 10))"
    labels = out["queries"]
    assert labels[:3] == [f"city={c} & income in [0, 100] & age=0..9" for c in ("NY", "SF", "LA")]
    assert labels[3:6] == [f"city in NY..LA & income in {b} & age=0..9" for b in ("[0, 10)", "[10, 50)", "[50, 100]")]
    code, _, output = _release(["people.csv", "--column", "city", "--levels", "city=NY,SF"], tmp_path)
    assert code == 1 and "1 not one of the levels" in output and "'LA'" in output  # refused and counted, not dropped
    code, _, output = _release(["people.csv", "--column", "income", "--lower", "0", "--upper", "99"], tmp_path)
    assert code == 1 and "io.Bins (--bins COLUMN=E0,E1,...)" in output
    for args, message in [
        (["--column", "city", "--levels", "town=NY"], "'town' is not a --column"),
        (["--column", "city", "--levels", "city"], "COLUMN=v1,v2"),
        (["--column", "income", "--bins", "income=5,1"], "--bins income: edges must be"),
        (["--column", "city", "--levels", "city=A", "--bins", "city=0,1"], "already has --levels"),
        (["--column", "city", "--levels", "city=A", "--lower", "0", "--upper", "1"], "(0 here: none)"),
    ]:
        code, _, output = _release(["people.csv", *args], tmp_path)
        assert code == 1 and message in output, (args, output)


def test_run_refuses_records_without_column_and_records_without_header(tmp_path):
    _records(tmp_path, "people.csv", ["3,NY,10.5"])
    code, _, output = _release(["people.csv"], tmp_path)
    assert code == 1 and "first line names columns (age, city, income)" in output and "--column" in output
    (tmp_path / "ages.csv").write_text("3\n5\n")
    code, _, output = _release(["ages.csv", "--column", "age", "--lower", "0", "--upper", "9"], tmp_path)
    assert code == 1 and "holds values, not column names" in output and "'age'" in output
    code, _, output = _release(["missing.csv"], tmp_path)
    assert code == 1 and "missing.csv: no such file" in output


def test_run_reads_ranges_in_the_column_s_values_unless_told_cells(tmp_path):
    _records(tmp_path, "people.csv", ["12,NY,1", "13,NY,1", "15,NY,1"])
    (tmp_path / "ranges.csv").write_text("12,13\n10,19\n")
    domain = ["--column", "age", "--lower", "10", "--upper", "19", "--width", "2", "--policy", "unbounded"]
    code, values, _ = _release(["people.csv", *domain, "--ranges", "ranges.csv"], tmp_path)
    assert code == 0 and values["queries"] == ["age=12..13", "age=10..19"]
    (tmp_path / "cells.csv").write_text("1,1\n0,4\n")
    code, cells, _ = _release(["people.csv", *domain, "--ranges", "cells.csv", "--ranges-in", "cells"], tmp_path)
    assert code == 0 and cells["queries"] == values["queries"] and cells["answers"] == values["answers"]
    (tmp_path / "cut.csv").write_text("12,14\n")
    code, _, output = _release(["people.csv", *domain, "--ranges", "cut.csv"], tmp_path)
    assert code == 1 and "line 1" in output and "cuts through a cell of 2 values" in output
    (tmp_path / "levels.csv").write_text("SF,LA\n")
    code, out, _ = _release(["people.csv", "--column", "city", "--levels", "city=NY,SF,LA", "--policy", "unbounded",
                             "--ranges", "levels.csv"], tmp_path)
    assert code == 0 and out["queries"] == ["city in SF..LA"]


def test_run_help_lists_every_policy_and_workload_spec_of_the_tables():
    from blowfish_te import policies, workloads

    text = " ".join(CliRunner().invoke(main, ["run", "--help"], terminal_width=1000).output.split())
    assert policies.SPEC_FORMS == ("unbounded", "complete", "attribute", "line", "threshold:θ", "threshold:full", "grid:θ")
    assert set(workloads.SPEC_FORMS) >= {"marginals:k", "dpbench_ranges:M", "random_rects:M"}
    assert len(workloads.SPEC_FORMS) == len(workloads.SPEC_KINDS)
    for form in (*policies.SPEC_FORMS, *workloads.SPEC_FORMS):
        assert re.search(rf"(^|[ ,]){re.escape(form)}([ ,.;]|$)", text), form
    for form in policies.SPEC_FORMS:  # every form the help names parses
        policies.PolicySpec.parse(form.replace("θ", "4"))
    for form in workloads.SPEC_FORMS:
        workloads.from_spec(form.replace(":M", ":5").replace(":k", ":1"), (8,) if "rects" not in form else (4, 4))


def test_planning_seconds_sets_the_optimisers_time_and_plans_a_new_workload_ahead(tmp_path, monkeypatch):
    """--planning-seconds is auto's (and adaptive's) optimiser budget: at 0 the plan says the
    optimised strategy was skipped and what it was predicted to take; with room for it, --plan
    plans it and keeps it, so a later run with the default budget finds it stored (0 s). Any
    other mechanism refuses the option."""
    monkeypatch.setenv("BLOWFISH_TE_CACHE_DIR", str(tmp_path / "cache"))
    hist = tmp_path / "h.npy"
    np.save(hist, np.arange(64) % 5)
    args = ["run", str(hist), "--policy", "unbounded", "--epsilon", "1", "--workload", "random_ranges:40",
            "--workload-seed", "3", "--plan", "--format", "json"]
    skipped = CliRunner().invoke(main, args + ["--planning-seconds", "0"])
    assert skipped.exit_code == 0, skipped.output
    assert re.search(r"optimized skipped \(predicted [0-9.e-]+ s > budget 0 s\)", json.loads(skipped.output)["reason"])
    ahead = CliRunner().invoke(main, args + ["--planning-seconds", "60"])
    assert ahead.exit_code == 0 and "optimized considered" in json.loads(ahead.output)["reason"]
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "optimized considered (predicted 0 s" in json.loads(again.output)["reason"]
    refused = CliRunner().invoke(main, args + ["--mechanism", "hb", "--planning-seconds", "5"])
    assert refused.exit_code == 2 and "--planning-seconds sets the optimiser time of auto or adaptive, not of hb" in refused.output
