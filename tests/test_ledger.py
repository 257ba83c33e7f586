"""The ledger that keeps a dataset's budget across runs, and `run --plan` / `run --ledger`."""

import datetime
import json
import multiprocessing
import sqlite3
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

from blowfish_te import io
from blowfish_te.cli import main
from blowfish_te.ledger import BudgetExceeded, DatasetBudget, InvalidLedger, Ledger
from blowfish_te.routes import Plan

from tests.helpers import exactly

pytestmark = pytest.mark.core


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_charged_run_is_released_refunded_or_failed_by_where_it_ends(tmp_path):
    """The protocol as one with block: released without error; refunded when the run fails before
    it says it reads records, failed (the ε kept) after; the error goes on, its first line noted."""
    book = Ledger(tmp_path / "l.db")
    with book.charged("d", 0.25, "line(8)", "hb", "prefix(8)", total=1.0) as run:
        assert run.charge.status == "reserved" and book.budget("d").spent == 0.25
    with pytest.raises(ValueError, match="no such file"), book.charged("d", 0.25, "line(8)", "hb", "prefix(8)"):
        raise ValueError("no such file\nsecond line")
    with pytest.raises(OSError), book.charged("d", 0.25, "line(8)", "hb", "prefix(8)") as run:
        run.reading()
        raise OSError()
    settled = [(c.status, c.note) for c in book.charges("d")]
    assert settled == [("released", ""), ("refunded", "no such file"), ("failed", "OSError")]
    assert book.budget("d").spent == 0.5  # the refund freed its ε, the failure kept it
    with pytest.raises(BudgetExceeded), book.charged("d", 0.75, "line(8)", "hb", "prefix(8)"):
        pytest.fail("a refused charge runs nothing")
    assert len(book.charges("d")) == 3


def test_charges_add_up_exactly_and_the_last_one_past_the_total_is_refused(tmp_path):
    book = Ledger(tmp_path / "l.db")
    charges = [book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)", total=1.0 if i == 0 else None) for i in range(10)]
    assert book.budget("d").spent == 1.0 and book.budget("d").remaining == 0.0  # ten times 0.1 is the whole budget
    with pytest.raises(BudgetExceeded, match="0.1 would exceed dataset 'd'.s budget: 1 of 1 spent"):
        book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)")
    assert len(book.charges("d")) == 10  # the refused release charged nothing
    book.settle(charges[0], "refunded", "bad data")
    book.settle(charges[1], "failed", "disk full")
    book.settle(charges[2], "released")
    assert book.budget("d").spent == pytest.approx(0.9)  # a refund frees its ε, a failure keeps it
    book.reserve("d", 0.1, "line(8)", "hb", "prefix(8)")
    with pytest.raises(ValueError, match="not a reserved charge"):
        book.settle(charges[0], "released")
    assert [c.status for c in book.charges("d")][:3] == ["refunded", "failed", "released"]


@pytest.mark.parametrize("call, message", [
    (lambda b: b.reserve("new", 0.5, "line(8)", "hb", "w"), "no budget for dataset 'new'"),
    (lambda b: b.reserve("d", 0.5, "unbounded(8)", "hb", "w"), "budget is for policy line"),
    (lambda b: b.reserve("d", 0.5, "line(8)", "hb", "w", total=3.0), "total budget of 2"),
    (lambda b: b.reserve("d", -1, "line(8)", "hb", "w"), "epsilon must be a finite number > 0"),
    (lambda b: b.set_budget("d", "line(8)", 0.5), "already spent ε = 1"),
    (lambda b: b.settle(b.charges()[0], "lost"), "status must be one of"),
])
def test_bad_charges_name_what_is_wrong(tmp_path, call, message):
    book = Ledger(tmp_path / "l.db")
    book.reserve("d", 1.0, "line(8)", "hb", "w", total=2.0)
    with pytest.raises(ValueError, match=message):
        call(book)
    assert book.budget("d").spent == 1.0


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path):
    (tmp_path / "x.db").write_text("not sqlite at all, " * 20)
    with pytest.raises(ValueError, match="not a ledger"):
        Ledger(tmp_path / "x.db")
    with pytest.raises(ValueError, match="is a folder"):
        Ledger(tmp_path)


