import re
import subprocess
import sys

from click.testing import CliRunner

from blowfish_te.cli import main


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


def test_strategies_lists_the_shipped_set_and_builds_into_a_folder(tmp_path):
    listed = CliRunner().invoke(main, ["strategies", "--list"])
    assert listed.exit_code == 0, listed.output
    lines = dict(line.split(None, 1) for line in listed.output.splitlines())
    assert lines["prefix:4096"].strip() == "shipped" and lines["dpbench_ranges:2000@128x128"].strip() == "shipped"
    out = tmp_path / "made"
    built = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:256"])
    assert built.exit_code == 0, built.output
    assert "prefix:256" in built.output and " built " in built.output
    assert len(list(out.glob("*.npz"))) == 1
    again = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:256"])
    assert " stored " in again.output and len(list(out.glob("*.npz"))) == 1
    bad = CliRunner().invoke(main, ["strategies", "--out", str(out), "--only", "prefix:7"])
    assert bad.exit_code == 1 and bad.output.startswith("Error:") and "allowed: prefix:256" in bad.output