def test_threads_racing_for_the_last_of_a_budget_cannot_both_get_it(tmp_path):
    book = Ledger(tmp_path / "l.db")
    book.set_budget("d", "line(8)", 1.0)
    start, outcomes = threading.Barrier(8), []

    def spend():
        start.wait()
        try:
            book.reserve("d", 0.3, "line(8)", "hb", "w")
            outcomes.append(True)
        except BudgetExceeded:
            outcomes.append(False)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 5 + [True] * 3 and book.budget("d").spent == pytest.approx(0.9)


def _spend_in_a_process(path: str) -> bool:
    try:
        Ledger(path).reserve("d", 0.3, "line(8)", "hb", "w")
        return True
    except BudgetExceeded:
        return False


@pytest.mark.slow
def test_processes_sharing_a_ledger_file_spend_at_most_the_budget(tmp_path):
    path = str(tmp_path / "l.db")
    Ledger(path).set_budget("d", "line(8)", 1.0)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        outcomes = pool.map(_spend_in_a_process, [path] * 8)
    assert sum(outcomes) == 3 and Ledger(path).budget("d").spent == pytest.approx(0.9)


@pytest.mark.parametrize("shape", [(7,), (1, 5), (4, 1), (3, 6)])
def test_histogram_shape_reads_no_count_and_matches_read_histogram(tmp_path, shape):
    x = np.arange(np.prod(shape)).reshape(shape)
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "x.csv", x.reshape(shape[0], -1), fmt="%d", delimiter=",")
    for name in ("x.npy", "x.csv"):
        assert io.histogram_shape(tmp_path / name) == io.read_histogram(tmp_path / name).shape
    with pytest.raises(ValueError, match="a .npy or .csv file"):
        io.histogram_shape(tmp_path / "x.txt")


def test_run_plan_reads_no_record_and_draws_no_noise(tmp_path, monkeypatch):
    records = tmp_path / "people.csv"
    records.write_text("age\n3\n200\n")  # a record outside the domain: reading would refuse it
    monkeypatch.setattr(Plan, "release_checked", lambda *a: pytest.fail("noise drawn"))
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.5,
                     "--workload", "prefix", "--policy", "threshold:4", "--mechanism", "hb", "--plan")
    assert result.exit_code == 0, result.output
    assert "records:" not in result.stderr and "spends: ε = 0.5" in result.stdout and "expected per-query error" in result.stdout
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.5, "--workload", "prefix",
                     "--mechanism", "identity", "--plan", "--format", "json", "--output", tmp_path / "plan.json")
    assert result.exit_code == 0, result.output
    planned = json.loads((tmp_path / "plan.json").read_text())
    assert planned["epsilon"] == 0.5 and planned["policy"] == "line(100)" and planned["route"] == "transform"
    assert planned["expected_rmse"] ** 2 == pytest.approx(planned["expected_mse"])
    assert planned["candidates"][0]["expected_mse"] == planned["expected_mse"]


def test_a_release_shows_its_plan_first_and_carries_it(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(16) % 5)
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, "--workload", "prefix", "--seed", 0)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("plan:\n  auto on prefix(16) under line(16) at ε = 1")  # the default, and its choice
    out = json.loads(result.stdout)
    assert out["plan"]["expected_mse"] == out["expected_mse"] and out["plan"]["route"] == out["route"]
    quiet = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, "--workload", "prefix", "--seed", 0, "--quiet")
    assert "plan:" not in quiet.stderr and json.loads(quiet.stdout)["answers"] == out["answers"]


def test_run_with_a_ledger_refuses_before_reading_and_keeps_the_charge_of_bad_data(tmp_path, monkeypatch):
    x = tmp_path / "x.npy"
    np.save(x, np.arange(16) % 5)
    book = tmp_path / "ledger.db"
    base = ["run", x, "--workload", "prefix", "--seed", 0, "--ledger", book]
    assert _invoke(*base, "--epsilon", 0.6).exit_code == 1  # a new dataset needs --budget
    first = _invoke(*base, "--epsilon", 0.6, "--budget", 1)
    assert first.exit_code == 0, first.output and "charged ε = 0.6" in first.stderr
    reads = []
    monkeypatch.setattr(io, "read_histogram", lambda path: reads.append(path))
    second = _invoke(*base, "--epsilon", 0.6)
    assert second.exit_code == 1 and "0.6 would exceed" in second.output and reads == []
    monkeypatch.undo()
    # negative counts, refused before any noise is drawn but after the counts were read: the refusal
    # tells whether the histogram holds a negative count, so the charge stays (it used to be refunded)
    np.save(x, np.arange(16) - 3)
    third = _invoke(*base, "--epsilon", 0.4)
    assert third.exit_code == 1 and "Error:" in third.output
    listed = _invoke("ledger", book, "--format", "json")
    (entry,) = json.loads(listed.stdout)
    assert entry["spent"] == 1.0 and entry["remaining"] == 0.0
    assert [c["status"] for c in entry["charges"]] == ["released", "failed"]
    assert entry["charges"][1]["note"] and entry["policy"] == "line(16)"
    text = _invoke("ledger", book).stdout
    assert f"{x.resolve()}: policy line(16), budget ε = 1, spent 1, left 0" in text and ": failed (" in text
    assert _invoke("ledger", book, "--dataset", str(x.resolve()), "--budget", 0.5).exit_code == 1  # below what is spent
    assert _invoke("ledger", book, "--dataset", str(x.resolve()), "--budget", 2).exit_code == 0
    np.save(x, np.arange(16) % 5)
    assert _invoke(*base, "--epsilon", 1).exit_code == 0  # 0.6 + 0.4 + 1 is the raised total of 2
    assert _invoke(*base, "--epsilon", 0.5).exit_code == 1


def test_a_run_that_fails_after_noise_may_be_drawn_keeps_its_charge(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", np.arange(16) % 5)

    def broken(*args):
        raise ValueError("the mechanism failed half way")

    monkeypatch.setattr(Plan, "release_checked", broken)
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 0.25, "--seed", 0, "--ledger", tmp_path / "l.db", "--budget", 1)
    assert result.exit_code == 1 and "half way" in result.output
    (charge,) = Ledger(tmp_path / "l.db").charges()
    assert charge.status == "failed" and Ledger(tmp_path / "l.db").budget(charge.dataset).spent == 0.25


@pytest.mark.parametrize("args, message", [
    (["--plan", "--ledger", "l.db"], "--plan charges nothing"),
    (["--budget", "1"], "give --ledger too"),
    (["--plan", "--format", "csv"], "--plan writes text or json"),
    (["--format", "text"], "text is for --plan"),
])
def test_run_plan_and_ledger_usage_errors(tmp_path, args, message):
    np.save(tmp_path / "x.npy", np.arange(8))
    result = _invoke("run", tmp_path / "x.npy", "--epsilon", 1, *args)
    assert result.exit_code == 2 and message in result.output


def _ages(path, n=300):
    ages = np.random.default_rng(5).integers(0, 100, size=n)
    path.write_text("age\n" + "\n".join(map(str, ages)) + "\n")
    return ages


@pytest.mark.slow
@pytest.mark.parametrize("budget, charged", [(2, 11), (1, 10)])
def test_failing_runs_that_read_records_spend_their_epsilon(tmp_path, budget, charged):
    # the attack: move a 10-value domain along the ages, keeping the policy line(10); every run is
    # refused with the exact numbers of records below and above it, and each refusal is charged
    records, book = tmp_path / "ages.csv", tmp_path / "l.db"
    ages = _ages(records)
    for i, lower in enumerate(range(0, 110, 10)):
        result = _invoke("run", records, "--column", "age", "--lower", lower, "--upper", lower + 9, "--epsilon", 0.1,
                         "--ledger", book, "--dataset", "ages", *(["--budget", budget] if i == 0 else []))
        assert result.exit_code == 1
        if i < charged:
            below, above = int((ages < lower).sum()), int((ages > lower + 9).sum())
            assert "under line(10)" in result.stderr and "300 record(s) read" in result.output
            assert (f"{below} below the domain" in result.output) == (below > 0)
            assert (f"{above} above the domain" in result.output) == (above > 0)
        else:  # the budget is spent: refused before a record is read
            assert result.output.endswith("Error: ε = 0.1 would exceed dataset 'ages''s budget: 1 of 1 spent, 0 left "
                                          "(nothing was charged)\n") and "record(s) read" not in result.output
    left = Ledger(book).budget("ages")
    assert [c.status for c in Ledger(book).charges()] == ["failed"] * charged
    assert (left.spent, left.remaining) == ((1.1, 0.9) if budget == 2 else (1.0, 0.0))


@pytest.mark.parametrize("name, content, extra, message", [
    ("people.csv", b"name,agee\nann,3\n", [], "source {p}: no column 'age'; columns: name, agee"),
    ("people.csv", b"age,age\n3,4\n", [],
     "source {p}: the column name(s) 'age' appear more than once; rename the columns so that each name is unique"),
    ("people.csv", b"\xffage\n3\n", [], "source {p}: its first line is not a CSV header in UTF-8 ('utf-8' codec can't "
                                         "decode byte 0xff in position 0: invalid start byte)"),
    ("people.parquet", b"not parquet " * 10, [],
     "source {p}: cannot read its parquet schema (Invalid Input Error: No magic bytes found at end of file '{p}')"),
    ("people.arrow", b"never opened", ["--engine", "spark"], "the Spark engine reads CSV and Parquet files; use DuckDB for Arrow IPC"),
], ids=["column missing", "column repeated", "header not UTF-8", "not Parquet", "Arrow IPC for Spark"])
def test_a_run_that_fails_before_reading_a_record_is_refunded(tmp_path, monkeypatch, name, content, extra, message):
    path = tmp_path / name
    path.write_bytes(content)
    message = message.format(p=path)
    monkeypatch.setattr(io, "histogram", lambda *a, **k: pytest.fail("records read"))
    result = _invoke("run", path, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.25, "--quiet",
                     "--ledger", tmp_path / "l.db", "--budget", 1, "--dataset", "people", *extra)
    assert result.exit_code == 1 and result.output.splitlines()[-1] == f"Error: {message}"
    assert "Traceback" not in result.output
    (charge,) = Ledger(tmp_path / "l.db").charges()
    assert (charge.status, charge.note) == ("refunded", message)
    assert Ledger(tmp_path / "l.db").budget("people").spent == 0.0


def test_a_file_gone_before_it_is_read_is_refunded(tmp_path, monkeypatch):
    records = tmp_path / "ages.csv"
    _ages(records)
    reserve = Ledger.reserve

    def reserve_then_delete(self, *args, **kwargs):
        charge = reserve(self, *args, **kwargs)
        records.unlink()
        return charge

    monkeypatch.setattr(Ledger, "reserve", reserve_then_delete)
    result = _invoke("run", records, "--column", "age", "--lower", 0, "--upper", 99, "--epsilon", 0.25, "--quiet",
                     "--ledger", tmp_path / "l.db", "--budget", 1, "--dataset", "ages")
    assert result.exit_code == 1 and result.output.endswith(f"Error: source {str(records)!r}: no such file\n")
    monkeypatch.undo()
    assert [c.status for c in Ledger(tmp_path / "l.db").charges()] == ["refunded"]
    assert Ledger(tmp_path / "l.db").budget("ages").spent == 0.0


@pytest.mark.parametrize("options, message", [
    (["--column", "age", "--lower", "0"], "give --lower and --upper (and --width, if any) once per integer --column"),
    (["--column", "age", "--lower", "0", "--upper", "9", "--workload", "nonsense"], "--workload: "),
], ids=["no --upper", "unknown workload"])
def test_bad_options_charge_nothing(tmp_path, options, message):
    records = tmp_path / "ages.csv"
    _ages(records)
    result = _invoke("run", records, "--epsilon", 0.25, "--ledger", tmp_path / "l.db", "--budget", 1, *options)
    assert result.exit_code == 1 and message in result.output
    assert not (tmp_path / "l.db").exists()  # refused before the ledger was opened


def test_charges_add_up_exactly_on_their_decimal_values(tmp_path):
    book = Ledger(tmp_path / "l.db")
    for i in range(10):
        book.reserve("d", 0.1, "line(8)", "hb", "w", total=1.0 if i == 0 else None)
    with pytest.raises(BudgetExceeded, match=exactly("ε = 1e-16 would exceed dataset 'd''s budget: 1 of 1 spent, 0 left "
                                                     "(nothing was charged)")):
        book.reserve("d", 1e-16, "line(8)", "hb", "w")
    assert (book.budget("d").spent, book.budget("d").remaining, len(book.charges())) == (1.0, 0.0, 10)
    # 0.1 + 0.2 is 0.3: in floats it is 0.30000000000000004, which a budget of 0.3 would refuse
    book.reserve("e", 0.1, "line(8)", "hb", "w", total=0.3)
    book.reserve("e", 0.2, "line(8)", "hb", "w")
    assert (book.budget("e").spent, book.budget("e").remaining) == (0.3, 0.0)
    assert book.set_budget("e", "line(8)", 0.3).total == 0.3  # not below what is spent


_CHANGED = ". The file was changed outside blowfish_te: nothing is charged to it until the row is put right"
_STATUSES = "'reserved', 'released', 'failed', 'refunded' (lower case)"


@pytest.mark.parametrize("edit, problem", [
    ("UPDATE releases SET epsilon = -0.5 WHERE id = 1", "releases row 1: epsilon -0.5; allowed: a finite number > 0"),
    ("UPDATE releases SET epsilon = 0 WHERE id = 1", "releases row 1: epsilon 0.0; allowed: a finite number > 0"),
    ("UPDATE releases SET epsilon = 9e999 WHERE id = 2", "releases row 2: epsilon inf; allowed: a finite number > 0"),
    ("UPDATE releases SET epsilon = 'half' WHERE id = 1", "releases row 1: epsilon 'half'; allowed: a finite number > 0"),
    ("UPDATE releases SET status = 'Released' WHERE id = 1", f"releases row 1: status 'Released'; allowed: {_STATUSES}"),
    ("UPDATE releases SET status = 'forgiven' WHERE id = 2", f"releases row 2: status 'forgiven'; allowed: {_STATUSES}"),
    ("UPDATE budgets SET total = 1e308", "budgets row of dataset 'd': total 1e+308 is not the last total logged for it (1.0); "
     "allowed: a total set by Ledger.set_budget (`blowfish-te ledger FILE --dataset NAME --budget TOTAL`), which logs it"),
    ("UPDATE budgets SET total = 'lots'", "budgets row of dataset 'd': total 'lots'; allowed: a finite number > 0"),
    ("UPDATE totals SET total = -1", "totals row 1: total -1.0; allowed: a finite number > 0"),
], ids=["negative epsilon", "zero epsilon", "infinite epsilon", "text epsilon", "status in upper case", "unknown status",
        "total changed without a log", "text total", "negative logged total"])
def test_a_ledger_edited_by_hand_is_refused_naming_the_row(tmp_path, edit, problem):
    path = tmp_path / "l.db"
    book = Ledger(path)
    book.settle(book.reserve("d", 0.5, "line(8)", "hb", "w", total=1.0), "released")
    book.reserve("d", 0.25, "line(8)", "hb", "w")
    with sqlite3.connect(path) as db:
        db.execute(edit)
    message = f"ledger {path}: {problem}{_CHANGED}"
    for call in (lambda: book.reserve("d", 0.1, "line(8)", "hb", "w"), lambda: book.set_budget("d", "line(8)", 2.0),
                 lambda: book.budget("d"), book.budgets, book.charges):
        with pytest.raises(InvalidLedger, match=exactly(message)):
            call()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM releases").fetchone() == (2,)  # nothing was charged
    np.save(tmp_path / "x.npy", np.arange(8))
    for args in (["run", tmp_path / "x.npy", "--epsilon", 0.1, "--dataset", "d", "--ledger", path], ["ledger", path]):
        result = _invoke(*args)
        assert result.exit_code == 1 and result.output.splitlines()[-1] == f"Error: {message}"
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_logged_raise_is_accepted_and_an_older_ledger_has_its_totals_logged_once(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the layout before totals were logged
        db.executescript("""
            CREATE TABLE budgets (dataset TEXT PRIMARY KEY, policy TEXT NOT NULL, total REAL NOT NULL, created TEXT NOT NULL);
            CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES budgets(dataset),
                time TEXT NOT NULL, epsilon REAL NOT NULL, policy TEXT NOT NULL, mechanism TEXT NOT NULL,
                workload TEXT NOT NULL, status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '');
            INSERT INTO budgets VALUES ('d', 'line(8)', 1.0, '2024-01-01T00:00:00+00:00');
            INSERT INTO releases (dataset, time, epsilon, policy, mechanism, workload, status)
                VALUES ('d', '2024-01-01T00:00:00+00:00', 0.75, 'line(8)', 'hb', 'w', 'released');
        """)
    book = Ledger(path)
    assert book.budget("d") == DatasetBudget("d", "line(8)", 1.0, 0.75)
    assert book.set_budget("d", "line(8)", 2.0).total == 2.0  # a raise through the ledger is logged
    book.reserve("d", 1.25, "line(8)", "hb", "w")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT total FROM totals ORDER BY id").fetchall() == [(1.0,), (2.0,)]
        db.execute("DELETE FROM totals")
        db.execute("UPDATE budgets SET total = 10")
    with pytest.raises(InvalidLedger, match=exactly(f"ledger {path}: budgets row of dataset 'd': total 10.0 is not the last "
                                                    "total logged for it (none logged); allowed: a total set by Ledger.set_budget "
                                                    "(`blowfish-te ledger FILE --dataset NAME --budget TOTAL`), which logs it"
                                                    + _CHANGED)):
        Ledger(path).reserve("d", 0.1, "line(8)", "hb", "w")  # opened again: the log is not seeded twice


def _refusal(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def test_the_ledgers_refusals_name_what_is_wrong(tmp_path):
    assert _refusal(lambda: Ledger(tmp_path / "missing" / "l.db")) == f"ledger {tmp_path / 'missing' / 'l.db'}: its folder does not exist"
    book = Ledger(tmp_path / "l.db")
    assert book.budget("d") is None and book.budgets() == []
    assert _refusal(lambda: book.reserve("d", 0.5, "line(8)", "hb", "w")) == (
        f"the ledger {tmp_path / 'l.db'} has no budget for dataset 'd': give its total (--budget) on its first release")
    assert _refusal(lambda: book.reserve("d", 0.5, "line(8)", "hb", "w", total=0)) == "total must be a finite number > 0, got 0"
    assert _refusal(lambda: book.set_budget("d", "line(8)", -1)) == "total must be a finite number > 0, got -1"
    charge = book.reserve("d", 0.5, "line(8)", "hb", "w", total=1.0)
    other = ("policy unbounded(8): dataset 'd''s budget is for policy line(8); releases under another policy do not "
             "compose with it (sequential composition holds for one policy)")
    assert _refusal(lambda: book.reserve("d", 0.1, "unbounded(8)", "hb", "w")) == other
    assert _refusal(lambda: book.set_budget("d", "unbounded(8)", 2.0)) == other
    assert _refusal(lambda: book.settle(charge, "reserved")) == (
        "status must be one of ('released', 'failed', 'refunded'), got 'reserved'")
    settled = book.settle(charge, "released")
    assert (settled.status, settled.note) == ("released", "")  # no note unless one is given
    assert book.charges("d") == [settled]


def test_charges_are_stamped_in_utc(tmp_path):
    charge = Ledger(tmp_path / "l.db").reserve("d", 0.5, "line(8)", "hb", "w", total=1.0)
    assert datetime.datetime.fromisoformat(charge.time).utcoffset() == datetime.timedelta(0)


def test_a_call_waits_for_another_write_only_as_long_as_its_timeout(tmp_path):
    path = tmp_path / "l.db"
    assert Ledger(path).timeout == 60.0  # by default a run waits a minute for another run's charge
    book = Ledger(path, timeout=0.25)
    book.reserve("d", 0.5, "line(8)", "hb", "w", total=1.0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run's write transaction
    try:
        start = time.perf_counter()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            book.reserve("d", 0.25, "line(8)", "hb", "w")
        assert time.perf_counter() - start < 4.0  # 0.25 s, not sqlite's own default of 5 s
    finally:
        holder.rollback()
        holder.close()
    assert book.budget("d").spent == 0.5


def test_reopening_a_ledger_missing_a_table_logs_no_total(tmp_path):
    """Only a ledger from before totals were logged has its totals logged on opening: a file that
    has the log keeps it as it is, so a total changed by hand is still refused."""
    path = tmp_path / "l.db"
    Ledger(path).reserve("d", 0.5, "line(8)", "hb", "w", total=1.0)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE budgets SET total = 100")
        db.execute("DROP TABLE releases")
    book = Ledger(path)  # the missing table is made again
    with pytest.raises(InvalidLedger, match="total 100.0 is not the last total logged for it"):
        book.budget("d")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT total FROM totals ORDER BY id").fetchall() == [(1.0,)]
